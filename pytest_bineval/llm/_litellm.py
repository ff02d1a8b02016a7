"""The one place that imports litellm (a leaf module: it imports nothing of this package)."""

from __future__ import annotations

import logging
import os
import sys
import warnings
from typing import Any

_IMPORTED: list[Any] = []  # litellm once imported and set up here: the process's, as sys.modules is


def import_litellm() -> Any:
    """Import litellm lazily and offline-safe (the set-up runs once per process; later calls return the module).

    litellm downloads a price list when it is imported unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set (and its
    Anthropic provider a beta-headers list unless ``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS`` is), so they are set
    here, right before the import and only when the caller has not set it: importing
    pytest-bineval leaves the environment alone; only a process that reaches a model imports litellm.
    litellm is made quiet (:func:`quiet`) when this is its first import.
    """
    if _IMPORTED:
        return _IMPORTED[0]
    first = "litellm" not in sys.modules
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # and its Anthropic provider fetches a beta-headers list from GitHub at the first request unless told not to
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    # litellm's provider modules load lazily and pydantic warns about their ReadOnly TypedDicts: noise
    # for our users, filtered by its exact message (pytest applies the same filter through the plugin).
    warnings.filterwarnings("ignore", message=r".*ReadOnly.*qualifier", category=UserWarning)
    # litellm.acompletion runs part of a request in a thread that returns a coroutine; a request cancelled then
    # (the deadline of an evaluation, or its end after a context overflow) leaves that coroutine unawaited
    warnings.filterwarnings("ignore", message=r"coroutine '.*acompletion' was never awaited", category=RuntimeWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import litellm

        # build the lazily-created response schemas now, inside this filter
        litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": ""}}])
    if first:  # a process that imported litellm itself keeps its own settings
        quiet(litellm)
    _IMPORTED.append(litellm)
    return litellm


def quiet(litellm: Any) -> None:
    """Nothing from litellm on stdout/stderr: no "Give Feedback / Get Help" or "Provider List" banners (it prints
    them on errors and on cost lookups of unknown models), no log lines below ERROR. Errors reach the user as
    pytest-bineval's own messages (judge errors with their cause)."""
    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        if logger.level < logging.ERROR:
            logger.setLevel(logging.CRITICAL)
