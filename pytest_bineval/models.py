"""The data of BinEval: checklists, verdicts, evaluations (pydantic v2, lossless JSON round-trip)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from .errors import UsageError

Answer = Literal["yes", "no", "error"]


def task_digest(task: str) -> str:
    """A short, stable digest of a task text (used to notice stale pinned checklists)."""
    return hashlib.sha256(task.strip().encode("utf-8")).hexdigest()[:16]


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


class Question(BaseModel):
    """One atomic yes/no question; *yes* means the requirement is satisfied."""

    model_config = ConfigDict(frozen=True)

    id: str
    dimension: str
    text: str
    no_example: str = ""
    requirement: str = ""


class Checklist(BaseModel):
    """The questions a task prompt decomposes into, grouped by dimension."""

    task: str
    dimensions: dict[str, str] = Field(description="dimension name -> definition")
    requirements: list[str] = Field(default_factory=list)
    questions: list[Question]
    model: str = ""
    prompt_version: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def task_digest(self) -> str:
        return task_digest(self.task)

    def by_dimension(self) -> dict[str, list[Question]]:
        groups: dict[str, list[Question]] = {name: [] for name in self.dimensions}
        for q in self.questions:
            groups.setdefault(q.dimension, []).append(q)
        return groups

    def select(self, dimensions: Iterable[str] | None) -> Checklist:
        """The sub-checklist of the named dimensions (all when None); a name the checklist lacks is a
        :class:`UsageError` naming the requested and the available dimensions."""
        if dimensions is None:
            return self
        names = list(dict.fromkeys(dimensions))
        unknown = [n for n in names if n not in self.dimensions]
        if unknown:
            raise UsageError(
                f"dimension(s) {', '.join(map(repr, unknown))} requested but not in the checklist of task "
                f"{_clip(self.task)!r}: it has {', '.join(map(repr, self.dimensions))}; add them to the "
                "checklist's dimensions (e.g. @pytest.mark.bineval(dimensions=[...])) or ask for one it has"
            )
        return self.model_copy(
            update={
                "dimensions": {n: self.dimensions[n] for n in names},
                "questions": [q for q in self.questions if q.dimension in names],
            }
        )


class Verdict(BaseModel):
    """The evaluator's answer to one question about one output."""

    question_id: str
    dimension: str
    question: str
    answer: Answer
    explanation: str = ""
    p_yes: float | None = None
    error: str | None = Field(default=None, description="why no answer could be had (answer == 'error')")
    cached: bool = False
    repeats: list[Answer] = Field(
        default_factory=list,
        description="asked more than once (--bineval-repeats): each repeat's answer; `answer` is their majority "
                    "(no on a tie) and error when any repeat got no answer",
    )
    agreement: float | None = Field(
        default=None, description="asked more than once: the share of the repeats that gave the majority answer",
    )

    @property
    def samples(self) -> list[Answer]:
        """The answers this verdict stands for: one per repeat, or just its answer when asked once."""
        return list(self.repeats) if self.repeats else [self.answer]

    @property
    def unstable(self) -> bool:
        """Asked more than once, the judge gave both answers."""
        return len({a for a in self.samples if a != "error"}) > 1


class Usage(BaseModel):
    """What an operation cost."""

    llm_calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        cost: float | None
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            cache_hits=self.cache_hits + other.cache_hits,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=cost,
            seconds=self.seconds + other.seconds,
        )

    def since(self, before: Usage) -> Usage:
        """What was spent between ``before`` and this running total."""
        cost = None
        if self.cost_usd is not None:
            cost = self.cost_usd - (before.cost_usd or 0.0)
        return Usage(
            llm_calls=self.llm_calls - before.llm_calls,
            cache_hits=self.cache_hits - before.cache_hits,
            prompt_tokens=self.prompt_tokens - before.prompt_tokens,
            completion_tokens=self.completion_tokens - before.completion_tokens,
            cost_usd=cost,
            seconds=self.seconds - before.seconds,
        )

    @staticmethod
    def total(items: Iterable[Usage]) -> Usage:
        out = Usage()
        for u in items:
            out = out + u
        return out


def yes_count(verdicts: Sequence[Verdict]) -> tuple[int, int]:
    """(yes answers, answers) over the answered questions x repeats; error verdicts never count."""
    answers = [a for v in verdicts if v.answer != "error" for a in v.samples if a != "error"]
    return sum(a == "yes" for a in answers), len(answers)


def share_of_yes(verdicts: Sequence[Verdict]) -> float | None:
    """Yeses / answered questions (x repeats, when asked more than once); None when nothing was answered.
    Error verdicts never count."""
    yes, answered = yes_count(verdicts)
    return None if not answered else yes / answered


def rescale(score: float | None, a: float, b: float) -> float | None:
    """The paper's affine map S' = S * (b - a) + a."""
    return None if score is None else score * (b - a) + a


class Evaluation(BaseModel):
    """Verdicts on one output against one checklist, and the scores they add up to."""

    task: str
    model: str
    dimensions: list[str]
    verdicts: list[Verdict]
    usage: Usage = Field(default_factory=Usage)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def scores(self) -> dict[str, float | None]:
        """Per dimension: yeses / answered questions (None when no question of it was answered)."""
        return {
            d: share_of_yes([v for v in self.verdicts if v.dimension == d]) for d in self.dimensions
        }

    @computed_field  # type: ignore[prop-decorator]
    @property
    def overall(self) -> float | None:
        """All yeses / all answered questions."""
        return share_of_yes(self.verdicts)

    @property
    def errors(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.answer == "error"]

    @property
    def failed(self) -> list[Verdict]:
        """The questions answered *no*: each one is a reason."""
        return [v for v in self.verdicts if v.answer == "no"]

    def rescaled(self, a: float = 1.0, b: float = 5.0) -> dict[str, float | None]:
        """Scores mapped affinely onto [a, b], per dimension and under the key ``"overall"``."""
        out = {d: rescale(s, a, b) for d, s in self.scores.items()}
        out["overall"] = rescale(self.overall, a, b)
        return out
