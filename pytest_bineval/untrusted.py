"""Model and provider text shown in a CI log, a job summary or a terminal is inert: it cannot be read as a command
of the CI system, and it cannot reorder what a reviewer reads.

GitHub Actions reads ``::command::`` at the start of a line (leading blanks trimmed) and its older
``##[command]`` anywhere; Azure Pipelines reads ``##vso[`` anywhere. An explanation, an error cause or a
generated question may contain such text (an output under test can make the judge quote it), so every
place that prints model text passes it through :func:`inert`, which puts an invisible word joiner
(U+2060) inside those markers: a reader sees the same text, the runner sees no command.

Unicode's bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates, the marks
U+200E, U+200F and U+061C) make a line display in another order than it is written ("Trojan Source"): a
question could read "yes" where it says "no". :func:`show_controls` writes each one visibly, as ``<U+202E>``;
:func:`inert` does that too, and the GitHub summary and annotations apply it to everything they write.
"""

from __future__ import annotations

import re

_MARKERS = re.compile(r"::|##(?=\[|vso\[)")
WORD_JOINER = "\u2060"
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")


def show_controls(text: str | None) -> str:
    """``text`` with every bidirectional control written visibly (``<U+202E>``), so it cannot reorder the text."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", text or "")


def inert(text: str | None) -> str:
    """``text`` with every CI command marker broken by an invisible word joiner and every bidirectional control
    written visibly."""
    return _MARKERS.sub(lambda m: m.group(0)[0] + WORD_JOINER + m.group(0)[1:], show_controls(text))


def one_line(text: str | None) -> str:
    """Model text on one line (its line breaks shown as ⏎), inert."""
    return inert(" \u23ce ".join(part.strip() for part in (text or "").splitlines() if part.strip()))
