"""The data of BinEval: checklists, verdicts, evaluations (pydantic v2, lossless JSON round-trip)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    computed_field,
    field_validator,
    model_serializer,
)

from .conversation import turn_label
from .dimensions import did_you_mean
from .errors import UsageError
from .kinds import EXPLAIN_MODES as EXPLAIN_MODES  # re-exported: the words live in the light .kinds
from .kinds import SCORE_KINDS as SCORE_KINDS
from .kinds import STRATEGIES as STRATEGIES
from .kinds import Answer as Answer
from .kinds import ExplainMode as ExplainMode
from .kinds import ScoreKind as ScoreKind
from .kinds import Strategy as Strategy


def wants_explanation(mode: ExplainMode, answer: Answer) -> bool:
    """Whether a verdict with ``answer`` gets an explanation under ``mode`` (``failing``: every *no*)."""
    return mode == "all" or (mode == "failing" and answer == "no")


def task_digest(task: str) -> str:
    """A short, stable digest of a task text (used to notice stale pinned checklists)."""
    return hashlib.sha256(task.strip().encode("utf-8")).hexdigest()[:16]


def _clip(text: str, n: int = 60) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _omit_unset(data: dict[str, Any], optional: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the optional fields that hold their default: checklists written before those fields
    existed serialize exactly as they did (pinned files do not change when re-pinned)."""
    return {k: v for k, v in data.items() if k not in optional or v != optional[k]}


class Question(BaseModel):
    """One atomic yes/no question; *yes* means the requirement is satisfied.

    Question-specific criteria (:mod:`pytest_bineval.qworld`) also carry ``points`` (importance): positive
    points are earned when the answer is *yes*; negative points are a penalty, and such a question is always
    asked as "Does the response avoid ...?", so the penalty applies when the answer is *no*. ``branch`` names
    the scenario and perspective the criterion came from, ``tag`` a short label of what it checks.
    """

    model_config = ConfigDict(frozen=True)

    id: str
    dimension: str
    text: str
    no_example: str = ""
    requirement: str = ""
    points: int | None = None
    branch: str = ""
    tag: str = ""
    check: dict[str, Any] | None = Field(
        default=None, description='a check of the catalogue (pytest_bineval.checks), e.g. {"kind": "max_sentences", '
        '"value": 3}: code answers the question, the judge is never asked')
    scope: Literal["conversation", "each_turn"] = Field(
        default="conversation", description="about a conversation under test: the whole of it (conversation), or each "
        "assistant turn (each_turn: asked once per assistant turn, with the conversation up to it as context)")

    @field_validator("check")
    @classmethod
    def _valid_check(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        from .checks.catalogue import parse_check

        return None if value is None else parse_check(value).spec()  # a CheckError (ValueError) names the field

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_unset(handler(self), {"points": None, "branch": "", "tag": "", "check": None,
                                           "scope": "conversation"})

    @property
    def weight(self) -> int:
        """The points of the question for the points-weighted score (1 when it has none)."""
        return 1 if self.points is None else self.points


class TreeNode(BaseModel):
    """One node of a recursive expansion tree: a scenario, a perspective or a criterion."""

    id: str = Field(description="s<N> scenario, p<N> perspective, c<N> criterion")
    level: Literal["scenario", "perspective", "criterion"]
    text: str = Field(description="scenario/perspective: 'name: description'; criterion: the yes/no question")
    parent: str | None = Field(default=None, description="the node it was decomposed from (None: the question)")
    origin: Literal["decompose", "expand", "review"] = Field(
        default="decompose", description="decompose: written for its parent; expand: a 'what else?' round; "
        "review: added by the cross-branch review to fill a gap")
    round: int = Field(default=0, description="0 for the decomposition, k for the k-th expansion round")
    points: int | None = None
    tag: str = ""
    dimension: str = ""
    status: Literal["kept", "merged", "cut"] = Field(
        default="kept", description="merged: a duplicate of merged_into; cut: below the top-K by points")
    merged_into: str | None = None


class Merge(BaseModel):
    """A duplicate found by the review of one level: ``removed`` nodes were folded into ``kept``."""

    level: Literal["scenario", "perspective", "criterion"]
    kept: str
    removed: list[str]
    by: str = Field(description="'similarity <score>' (the pre-filter) or 'review' (the consolidation call)")
    text: str = Field(default="", description="the merged wording, when the review rewrote the kept node")


class QworldTree(BaseModel):
    """How question-specific criteria were made: every node of the tree, every merge, and counts per stage."""

    question: str
    widths: list[int] = Field(default_factory=list, description="generation rounds per level (Qworld only)")
    top_k: int | None = None
    similarity: str = Field(default="", description="the duplicate pre-filter: measure and threshold")
    nodes: list[TreeNode] = Field(default_factory=list)
    merges: list[Merge] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict, description="nodes per level: generated, after the "
                                   "similarity pre-filter, after the review; criteria after top-K")
    failures: list[str] = Field(default_factory=list, description="calls that gave no usable reply (skipped)")

    def node(self, node_id: str) -> TreeNode | None:
        return next((n for n in self.nodes if n.id == node_id), None)

    def level(self, level: str, *, kept_only: bool = True) -> list[TreeNode]:
        return [n for n in self.nodes if n.level == level and (n.status == "kept" or not kept_only)]


class Checklist(BaseModel):
    """The questions a task prompt decomposes into, grouped by dimension."""

    task: str
    dimensions: dict[str, str] = Field(description="dimension name -> definition")
    requirements: list[str] = Field(default_factory=list)
    questions: list[Question]
    model: str = ""
    prompt_version: str = ""
    strategy: Strategy = "bineval"
    question: str | None = Field(default=None, description="the question the criteria were written for (Qworld)")
    tree: QworldTree | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def task_digest(self) -> str:
        return task_digest(self.task)

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_unset(handler(self), {"strategy": "bineval", "question": None, "tree": None})

    @property
    def question_digest(self) -> str | None:
        """Digest of the question of a per-question checklist (None for a task checklist)."""
        return None if self.question is None else task_digest(self.question)

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
            hints = "".join(did_you_mean(n, self.dimensions) for n in unknown)
            raise UsageError(
                f"dimension(s) {', '.join(map(repr, unknown))} requested but not in the checklist of task "
                f"{_clip(self.task)!r}: it has {', '.join(map(repr, self.dimensions))}; add them to the "
                "checklist's dimensions (e.g. @pytest.mark.bineval(dimensions=[...])) or ask for one it has"
                f"{hints}"
            )
        return self.model_copy(
            update={
                "dimensions": {n: self.dimensions[n] for n in names},
                "questions": [q for q in self.questions if q.dimension in names],
            }
        )


class Confirmation(BaseModel):
    """How a question was confirmed (``--bineval-confirm K``): every ask of it, the first included, and the
    Wilson interval of their share of yes at ``level`` when the asks stopped."""

    answers: list[Answer] = Field(description="every ask's answer, the first one first")
    level: float = Field(description="the confidence level of the interval (--bineval-confidence)")
    low: float = Field(description="lower end of the Wilson interval of the share of yes")
    high: float = Field(description="upper end of the Wilson interval of the share of yes")
    decided: bool = Field(description="the interval lies on one side of 0.5: the answers agree beyond the noise")

    @property
    def split(self) -> bool:
        """The asks got both answers."""
        return "yes" in self.answers and "no" in self.answers

    @property
    def unstable(self) -> bool:
        """The asks got both answers and the interval still holds 0.5: the verdict is a coin toss."""
        return self.split and not self.decided


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

    confirmation: Confirmation | None = Field(
        default=None, description="re-asked by --bineval-confirm: every ask; `answer` is their majority (no on a "
                                  "tie) and error when a re-ask got no answer")

    @property
    def asks(self) -> list[Answer]:
        """Every answer the judge gave to this question: the confirmation's asks, the repeats, or the answer."""
        return list(self.confirmation.answers) if self.confirmation is not None else self.samples

    @property
    def samples(self) -> list[Answer]:
        """The answers this verdict stands for: one per repeat, or just its answer when asked once."""
        return list(self.repeats) if self.repeats else [self.answer]

    @property
    def unstable(self) -> bool:
        """Asked more than once, the judge gave both answers (re-asked by --bineval-confirm: and no answer won
        beyond the noise)."""
        if self.confirmation is not None:
            return self.confirmation.unstable
        return len({a for a in self.samples if a != "error"}) > 1
    explain: ExplainMode | None = Field(
        default=None, description="the explain mode that made this verdict (None: recorded before modes existed)")
    decided_by: Literal["judge", "code"] = Field(
        default="judge", description="code: the question's check answered it (no judge request)")
    turn: int | None = Field(
        default=None, description="a conversation under test: the assistant turn this verdict is about (a question "
                                  "of scope each_turn; turns count every message from 1); None: the whole output")
    found_turn: int | None = Field(
        default=None, description="a check of a whole conversation that failed: the turn where it found what failed "
                                  "(a forbidden call, calls out of order, arguments against the schema)")

    @model_serializer(mode="wrap")
    def _serialize(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _omit_unset(handler(self), {"decided_by": "judge", "confirmation": None, "turn": None,
                                           "found_turn": None})

    @property
    def asked(self) -> str:
        """The question as every output shows it: ``turn 3 (assistant): <question>`` when it is about one turn."""
        return self.question if self.turn is None else f"{turn_label(self.turn)}: {self.question}"

    @property
    def step(self) -> int | None:
        """The turn this verdict locates (its own, or where its check found what failed); None: none."""
        return self.turn if self.turn is not None else self.found_turn

    def reason(self) -> str:
        """The explanation, or why there is none (an explanation request that failed, explain mode none)."""
        if self.explanation:
            return self.explanation
        if self.error and self.answer != "error":
            return f"({self.error})"
        c = self.confirmation
        if c is not None and self.answer == "no" and c.answers[:1] == ["yes"]:  # re-asks are not explained
            return (f"(no by {c.answers.count('no')} of {len(c.answers)} asks; the first said yes, and re-asks are "
                    "not explained)")
        if self.explain == "none":
            return "(not explained: explain mode none)"
        return "(no explanation)"


# The structured-output forms a model can be asked for, from the strictest to none at all: a provider that
# rejects one is asked for the next (see llm/negotiation.py).
STRUCTURED_OUTPUT_FORMS = ("json_schema", "json_object", "prompt")


def _weaker_form(a: str | None, b: str | None) -> str | None:
    """The later (weaker) of two structured-output forms: what a model ended up with."""
    if a is None or b is None:
        return a or b
    order = {f: i for i, f in enumerate(STRUCTURED_OUTPUT_FORMS)}
    return a if order.get(a, -1) >= order.get(b, -1) else b


def _added(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in sorted({*a, *b})}


# More requests or tokens than any run makes: a report or shard that claims more (or fewer than none) is damaged or
# forged, and is refused when it is read (issue 33, item 3). One reply's usage has a tighter bound
# (llm/accounting.py: a provider's impossible report is counted as unknown).
MAX_COUNT = 10**15
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]


def no_impossible_counts(model: Any) -> Any:
    """A pydantic "after" validator of a model of counts (a report's totals): every whole number (also in a dict of
    them) from 0 to :data:`MAX_COUNT`, every other number (a cost, seconds) not negative; ValueError naming the
    field otherwise."""
    for name, value in model:
        for v in value.values() if isinstance(value, dict) else (value,):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                continue
            if (isinstance(v, int) and not 0 <= v <= MAX_COUNT) or v < 0:
                raise ValueError(f"{name} is {v}: a count is a whole number from 0 to {MAX_COUNT:,}, a cost is "
                                 "never negative")
    return model


class Usage(BaseModel):
    """What an operation cost. ``llm_calls`` counts every request sent to a model, failed ones included
    (``failed_requests`` of them gave no usable reply: an error, a timeout, an unparseable answer). Every count is a
    whole number from 0 to :data:`MAX_COUNT`; a cost or a duration is never negative."""

    llm_calls: Count = Field(default=0, description="requests sent to a model, failed ones included")
    failed_requests: Count = Field(default=0, description="requests that gave no usable reply")
    cache_hits: Count = 0
    prompt_tokens: Count = Field(default=0, description="prompt tokens, those read from or written to a provider's "
                                                     "prompt cache included")
    cached_prompt_tokens: Count = Field(default=0, description="of the prompt tokens, those the provider read from "
                                                               "its prompt cache (billed at its cache-read price)")
    cache_write_tokens: Count = Field(default=0, description="of the prompt tokens, those the provider wrote to its "
                                                             "prompt cache (Anthropic; billed at its cache-write "
                                                             "price)")
    completion_tokens: Count = 0
    cost_usd: float | None = Field(default=None, ge=0.0,
                                   description="the summed cost of the priced replies (None: none)")
    unpriced_requests: Count = Field(default=0, description="replies whose cost litellm does not know (not in "
                                                            "cost_usd, which is then a lower bound)")
    estimated_requests: Count = Field(default=0, description="replies whose usage was not reported (streams closed "
                                                             "after the answer, a server that sends none) or was "
                                                             "impossible (negative, fractional, absurd counts): their "
                                                             "tokens are estimated")
    batch_requests: Count = Field(default=0, description="of the requests, those sent through a provider's batch "
                                                         "API (--bineval-batch), priced at its batch price")
    seconds: float = Field(default=0.0, ge=0.0)
    structured_output: dict[str, str] = Field(
        default_factory=dict,
        description="models whose provider rejected a structured-output form -> the form used instead")
    below_cache_minimum: dict[str, Count] = Field(
        default_factory=dict,
        description="models -> evaluations whose shared prompt prefix is shorter than the provider's minimum for "
                    "prompt caching (estimated from the replies' prompt tokens): that prefix is billed in full")
    not_streamed: dict[str, str] = Field(
        default_factory=dict,
        description="models that could not stream the judge's replies -> why; they got an answer request and an "
                    "explanation request instead of one streamed request per question")

    def __add__(self, other: Usage) -> Usage:
        cost: float | None
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        forms = dict(self.structured_output)
        for model, form in other.structured_output.items():
            forms[model] = _weaker_form(forms.get(model), form) or form
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            failed_requests=self.failed_requests + other.failed_requests,
            cache_hits=self.cache_hits + other.cache_hits,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens + other.cached_prompt_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cost_usd=cost,
            unpriced_requests=self.unpriced_requests + other.unpriced_requests,
            estimated_requests=self.estimated_requests + other.estimated_requests,
            batch_requests=self.batch_requests + other.batch_requests,
            seconds=self.seconds + other.seconds,
            structured_output=forms,
            below_cache_minimum=_added(self.below_cache_minimum, other.below_cache_minimum),
            not_streamed={**self.not_streamed, **other.not_streamed},
        )

    def since(self, before: Usage) -> Usage:
        """What was spent between ``before`` and this running total."""
        cost = None
        if self.cost_usd is not None:
            cost = self.cost_usd - (before.cost_usd or 0.0)
        return Usage(
            llm_calls=self.llm_calls - before.llm_calls,
            failed_requests=self.failed_requests - before.failed_requests,
            cache_hits=self.cache_hits - before.cache_hits,
            prompt_tokens=self.prompt_tokens - before.prompt_tokens,
            cached_prompt_tokens=self.cached_prompt_tokens - before.cached_prompt_tokens,
            cache_write_tokens=self.cache_write_tokens - before.cache_write_tokens,
            completion_tokens=self.completion_tokens - before.completion_tokens,
            cost_usd=cost,
            unpriced_requests=self.unpriced_requests - before.unpriced_requests,
            estimated_requests=self.estimated_requests - before.estimated_requests,
            batch_requests=self.batch_requests - before.batch_requests,
            seconds=self.seconds - before.seconds,
            structured_output={m: f for m, f in self.structured_output.items()
                               if before.structured_output.get(m) != f},
            below_cache_minimum={m: n - before.below_cache_minimum.get(m, 0)
                                 for m, n in self.below_cache_minimum.items()
                                 if n > before.below_cache_minimum.get(m, 0)},
            not_streamed={m: w for m, w in self.not_streamed.items() if m not in before.not_streamed},
        )

    @staticmethod
    def total(items: Iterable[Usage]) -> Usage:
        out = Usage()
        for u in items:
            out = out + u
        return out


class ConfirmCost(BaseModel):
    """What ``--bineval-confirm`` asked: the questions the judge answered in evaluations that confirm, how many
    of them were re-asked, the re-asks, and what the re-asks spent (their share of the run's usage)."""

    questions: int = Field(default=0, description="questions the judge answered (first asks; code checks not counted)")
    reasked: int = Field(default=0, description="of them, questions re-asked (answered no, or P(yes) near 0.5)")
    reasks: int = Field(default=0, description="re-asks made (cache hits included)")
    usage: Usage = Field(default_factory=Usage, description="what the re-asks spent")

    def __add__(self, other: ConfirmCost) -> ConfirmCost:
        return ConfirmCost(questions=self.questions + other.questions, reasked=self.reasked + other.reasked,
                           reasks=self.reasks + other.reasks, usage=self.usage + other.usage)


def cost_text(cost_usd: float | None, unpriced_requests: int) -> str:
    """A cost a reader may trust: replies whose price litellm does not know make it "unknown", or a lower
    bound when other replies were priced; cache hits cost nothing but never make an unknown cost known."""
    if not unpriced_requests:
        return f"${cost_usd or 0.0:.4f}"
    if not cost_usd:
        return "unknown"
    return f"at least ${cost_usd:.4f} ({unpriced_requests} unpriced)"


def yes_count(verdicts: Sequence[Verdict]) -> tuple[int, int]:
    """(yes answers, answers) over the answered questions x repeats; error verdicts never count."""
    answers = [a for v in verdicts if v.answer != "error" for a in v.samples if a != "error"]
    return sum(a == "yes" for a in answers), len(answers)


def share_of_yes(verdicts: Sequence[Verdict]) -> float | None:
    """Yeses / answered questions (x repeats, when asked more than once); None when nothing was answered.
    Error verdicts never count."""
    yes, answered = yes_count(verdicts)
    return None if not answered else yes / answered


def points_score(verdicts: Sequence[Verdict], questions: Iterable[Question]) -> float | None:
    """The points-weighted score (HealthBench-style): points of the positive criteria answered *yes*, minus
    the |points| of the penalty criteria answered *no* (their "Does the response avoid ...?" failed), over
    the points of all positive criteria; clipped to [0, 1]. A question without points weighs 1, so on a
    checklist without points this is the share of yes. A question asked more than once counts by the share of
    its repeats that said yes (no). Error verdicts count on neither side; None when no positive criterion was
    answered.
    """
    weight = {q.id: q.weight for q in questions}
    earned = 0.0
    possible = 0.0
    for v in verdicts:
        if v.answer == "error":
            continue
        answers = [a for a in v.samples if a != "error"]
        if not answers:
            continue
        yes = sum(a == "yes" for a in answers) / len(answers)
        w = weight.get(v.question_id, 1)
        if w > 0:
            possible += w
            earned += w * yes
        elif w < 0:
            earned -= -w * (1.0 - yes)
    if possible <= 0:
        return None
    return min(1.0, max(0.0, earned / possible))


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

    def points_scores(self, questions: Iterable[Question]) -> dict[str, float | None]:
        """Per dimension: the points-weighted score (:func:`points_score`) with the points of ``questions``
        (the checklist's), and under ``"overall"`` the score over all of them."""
        qs = list(questions)
        out = {d: points_score([v for v in self.verdicts if v.dimension == d], qs) for d in self.dimensions}
        out["overall"] = points_score(self.verdicts, qs)
        return out

    def rescaled(self, a: float = 1.0, b: float = 5.0) -> dict[str, float | None]:
        """Scores mapped affinely onto [a, b], per dimension and under the key ``"overall"``."""
        out = {d: rescale(s, a, b) for d, s in self.scores.items()}
        out["overall"] = rescale(self.overall, a, b)
        return out
