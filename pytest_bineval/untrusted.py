"""Model and provider text shown in a CI log is inert: it cannot be read as a command of the CI system.

GitHub Actions reads ``::command::`` at the start of a line (leading blanks trimmed) and its older
``##[command]`` anywhere; Azure Pipelines reads ``##vso[`` anywhere. An explanation, an error cause or a
generated question may contain such text (an output under test can make the judge quote it), so every
place that prints model text passes it through :func:`inert`, which puts an invisible word joiner
(U+2060) inside those markers: a reader sees the same text, the runner sees no command.
"""

from __future__ import annotations

import re

_MARKERS = re.compile(r"::|##(?=\[|vso\[)")
WORD_JOINER = "\u2060"


def inert(text: str | None) -> str:
    """``text`` with every CI command marker broken by an invisible word joiner."""
    return _MARKERS.sub(lambda m: m.group(0)[0] + WORD_JOINER + m.group(0)[1:], text or "")


def one_line(text: str | None) -> str:
    """Model text on one line (its line breaks shown as ⏎), inert."""
    return inert(" \u23ce ".join(part.strip() for part in (text or "").splitlines() if part.strip()))
