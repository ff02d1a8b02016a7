"""Fakes for testing a suite that uses pytest-bineval, offline and without a judge model.

- :class:`ScriptedModel`: a scripted judge (and checklist writer, note-taker, Qworld) with the replies you choose,
  reached through the plugin's real request path (``--bineval-model fake/judge``);
- :class:`FaultServer`: an OpenAI-compatible HTTP server on 127.0.0.1 that answers what you script (replies,
  errors, hangs, resets) and records what it received;
- :func:`scripted_project` (and :func:`scripted_conftest`, its ``conftest.py``): a pytester project whose judge is
  a scripted model.

See docs/testing.md. Importing this package imports neither litellm nor a model.
"""

from __future__ import annotations

from .faults import (
    Action,
    FaultServer,
    Hang,
    Received,
    Reply,
    Reset,
    Stream,
    anthropic_message,
    completion,
    error_body,
    wait_until,
)
from .project import scripted_conftest, scripted_project
from .scripted import Request, Rule, ScriptedModel, ScriptedProviderError

__all__ = [
    "Action",
    "FaultServer",
    "Hang",
    "Received",
    "Reply",
    "Request",
    "Reset",
    "Rule",
    "ScriptedModel",
    "ScriptedProviderError",
    "Stream",
    "anthropic_message",
    "completion",
    "error_body",
    "scripted_conftest",
    "scripted_project",
    "wait_until",
]
