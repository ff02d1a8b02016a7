"""The one shape every output reads: :class:`EvaluationRecord` (one ``assert_passes`` evaluation) and
:class:`ReportDocument` (the versioned ``--bineval-report`` JSON).

The failure message, the terminal summary, the JSON report, pytest-xdist merging, ``--bineval-optimize``
and the ``pytest_bineval_evaluated`` hook all take these types. ``ReportDocument.load`` reads every
format this package has written (format 1 records were plain dicts; they are converted).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ._version import __version__
from .errors import UsageError
from .files import write_text_atomic
from .kinds import GATES as GATES  # re-exported
from .kinds import FailOn
from .kinds import Gate as Gate
from .models import (
    Answer,
    ConfirmCost,
    Evaluation,
    Question,
    ScoreKind,
    Strategy,
    Usage,
    Verdict,
    no_impossible_counts,
    points_score,
    share_of_yes,
    yes_count,
)
from .redaction import redact, redact_obj, replace_surrogates, secret_values
from .repeats import wilson_interval

REPORT_FORMAT = 2
# The "kind" of a report file: what tells it from a pinned-checklist file or any other JSON.
REPORT_KIND: Literal["bineval-report"] = "bineval-report"
# The keys every report of a format has (what a report written before the "kind" marker is known by).
REPORT_KEYS = {1: ("evaluations",), 2: ("generator", "settings", "totals", "evaluations")}
SOURCE_IN_REPORT = 4000  # characters of the source kept in a record
OUTPUT_IN_REPORT = 20000  # characters of the output kept in a record (the digest covers all of it)
UNSCORED_MESSAGE = 2000  # characters of an unscored test's error message kept in the report

Outcome = Literal["passed", "failed", "error"]
ChecklistStatus = Literal["pinned", "written", "unpinned", "stale", "explicit"]


def text_digest(text: str) -> str:
    """A short digest of a text (an output under test: did it change between two runs?)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def questions_digest(questions: Sequence[Question]) -> str:
    """``sha256:<hex>`` of a checklist's questions (ids, dimensions, texts and the rest): an edit to any question
    changes it. A pin entry records it of its generated questions; a report, of each evaluation's checklist."""
    body = json.dumps([q.model_dump(mode="json") for q in questions], sort_keys=True, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def clean(text: str, secrets: list[str] | None = None) -> str:
    """A string fit to leave the process: secrets redacted, lone surrogates (not valid UTF-8) replaced."""
    return redact(replace_surrogates(text)[0], secrets or ())


def _clean_verdict(v: Verdict, secrets: list[str]) -> Verdict:
    return v.model_copy(update={
        "question": clean(v.question, secrets), "explanation": clean(v.explanation, secrets),
        "error": None if v.error is None else clean(v.error, secrets),
    })


def excerpt(text: str | None, limit: int) -> str | None:
    if text is None or len(text) <= limit:
        return text
    return text[:limit] + f"… [{len(text) - limit} more characters]"


class DimensionResult(BaseModel):
    """One checked dimension of an evaluation: its score against its threshold."""

    name: str
    score: float | None = Field(description="share of yes over the answered questions x repeats (score_kind 'share'), "
                                "or the points-weighted score (score_kind 'points'); None if nothing was answered")
    threshold: float
    outcome: Outcome = Field(description="error: a question of this dimension got no answer from the judge")
    answers: int = Field(default=0, description="the answers the score is a share of: answered questions x repeats")
    low: float | None = Field(default=None, description="lower end of the score's 95% Wilson interval (share only)")
    high: float | None = Field(default=None, description="upper end of the score's 95% Wilson interval (share only)")
    score_kind: ScoreKind = Field(default="share", description="share: yeses / answered questions; points: "
                                  "points earned minus penalties over the positive points, clipped to [0, 1]")

    def gated(self, gate: Gate) -> float | None:
        """What the threshold is compared with: the score (gate ``mean``) or its interval's lower end."""
        return self.score if gate == "mean" else self.low


class Location(BaseModel):
    """Where the ``assert_passes`` call is: rootdir-relative file (POSIX) and 1-based line."""

    file: str
    line: int


class EvaluationRecord(BaseModel):
    """One evaluation made by ``assert_passes`` (or the ``bineval`` fixture) during a test."""

    model_config = ConfigDict(extra="forbid")

    test: str = Field(description="pytest node id")
    index: int = Field(default=0, description="which evaluation of the test this is (0 for the first)")
    task: str
    prompt: str | None = Field(default=None, description="the generator prompt file the test names (for optimize)")
    model: str
    checklist_model: str = ""
    checklist_status: ChecklistStatus
    prompt_version: str = Field(default="", description="version of the packaged prompts that made the checklist")
    dimensions: list[DimensionResult]
    overall: float | None = None
    outcome: Outcome
    questions: list[Question] = Field(default_factory=list)
    verdicts: list[Verdict] = Field(default_factory=list)
    output: str = Field(default="", description=f"the output under test (first {OUTPUT_IN_REPORT} characters)")
    output_digest: str = ""
    source: str | None = Field(default=None, description=f"the source (first {SOURCE_IN_REPORT} characters)")
    usage: Usage = Field(default_factory=Usage)
    location: Location | None = None
    repeats: int = Field(default=1, description="how many times each question was asked (--bineval-repeats)")
    gate: Gate = Field(default="mean", description="what each threshold was compared with: the score (mean) or "
                                                   "the lower end of its 95% Wilson interval (lower-bound)")
    score_kind: ScoreKind = Field(default="share", description="the kind of the dimension scores and of overall")
    strategy: Strategy = Field(default="bineval", description="what wrote the checklist: bineval (per task), "
                               "qworld or qworld-lite (per question, with points)")

    @classmethod
    def build(cls, *, test: str, evaluation: Evaluation, thresholds: dict[str, float], questions: Sequence[Question],
              checklist_status: ChecklistStatus, checklist_model: str = "", prompt_version: str = "",
              output: str = "", source: str | None = None, prompt: str | None = None, index: int = 0,
              location: Location | None = None, gate: Gate = "mean", score_kind: ScoreKind = "share",
              strategy: Strategy = "bineval") -> EvaluationRecord:
        """The record of ``evaluation`` judged against ``thresholds`` (its outcome is computed here); the
        scores are shares of yes, or with ``score_kind="points"`` points-weighted (:func:`points_score`, which
        has no interval: the ``lower-bound`` gate needs shares). Every text in it passes the redaction step (and
        lone surrogates are replaced): records are what leaves the process."""
        def score_of(verdicts: Sequence[Verdict]) -> float | None:
            return points_score(verdicts, questions) if score_kind == "points" else share_of_yes(verdicts)

        dims: list[DimensionResult] = []
        for name, limit in thresholds.items():
            of_dim = [v for v in evaluation.verdicts if v.dimension == name]
            score = score_of(of_dim)
            yes, answers = yes_count(of_dim)
            interval = wilson_interval(yes, answers) if score_kind == "share" else None
            low, high = interval if interval is not None else (None, None)
            gated = score if gate == "mean" else low
            errored = any(v.answer == "error" for v in of_dim)
            outcome: Outcome = "error" if errored else ("passed" if gated is not None and gated >= limit else "failed")
            dims.append(DimensionResult(name=name, score=score, threshold=limit, outcome=outcome, answers=answers,
                                        low=low, high=high, score_kind=score_kind))
        overall: Outcome = (
            "error" if any(d.outcome == "error" for d in dims)
            else "passed" if all(d.outcome == "passed" for d in dims) else "failed"
        )
        secrets = secret_values()
        kept_source = excerpt(source, SOURCE_IN_REPORT)
        return cls(
            test=test, index=index, task=clean(evaluation.task, secrets), prompt=prompt, model=evaluation.model,
            checklist_model=checklist_model, checklist_status=checklist_status, prompt_version=prompt_version,
            dimensions=dims, overall=score_of(evaluation.verdicts), outcome=overall, questions=list(questions),
            verdicts=[_clean_verdict(v, secrets) for v in evaluation.verdicts],
            output=clean(excerpt(output, OUTPUT_IN_REPORT) or "", secrets), output_digest=text_digest(output),
            source=None if kept_source is None else clean(kept_source, secrets), usage=evaluation.usage,
            location=location, repeats=max((len(v.repeats) for v in evaluation.verdicts), default=0) or 1,
            gate=gate, score_kind=score_kind, strategy=strategy,
        )

    # -- views ------------------------------------------------------------------------------------------------
    @property
    def key(self) -> str:
        """Identity across runs: the test id, and the evaluation's index when it is not the first."""
        return self.test if self.index == 0 else f"{self.test} #{self.index}"

    @property
    def scores(self) -> dict[str, float | None]:
        return {d.name: d.score for d in self.dimensions}

    @property
    def thresholds(self) -> dict[str, float]:
        return {d.name: d.threshold for d in self.dimensions}

    def points(self) -> dict[str, int]:
        """Question id -> points, for the questions that have them (question-specific criteria)."""
        return {q.id: q.points for q in self.questions if q.points is not None}

    def checked(self) -> list[Verdict]:
        """Verdicts of the checked dimensions, failing first (error, then no, then yes); within each group the
        criteria with the most points (or penalty) first."""
        dims = {d.name for d in self.dimensions}
        rank = {"error": 0, "no": 1, "yes": 2}
        points = self.points()
        return sorted((v for v in self.verdicts if v.dimension in dims),
                      key=lambda v: (rank[v.answer], -abs(points.get(v.question_id, 0))))

    def failing(self) -> list[Verdict]:
        """The questions of the checked dimensions answered *no*: each one is a reason."""
        return [v for v in self.checked() if v.answer == "no"]

    def errors(self) -> list[Verdict]:
        return [v for v in self.checked() if v.answer == "error"]

    def unstable(self) -> list[Verdict]:
        """The questions of the checked dimensions whose repeats got both answers."""
        return [v for v in self.checked() if v.unstable]


ChangeKind = Literal["regression", "unstable flip", "fix", "judge error", "recovered"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("regression", "unstable flip", "judge error", "fix", "recovered")


class QuestionRef(BaseModel):
    """A question asked in one of the two compared runs only (the checklist changed)."""

    id: str
    dimension: str
    text: str


class QuestionChange(BaseModel):
    """A question whose answer differs from the baseline's.

    ``regression``: yes -> no; ``unstable flip``: yes <-> no of a question whose repeats disagree in either run
    (reported apart, not a regression); ``fix``: no -> yes; ``judge error``: an answer became a judge error;
    ``recovered``: a judge error became an answer.
    """

    kind: ChangeKind
    question_id: str
    dimension: str
    question: str
    before: Answer
    after: Answer
    explanation: str = Field(default="", description="this run's explanation, or the judge error's cause")
    baseline_explanation: str | None = Field(default=None, description="the baseline's, when it has one")
    repeats: list[Answer] = Field(default_factory=list, description="this run's answers, when asked more than once")
    baseline_repeats: list[Answer] = Field(default_factory=list)
    edited_from: str | None = Field(default=None, description="the baseline's text of a question matched by id after a "
                                    "small edit: such a change is shown apart and kept out of the gate")


class ScoreChange(BaseModel):
    """One dimension's score in the baseline and in this run."""

    name: str
    before: float | None
    after: float | None
    delta: float | None = Field(description="after - before; None when either has no score")
    threshold: float
    p_value: float | None = Field(default=None, description="exact test of the paired answers (stat_test)")
    stat_test: str = Field(default="", description="mcnemar (paired answers), fisher (answer counts, with repeats) "
                           "or none (no question answered in both runs)")
    regressed: bool = Field(default=False, description="the score fell beyond the tolerance and p_value < alpha")


class EvaluationDiff(BaseModel):
    """One evaluation (same :attr:`EvaluationRecord.key`) in the baseline and in this run."""

    key: str
    test: str
    index: int = 0
    location: Location | None = None
    outcome: Outcome
    baseline_outcome: Outcome
    output_changed: bool = Field(description="the output under test differs from the baseline's (digest)")
    changes: list[QuestionChange] = Field(default_factory=list)
    scores: list[ScoreChange] = Field(default_factory=list)
    questions_added: list[QuestionRef] = Field(default_factory=list)
    questions_removed: list[QuestionRef] = Field(default_factory=list)
    matched_by_text: int = Field(default=0, description="questions matched by their text (the id changed)")
    matched_by_id: int = Field(default=0, description="questions matched by their id after a small edit of the text")
    replaced: int = Field(default=0, description="ids asked in both runs with texts too different to compare: "
                          "counted in questions_added and questions_removed")
    unchanged: int = Field(default=0, description="matched questions with the baseline's answer")


class EvaluationRef(BaseModel):
    """An evaluation found in one of the two compared runs only."""

    key: str
    test: str
    index: int = 0
    outcome: Outcome
    location: Location | None = None


class RegressionReport(BaseModel):
    """This run compared with a baseline report (``--bineval-baseline``), per evaluation and per question."""

    baseline: str = Field(description="the baseline report file, as given")
    baseline_created: str = ""
    baseline_generator: str = ""
    tolerance: float = Field(default=0.0, description="score drops up to this much are not counted")
    alpha: float = Field(default=0.05, description="significance level of a dimension's drop (--bineval-alpha)")
    fail_on: FailOn = Field(default="significant", description="what --bineval-fail-on-regression acts on: significant "
                         "(dimensions regressed beyond noise) or any (any regression flip or score drop)")
    compared: list[EvaluationDiff] = Field(default_factory=list)
    added: list[EvaluationRef] = Field(default_factory=list, description="evaluations the baseline does not have")
    removed: list[EvaluationRef] = Field(default_factory=list, description="baseline evaluations of tests that ran "
                                         "this run without making them")
    not_run: list[EvaluationRef] = Field(default_factory=list, description="baseline evaluations of tests this run did "
                                         "not run (deselected, another subset, skipped or deleted)")
    judged_differently: list[str] = Field(default_factory=list, description="how what judged the baseline differs "
                                          "from what judged this run (judge model, judge prompt, prompts version, "
                                          "checklists): said before anything else")
    failed: bool = Field(default=False, description="--bineval-fail-on-regression failed the session")
    gate_option: str = Field(default="--bineval-fail-on-regression", description="the option that set the gate, "
                             "as the gate's text names it: --bineval-fail-on-regression (a pytest run) or bineval "
                             "report --fail-on-regression (the gate of a report file)")

    def changes(self, kind: ChangeKind) -> list[tuple[EvaluationDiff, QuestionChange]]:
        """The changes of ``kind``, except those of slightly edited questions (:meth:`edited_changes`)."""
        return [(d, c) for d in self.compared for c in d.changes if c.kind == kind and c.edited_from is None]

    def edited_changes(self) -> list[tuple[EvaluationDiff, QuestionChange]]:
        """Answers that changed on questions matched by id after a small edit: shown apart, not gated."""
        return [(d, c) for d in self.compared for c in d.changes if c.edited_from is not None]

    def regressed(self) -> list[tuple[EvaluationDiff, ScoreChange]]:
        """Dimensions whose drop is beyond the tolerance and significant at alpha (REGRESSED)."""
        return [(d, s) for d, s in self.score_drops() if s.regressed]

    def score_drops(self) -> list[tuple[EvaluationDiff, ScoreChange]]:
        """Dimension scores that fell by more than the tolerance."""
        return [(d, s) for d in self.compared for s in d.scores
                if s.delta is not None and s.delta < -self.tolerance - 1e-9]

    def questions_unmatched(self) -> int:
        """Questions of compared evaluations found in one run only (by id or text)."""
        return sum(len(d.questions_added) + len(d.questions_removed) for d in self.compared)

    def fail_reason(self) -> str | None:
        """Why the gate (``--bineval-fail-on-regression``, or ``bineval report --fail-on-regression``: the
        :attr:`gate_option` named at the end) fails this run, or None: :meth:`gate_text` and the option."""
        text = self.gate_text()
        if text is None:
            return None
        return f"{text} ({self.gate_option}{'=any' if self.fail_on == 'any' else ''})"

    def gate_text(self) -> str | None:
        """What the gate fails this run for, without the option, or None: significant regressions of dimensions,
        or with ``fail_on="any"`` any regression flip or score drop beyond the tolerance."""
        if self.fail_on != "any":
            n = len(self.regressed())
            if not n:
                return None
            return (f"{n} dimension{'s' if n != 1 else ''} regressed significantly (p < {self.alpha:g}) vs baseline "
                    f"{self.baseline}")
        parts = []
        if n := len(self.changes("regression")):
            parts.append(f"{n} regression{'s' if n != 1 else ''}")
        if n := len(self.score_drops()):
            parts.append(f"{n} score drop{'s' if n != 1 else ''} beyond tolerance {self.tolerance:.2f}")
        if not parts:
            return None
        return f"{' and '.join(parts)} vs baseline {self.baseline}"


class UnstableQuestion(BaseModel):
    """A question whose repeats got both answers (``--bineval-repeats``), or whose asks split without deciding
    (``--bineval-confirm``): its verdict is not reproducible."""

    key: str = Field(description="the evaluation's EvaluationRecord.key")
    dimension: str
    question_id: str
    question: str
    answers: list[Answer]
    agreement: float | None

    @classmethod
    def of(cls, records: Iterable[EvaluationRecord]) -> list[UnstableQuestion]:
        return [cls(key=r.key, dimension=v.dimension, question_id=v.question_id, question=v.question,
                    answers=v.asks, agreement=v.agreement) for r in records for v in r.unstable()]


class ConfirmationSummary(BaseModel):
    """What ``--bineval-confirm K`` did and cost, next to what ``--bineval-repeats K+1`` would have asked."""

    rounds: int = Field(description="K: re-asks allowed per question (--bineval-confirm)")
    level: float = Field(description="confidence level of the Wilson interval that stops the re-asks")
    questions: int = Field(description="questions the judge answered (first asks; code checks not counted)")
    reasked: int = Field(description="of them, questions re-asked (answered no, or P(yes) near 0.5)")
    reasks: int = Field(description="re-asks made (cache hits included)")
    decided: int = Field(default=0, description="re-asked questions whose interval ended on one side of 0.5")
    unstable: int = Field(default=0, description="re-asked questions whose asks split without deciding")
    requests: int = Field(description="requests the re-asks sent (cache hits not counted), failed ones included")
    cache_hits: int = Field(default=0, description="re-asks answered from the reply cache")
    asks: int = Field(description="asks in all: questions + reasks")
    repeats_asks: int = Field(description="asks --bineval-repeats K+1 would have made: questions x (K + 1)")

    @classmethod
    def of(cls, rounds: int, level: float, cost: ConfirmCost,
           records: Iterable[EvaluationRecord] = ()) -> ConfirmationSummary:
        confirmed = [v.confirmation for r in records for v in r.verdicts if v.confirmation is not None]
        return cls(rounds=rounds, level=level, questions=cost.questions, reasked=cost.reasked, reasks=cost.reasks,
                   decided=sum(c.decided for c in confirmed), unstable=sum(c.unstable for c in confirmed),
                   requests=cost.usage.llm_calls, cache_hits=cost.usage.cache_hits,
                   asks=cost.questions + cost.reasks, repeats_asks=cost.questions * (rounds + 1))


class UnscoredTest(BaseModel):
    """A test that errored before any evaluation of it was recorded: no task, no checklist (its generation
    failed), a pin error under ``--bineval-strict``, a usage error. It has no record, yet it is no pass."""

    test: str = Field(description="pytest node id")
    error: str = Field(description="the exception type")
    message: str = Field(default="", description=f"what it said (redacted, first {UNSCORED_MESSAGE} characters)")

    @classmethod
    def build(cls, test: str, error: str, message: str) -> UnscoredTest:
        return cls(test=test, error=error, message=clean(message)[:UNSCORED_MESSAGE])


class Totals(BaseModel):
    """Run totals; the usage is everything the run's engines spent (checklists and evaluations)."""

    evaluations: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = Field(default=0, description="evaluations that ended in a judge error")
    unscored_tests: int = Field(default=0, description="tests that errored before any evaluation (see unscored)")
    rerun_evaluations: int = Field(default=0, description="evaluations of attempts a re-run plugin replaced "
                                                          "(pytest-rerunfailures); their requests are in the usage")
    questions: int = 0
    judge_errors: int = Field(default=0, description="questions the judge gave no answer to")
    llm_calls: int = Field(default=0, description="requests sent to models, failed ones included")
    failed_requests: int = Field(default=0, description="requests that gave no usable reply")
    cache_hits: int = 0
    prompt_tokens: int = 0
    cached_prompt_tokens: int = Field(default=0, description="of the prompt tokens, read from providers' prompt "
                                                             "caches")
    cache_write_tokens: int = Field(default=0, description="of the prompt tokens, written to providers' prompt "
                                                           "caches")
    completion_tokens: int = 0
    cost_usd: float | None = None
    unpriced_requests: int = Field(default=0, description="replies whose cost is unknown (not in cost_usd)")
    estimated_requests: int = Field(default=0, description="streamed replies closed after the answer (or without a "
                                                           "usage report): their tokens are estimated")
    structured_output: dict[str, str] = Field(
        default_factory=dict, description="models whose provider rejected json_schema -> the form used instead")
    below_cache_minimum: dict[str, int] = Field(
        default_factory=dict, description="models -> evaluations whose shared prompt prefix is below the "
                                          "provider's minimum for prompt caching")
    not_streamed: dict[str, str] = Field(
        default_factory=dict, description="models that could not stream the judge's replies -> why (two requests "
                                          "per explained question instead of one)")
    budget_refused: int = Field(default=0, description="evaluations and checklist generations refused because "
                                                       "--bineval-budget was spent (their tests are errors)")
    unpinned_checklists: int = 0
    pinned_checklists_written: int = 0
    unstable_questions: int = Field(default=0, description="questions whose repeats got both answers")
    regressions: int = Field(default=0, description="vs the baseline: stable questions answered yes, now no")
    unstable_flips: int = Field(default=0, description="vs the baseline: unstable questions whose answer flipped")
    fixes: int = Field(default=0, description="vs the baseline: questions answered no, now yes")
    new_judge_errors: int = Field(default=0, description="vs the baseline: answers that became judge errors")
    score_drops: int = Field(default=0, description="vs the baseline: dimension scores down by more than the "
                                                    "tolerance")
    check_counts = model_validator(mode="after")(no_impossible_counts)  # negative or absurd counts: no report

    @classmethod
    def of(cls, records: Iterable[EvaluationRecord], usage: Usage, *, pins_written: int = 0,
           regressions: RegressionReport | None = None, unscored: int = 0, reruns: int = 0,
           unpinned: int | None = None, budget_refused: int = 0) -> Totals:
        """``unpinned``: the pin entries a run's unpinned or stale checklists would be (the plugin knows them);
        None: estimated from the records."""
        recs = list(records)
        diff = regressions or RegressionReport(baseline="")
        if unpinned is None:
            unpinned = len({pin_key(r) for r in recs if r.checklist_status in ("unpinned", "stale")})
        return cls(
            evaluations=len(recs),
            unscored_tests=unscored,
            rerun_evaluations=reruns,
            passed=sum(r.outcome == "passed" for r in recs),
            failed=sum(r.outcome == "failed" for r in recs),
            errors=sum(r.outcome == "error" for r in recs),
            questions=sum(len(r.verdicts) for r in recs),
            judge_errors=sum(sum(v.answer == "error" for v in r.verdicts) for r in recs),
            llm_calls=usage.llm_calls,
            failed_requests=usage.failed_requests,
            cache_hits=usage.cache_hits,
            prompt_tokens=usage.prompt_tokens,
            cached_prompt_tokens=usage.cached_prompt_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            completion_tokens=usage.completion_tokens,
            cost_usd=usage.cost_usd,
            unpriced_requests=usage.unpriced_requests,
            estimated_requests=usage.estimated_requests,
            structured_output=dict(usage.structured_output),
            below_cache_minimum=dict(usage.below_cache_minimum),
            not_streamed=dict(usage.not_streamed),
            budget_refused=budget_refused,
            unpinned_checklists=unpinned,
            pinned_checklists_written=pins_written,
            unstable_questions=sum(len(r.unstable()) for r in recs),
            **cls.comparison_counts(diff),
        )

    @staticmethod
    def comparison_counts(diff: RegressionReport) -> dict[str, int]:
        """The totals of a comparison with a baseline (regressions, fixes, ...)."""
        return {"regressions": len(diff.changes("regression")), "unstable_flips": len(diff.changes("unstable flip")),
                "fixes": len(diff.changes("fix")), "new_judge_errors": len(diff.changes("judge error")),
                "score_drops": len(diff.score_drops())}


def pin_key(rec: EvaluationRecord) -> tuple[str, ...]:
    """Which pin entry a record's checklist would be: one per test function (its parameters share the pin file)
    and task; criteria written per question (qworld) are one entry per question."""
    base = rec.test.split("[", 1)[0]
    dims = tuple(sorted({q.dimension for q in rec.questions}))
    if rec.strategy == "bineval":
        return (base, rec.task, rec.strategy, *dims)
    return (base, rec.task, rec.strategy, *dims, *sorted(q.text for q in rec.questions))


class ReportSettings(BaseModel):
    """The settings a report was made with (no secret: keys stay in the environment)."""

    model: str = ""
    checklist_model: str = ""
    cache: str = ""
    temperature: float | None = None
    concurrency: int | None = None
    timeout: float | None = None
    retries: int | None = None
    judge_prompt: str | None = None
    repeats: int | None = None
    gate: Gate | None = None
    budget: str | None = Field(default=None, description="--bineval-budget: dollars (0.50) or tokens (200000tok)")


class OptimizeOutcome(BaseModel):
    """What ``--bineval-optimize`` did to one generator prompt file."""

    prompt: str
    status: str  # updated | unchanged | no failures | rolled back | not run | cut | error
    message: str = ""
    score: float | None = None
    failures: int = 0
    lessons: list[dict[str, Any]] = Field(default_factory=list)
    chars_before: int = 0
    chars_after: int = 0
    history: str = ""
    usage: Usage = Field(default_factory=Usage)
    train: list[str] = Field(default_factory=list, description="tests whose failures the lessons came from")
    held_out: list[str] = Field(default_factory=list, description="tests that judged each candidate, unseen")
    iterations: list[dict[str, Any]] = Field(default_factory=list, description="the loop's iterations, in order")
    notes: list[str] = Field(default_factory=list)


class ChecklistGeneration(BaseModel):
    """The checklists the run generated and what generating them cost: requests no evaluation record carries, so
    that the run's totals are the records' usage plus this (plus the requests of re-run attempts replaced)."""

    generated: int = Field(default=0, description="checklists generated (not read from a pinned file)")
    usage: Usage = Field(default_factory=Usage)


class JudgedBy(BaseModel):
    """What judged a run: the judge model(s), the judge prompt and the prompts' version, and the checklist of each
    evaluation. A baseline judged otherwise is compared all the same, but its answers may differ because the judge
    did: every output says so first (:func:`pytest_bineval.baseline.judge_differences`)."""

    model: str = Field(default="", description="the run's judge model (--bineval-model)")
    models: list[str] = Field(default_factory=list, description="every judge model the run's evaluations used (an "
                              "assertion may name its own), sorted")
    prompt_version: str = Field(default="", description="version of the packaged prompts (prompts/VERSION)")
    judge_prompt: str = Field(default="", description="the judge prompt: 'judge.md (packaged)' or the file of "
                              "--bineval-judge-prompt")
    judge_prompt_digest: str = Field(default="", description="sha256 of the judge prompt's turns, as sent")
    stream: str = Field(default="", description="--bineval-stream: auto (a hosted judge answers in one streamed "
                        "request, its prompt ending with the turn that asks for the answer and the explanation) or "
                        "off (two requests)")
    checklists: dict[str, str] = Field(default_factory=dict, description="evaluation key -> digest of the questions "
                                       "it was judged with (questions_digest; none for a record without them)")

    @classmethod
    def of_records(cls, records: Iterable[EvaluationRecord], *, model: str = "", prompt_version: str = "",
                   judge_prompt: str = "", judge_prompt_digest: str = "", stream: str = "") -> JudgedBy:
        recs = list(records)
        return cls(model=model, models=sorted({r.model for r in recs if r.model}), prompt_version=prompt_version,
                   judge_prompt=judge_prompt, judge_prompt_digest=judge_prompt_digest, stream=stream,
                   checklists={r.key: questions_digest(r.questions) for r in recs if r.questions})


PinActionKind = Literal["created", "rewritten", "listed", "kept"]


class PinAction(BaseModel):
    """What an update run (``--bineval-update-checklists``) did to one pin entry: ``created``, ``rewritten`` (new
    questions), ``listed`` (a test added to the tests the entry lists) or ``kept`` (edited by hand, so not
    rewritten; ``why`` says more)."""

    model_config = ConfigDict(frozen=True)

    action: PinActionKind
    path: str = Field(description="the pin file, relative to the rootdir (POSIX) when inside it")
    dimensions: tuple[str, ...] = ()
    task: str = Field(default="", description="the entry's task (or question, for criteria written per question)")
    why: str = ""
    test: str = Field(default="", description="listed: the test added to the entry's tests")


class ReportDocument(BaseModel):
    """The ``--bineval-report`` JSON document (``format`` 2)."""

    format: Literal[2] = 2
    kind: Literal["bineval-report"] = Field(default=REPORT_KIND, description="what this JSON document is "
                                            "(reports written before this marker existed have none)")
    generator: str = f"pytest-bineval {__version__}"
    created: str = Field(default_factory=lambda: datetime.now(timezone.utc).isoformat(timespec="seconds"))
    settings: ReportSettings = Field(default_factory=lambda: ReportSettings())
    totals: Totals = Field(default_factory=lambda: Totals())
    evaluations: list[EvaluationRecord] = Field(default_factory=list)
    optimize: list[OptimizeOutcome] | None = None
    regressions: RegressionReport | None = Field(default=None, description="this run vs --bineval-baseline")
    unstable: list[UnstableQuestion] = Field(default_factory=list,
                                             description="questions whose repeats got both answers")
    unscored: list[UnscoredTest] = Field(default_factory=list,
                                         description="tests that errored before any evaluation was recorded")
    failed_tests: list[str] = Field(default_factory=list, description="ids of the tests whose call failed or "
                                    "errored (an evaluation below threshold in a test that expects it is no news)")
    notes: list[str] = Field(default_factory=list, description="problems the run met, as the terminal showed them")
    ran_tests: list[str] | None = Field(default=None, description="ids of the tests whose call ran (None: a report "
                                        "written before reports kept them): compared with a baseline later "
                                        "(bineval report --baseline), a baseline test the run did not run is "
                                        "not run, not removed")
    collected_tests: list[str] | None = Field(default=None, description="ids of the tests the run collected, "
                                              "deselected ones included (None: not kept)")
    partial: bool = Field(default=False, description="the run was cut short (interrupted, stopped by "
                          "-x/--maxfail, an internal error): its tests are not all here")
    partial_reason: str | None = Field(default=None, description="why the run is partial")
    checklists: ChecklistGeneration = Field(default_factory=lambda: ChecklistGeneration(),
                                            description="checklist generation: its requests are in the totals")
    judged_by: JudgedBy | None = Field(default=None, description="what judged the run (None: a report written "
                                       "before reports recorded it)")
    pins: list[PinAction] = Field(default_factory=list, description="what --bineval-update-checklists did: each "
                                  "pin entry created, rewritten, listed (a test added) or kept because edited by hand")
    confirmation: ConfirmationSummary | None = Field(
        default=None, description="--bineval-confirm: what it re-asked and cost (its requests are in the totals)")

    def compared_with(self, diff: RegressionReport) -> ReportDocument:
        """This document holding ``diff`` (this run against a baseline) as its comparison, its totals counting it."""
        totals = self.totals.model_copy(update=Totals.comparison_counts(diff))
        return self.model_copy(update={"regressions": diff, "totals": totals})

    @classmethod
    def parse(cls, data: Any) -> ReportDocument:
        """A document from its decoded JSON, format 1 or 2; UsageError naming what is wrong, and where
        (``evaluations[3].dimensions[0].score``), otherwise.

        A file is a report when it says so (``"kind": "bineval-report"``, which every report of this version
        has) or, written before that marker, when it has the keys every report of its format has: any other
        JSON object with ``"format": 2`` (a pinned-checklist file, say) is refused, never read as an empty
        baseline. Numbers must be finite (no ``NaN``, ``Infinity``), and each evaluation (test id and index)
        appears once."""
        if not isinstance(data, dict):
            raise UsageError(f"a bineval report is a JSON object, not {type(data).__name__}")
        fmt = data.get("format")
        if fmt not in (1, REPORT_FORMAT):
            raise UsageError(f"unknown bineval report format {fmt!r}: this version reads formats 1 and "
                             f"{REPORT_FORMAT}")
        _check_kind(data, fmt)
        number = _non_finite(data)
        if number is not None:
            raise UsageError(f"not a valid bineval report: {number}; a report holds finite numbers only")
        try:
            document = cls._from_format_1(data) if fmt == 1 else cls.model_validate(data)
        except ValidationError as exc:
            raise UsageError(f"not a valid bineval report (format {fmt}): {_validation_text(exc, '')}") from None
        except RecursionError:
            raise UsageError("not a valid bineval report: it is nested too deeply to be one") from None
        _check_scores(document.evaluations)
        _check_unique(document.evaluations)
        return document

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ReportDocument:
        """Read a report file written by any version of this plugin; UsageError naming the file and the place
        otherwise."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise UsageError(f"cannot read the bineval report {os.fspath(path)}: {exc}") from None
        except RecursionError:
            raise UsageError(f"cannot read the bineval report {os.fspath(path)}: its JSON is nested too deeply "
                             "to be a report") from None
        try:
            return cls.parse(data)
        except UsageError as exc:
            raise UsageError(f"{os.fspath(path)}: {exc}") from None

    def judge(self) -> JudgedBy:
        """What judged the run: as recorded, or for an older report what its settings and records tell (the judge
        prompt and the prompts' version unknown)."""
        if self.judged_by is not None:
            return self.judged_by
        return JudgedBy.of_records(self.evaluations, model=self.settings.model)

    def to_json(self) -> str:
        """The document as JSON, every string through the redaction step (records are redacted when built; this
        covers what was loaded or assembled otherwise)."""
        return json.dumps(redact_obj(self.model_dump(mode="json")), indent=2, ensure_ascii=False) + "\n"

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (a reader never sees half a report)."""
        write_text_atomic(path, self.to_json())

    @classmethod
    def _from_format_1(cls, data: dict[str, Any]) -> ReportDocument:
        records = []
        counts: dict[str, int] = {}
        for i, old in enumerate(_items(data, "evaluations", "")):
            try:
                records.append(cls._record_of_format_1(old, f"evaluations[{i}]", counts))
            except ValidationError as exc:
                raise UsageError(f"not a valid bineval report (format 1): "
                                 f"{_validation_text(exc, f'evaluations[{i}]')}") from None
        for name in ("settings", "totals"):
            if not isinstance(data.get(name) or {}, dict):
                raise UsageError(f"not a valid bineval report (format 1): {name} is a "
                                 f"{_json_type(data[name])}, not an object")
        totals = dict(data.get("totals") or {})
        totals.setdefault("errors", sum(r.outcome == "error" for r in records))
        optimize = data.get("optimize")
        return cls(
            generator="pytest-bineval (format 1)", created="",
            settings=ReportSettings.model_validate({k: v for k, v in dict(data.get("settings") or {}).items()
                                                    if k in ReportSettings.model_fields}),
            totals=Totals.model_validate({k: v for k, v in totals.items() if k in Totals.model_fields}),
            evaluations=records,
            optimize=None if optimize is None else _models(OptimizeOutcome, data, "optimize", ""),
        )

    @staticmethod
    def _record_of_format_1(old: Any, place: str, counts: dict[str, int]) -> EvaluationRecord:
        """One format-1 evaluation entry as a record; UsageError naming ``place`` when it has not its shape."""
        def bad(what: str) -> UsageError:
            return UsageError(f"not a valid bineval report (format 1): {place}{what}")

        if not isinstance(old, dict):
            raise bad(f" is {_json_type(old)}, not an object")
        for name in ("thresholds", "scores", "usage"):
            if not isinstance(old.get(name) or {}, dict):
                raise bad(f".{name} is {_json_type(old[name])}, not an object")
        if "test" not in old:
            raise bad(": it has no 'test'")
        verdicts = _models(Verdict, old, "verdicts", place)
        dims = []
        for name, limit in dict(old.get("thresholds") or {}).items():
            score = (old.get("scores") or {}).get(name)
            if isinstance(limit, bool) or not isinstance(limit, (int, float)):
                raise bad(f".thresholds.{name} is {_json_type(limit)}, not a number")
            if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
                raise bad(f".scores.{name} is {_json_type(score)}, not a number")
            errored = any(v.answer == "error" for v in verdicts if v.dimension == name)
            outcome: Outcome = "error" if errored else (
                "passed" if score is not None and score >= limit else "failed")
            dims.append(DimensionResult(name=name, score=score, threshold=float(limit), outcome=outcome))
        test = str(old["test"])
        index = counts.get(test, 0)
        counts[test] = index + 1
        output = str(old.get("output") or "")
        return EvaluationRecord(
            test=test, index=index, task=str(old.get("task", "")), prompt=old.get("prompt"),
            model=str(old.get("model", "")), checklist_model=str(old.get("checklist_model") or ""),
            checklist_status=old.get("checklist_status", "unpinned"), dimensions=dims,
            overall=old.get("overall"), outcome=old.get("outcome", "failed"),
            questions=_models(Question, old, "questions", place),
            verdicts=verdicts, output=output, output_digest=text_digest(output) if output else "",
            source=old.get("source"), usage=Usage.model_validate(old.get("usage") or {}),
        )


# -- reading a report file: what is wrong, and where --------------------------------------------------------------
def _json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (``an array``, ``a string``, ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "a number",
             float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _place(prefix: str, loc: Sequence[Any]) -> str:
    """``evaluations[3].dimensions[0].score`` from a prefix and a pydantic error location."""
    out = prefix
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "the document"


def _validation_text(exc: ValidationError, prefix: str) -> str:
    """The first errors of a validation, each as ``place: message`` (``evaluations[0].outcome: Input should be
    'passed', 'failed' or 'error' (got 'maybe')``)."""
    errors = exc.errors(include_url=False)
    parts = []
    for e in errors[:3]:
        got = e.get("input")
        shown = "" if isinstance(got, (dict, list)) else f" (got {str(got)[:60]!r})"
        parts.append(f"{_place(prefix, e['loc'])}: {e['msg']}{shown}")
    more = f"; and {len(errors) - 3} more" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def _items(data: dict[str, Any], key: str, place: str) -> list[Any]:
    """``data[key]``, which must be an array (absent or null: empty); UsageError naming the place otherwise."""
    value = data.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise UsageError(f"not a valid bineval report: {_place(place, [key])} is {_json_type(value)}, "
                         "not an array")
    return value


M = TypeVar("M", bound=BaseModel)


def _models(model: type[M], data: dict[str, Any], key: str, place: str) -> list[M]:
    """Each entry of the array ``data[key]`` validated as ``model``; UsageError naming the entry otherwise."""
    out = []
    for j, item in enumerate(_items(data, key, place)):
        try:
            out.append(model.model_validate(item))
        except ValidationError as exc:
            raise UsageError(f"not a valid bineval report (format 1): "
                             f"{_validation_text(exc, _place(place, [key, j]))}") from None
    return out


def _check_kind(data: dict[str, Any], fmt: int) -> None:
    """UsageError unless ``data`` is a report: it says so, or (written before the marker) has a report's keys."""
    kind = data.get("kind")
    if kind == REPORT_KIND:
        return
    if kind is not None:
        raise UsageError(f"not a bineval report: its \"kind\" is {str(kind)[:60]!r}, not {REPORT_KIND!r}")
    missing = [k for k in REPORT_KEYS[fmt] if k not in data]
    if missing:
        hint = " (it looks like a pinned-checklist file)" if "checklists" in data else ""
        raise UsageError(f"not a valid bineval report{hint}: it has no \"kind\": {REPORT_KIND!r} and lacks "
                         f"{', '.join(map(repr, missing))}, which every report of format {fmt} has")


def _non_finite(data: Any) -> str | None:
    """``place is NaN`` (or ``Infinity``, ``-Infinity``: a number too large for a float reads so too) for the first
    number in ``data`` that is not finite, or None. Iterative: a deep document cannot exhaust the stack here."""
    todo: list[tuple[Any, str]] = [(data, "")]
    while todo:
        value, place = todo.pop()
        if isinstance(value, float) and not math.isfinite(value):
            number = "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
            return f"{place or 'the document'} is {number}"
        if isinstance(value, dict):
            todo.extend((v, _place(place, [str(k)])) for k, v in reversed(value.items()))
        elif isinstance(value, list):
            todo.extend((v, _place(place, [i])) for i, v in reversed(list(enumerate(value))))
    return None


def _check_scores(records: Sequence[EvaluationRecord]) -> None:
    """UsageError naming the first score, interval end or threshold outside [0, 1] (every one a share)."""
    for i, rec in enumerate(records):
        values: list[tuple[str, float | None]] = [(f"evaluations[{i}].overall", rec.overall)]
        for j, d in enumerate(rec.dimensions):
            values += [(f"evaluations[{i}].dimensions[{j}].{name}", getattr(d, name))
                       for name in ("score", "threshold", "low", "high")]
        for place, value in values:
            if value is not None and not 0.0 <= value <= 1.0:
                raise UsageError(f"not a valid bineval report: {place} is {value!r}, outside [0, 1] (scores, "
                                 "their intervals and thresholds are shares)")


def _check_unique(records: Sequence[EvaluationRecord]) -> None:
    """UsageError when two entries are the same evaluation (test id and index): which one counts cannot be told."""
    seen: dict[tuple[str, int], int] = {}
    for i, rec in enumerate(records):
        first = seen.setdefault((rec.test, rec.index), i)
        if first != i:
            raise UsageError(f"not a valid bineval report: evaluations[{i}] repeats evaluations[{first}] (test "
                             f"{rec.test!r}, evaluation index {rec.index}); a report holds each evaluation once "
                             "(was it merged by hand?)")
