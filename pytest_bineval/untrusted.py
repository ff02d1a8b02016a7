"""Model and provider text shown in a CI log, a job summary or a terminal is inert: it cannot be read as a command
of the CI system, and it cannot reorder what a reviewer reads.

GitHub Actions reads ``::command::`` at the start of a line (leading blanks trimmed) and its older
``##[command]`` anywhere; Azure Pipelines reads ``##vso[`` anywhere. An explanation, an error cause or a
generated question may contain such text (an output under test can make the judge quote it), so every
place that prints model text passes it through :func:`inert`, which puts an invisible word joiner
(U+2060) inside those markers: a reader sees the same text, the runner sees no command. A ``::`` inside a line
(a test id, ``tests/test_x.py::test_a``) is no command: it is left as it is, so a copied test id still runs.
The start of the text counts as the start of a line (the text may be printed at one).

Unicode's bidirectional controls (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates, the marks
U+200E, U+200F and U+061C) make a line display in another order than it is written ("Trojan Source"): a
question could read "yes" where it says "no". :func:`show_controls` writes each one visibly, as ``<U+202E>``;
:func:`inert` does that too, and the GitHub summary and annotations apply it to everything they write.
"""

from __future__ import annotations

import re

# "::" at the start of the text or of a line (any line break str.splitlines knows, after any blanks: the runner
# trims them), "##[" / "##vso[" anywhere
_MARKERS = re.compile(r"(?:^|(?<=[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]))\s*:(?=:)|##(?=\[|vso\[)")
WORD_JOINER = "\u2060"
BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")


def show_controls(text: str | None) -> str:
    """``text`` with every bidirectional control written visibly (``<U+202E>``), so it cannot reorder the text."""
    return _BIDI.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", text or "")


def inert(text: str | None) -> str:
    """``text`` with every CI command marker broken by an invisible word joiner and every bidirectional control
    written visibly."""
    return _MARKERS.sub(_break, show_controls(text))


def _break(match: re.Match[str]) -> str:
    marker = match.group(0)  # blanks and the first ':' of '::', or the '##' of '##[' / '##vso['
    return marker + WORD_JOINER if marker.endswith(":") else marker[0] + WORD_JOINER + marker[1:]


def one_line(text: str | None) -> str:
    """Model text on one line (its line breaks shown as ⏎), inert."""
    return inert(" \u23ce ".join(part.strip() for part in (text or "").splitlines() if part.strip()))
