"""The words of the package's enumerations (answers, explain modes, checklist strategies, score kinds, gates, the
modes of the pin update and of the regression gate) and the threshold type: plain ``Literal`` types and tuples,
importable without pydantic, so that the option table and the marker check (``pytest --help``, collection) load no
model module. :mod:`.models` and :mod:`.record` re-export them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Answer = Literal["yes", "no", "error"]
ExplainMode = Literal["failing", "all", "none"]
EXPLAIN_MODES: tuple[ExplainMode, ...] = ("failing", "all", "none")
StreamMode = Literal["auto", "off"]  # --bineval-stream
STREAM_MODES: tuple[StreamMode, ...] = ("auto", "off")
Strategy = Literal["bineval", "qworld", "qworld-lite"]
STRATEGIES: tuple[str, ...] = ("bineval", "qworld", "qworld-lite")
ScoreKind = Literal["share", "points"]
SCORE_KINDS: tuple[str, ...] = ("share", "points")
Gate = Literal["mean", "lower-bound"]
GATES: tuple[Gate, ...] = ("mean", "lower-bound")
PinUpdate = Literal["missing", "all"]  # --bineval-update-checklists[=MODE]
PIN_UPDATES: tuple[PinUpdate, ...] = ("missing", "all")
FailOn = Literal["significant", "any"]  # --bineval-fail-on-regression[=MODE]
FAIL_ON: tuple[FailOn, ...] = ("significant", "any")

# A threshold: one share for every dimension, or per dimension ({"fluency": 0.6, "*": 0.8}): assertions.thresholds_for
Threshold = float | Mapping[str, float]
