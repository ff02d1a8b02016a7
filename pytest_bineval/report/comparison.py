"""This run against a baseline run (``--bineval-baseline``): the comparison's types (:class:`RegressionReport`
and its parts) and :func:`diff_runs`, a pure function of two lists of records; :class:`BaselineDiff` is the HTML
page's view of a comparison.

Evaluations are matched by :attr:`EvaluationRecord.key` (test id and index of the evaluation in the test),
questions within a matched pair by meaning, always within one dimension: first the same id with the same
normalized text (whitespace collapsed, case folded), then the same text under another id (the checklist was
renumbered), then the same id with a *small edit* of the text: a :func:`similarity` of at least
:data:`EDIT_SIMILARITY` (0.8). Answers that changed on a slightly edited question are shown apart and kept out
of the gate. An id whose text differs more is a *replaced* question: removed and added, never compared, so never
a regression or a fix. What is left over was asked in one run only and is listed as added or removed.

A conversation's verdicts about one turn (questions of scope ``each_turn``) are matched by turn as well: turn 5's
answer is compared with the baseline's turn 5. A conversation that gained or lost turns says so
(:attr:`EvaluationDiff.turns_changed`); the verdicts of turns one run lacks are added or removed, never compared.
All the verdicts of one evaluation, every turn's, stay that evaluation's: the suite's statistic takes an evaluation
as one unit (one paired score change per dimension), so a long conversation does not count as many independent
cases.

The gate's two questions (docs/regression-suites.md, "Statistics"): *did the suite get worse?* -- each dimension
over every compared evaluation (:func:`suite_dimensions`, :mod:`pytest_bineval.gate_stats`) on the questions matched
by text (the slightly edited ones are left out); and *did this case get worse?* -- each question that flipped from
yes to no carries a :class:`FlipCheck`: set here when the comparison alone decides it (the judge's input did not
change: noise; a code check: no noise), else *pending* until :mod:`pytest_bineval.gate` re-asks the judge.

What judged each run (:class:`~pytest_bineval.report.record.JudgedBy`: judge model, judge prompt, prompts version,
checklists) is compared too: :func:`judge_differences` says how they differ, and every output says it first, as
an answer that changed with the judge is no news about the output.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..conversation import turn_label
from ..gate_stats import DEFAULT_ALPHA, MEANINGFUL_DROP, SuiteVerdictKind, suite_verdicts
from ..gate_stats import Pair as RatePair
from ..kinds import FailOn
from ..models import Answer, Verdict
from .record import EvaluationRecord, JudgedBy, Location, Outcome
from .source_change import SourceChange, diff_sources

ChangeKind = Literal["regression", "unstable flip", "fix", "judge error", "recovered"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("regression", "unstable flip", "judge error", "fix", "recovered")


class QuestionRef(BaseModel):
    """A question asked in one of the two compared runs only (the checklist changed, or the conversation's turns)."""

    id: str
    dimension: str
    text: str
    turn: int | None = Field(default=None, description="the assistant turn of a conversation it was asked of")


FlipStatus = Literal["pending", "confirmed", "unstable", "same input", "code check", "skipped", "unconfirmed",
                     "error"]


class FlipCheck(BaseModel):
    """Whether a question that flipped from yes (baseline) to no (this run) is a regression of its case.

    ``confirmed``: fresh asks about both outputs kept the flip (at the level of :class:`FlipConfirmation`): a
    regression of the case; ``unstable``: they did not (the judge's noise), never failing the gate; ``same input``:
    nothing the judge reads changed (output, source, task, question, judge), so the flip is the judge's noise;
    ``code check``: a check in code answered it, which has no noise: a regression of the case; ``skipped``:
    another flip of the case was confirmed first, so this one was not re-asked; ``unconfirmed``: it could not be
    re-asked (``reason`` says why): neither a regression nor noise; ``error``: a re-ask got no answer from the
    judge; ``pending``: not examined yet."""

    status: FlipStatus = "pending"
    new: list[Answer] = Field(default_factory=list, description="fresh asks about this run's output")
    baseline: list[Answer] = Field(default_factory=list, description="fresh asks about the baseline's output")
    reason: str = Field(default="", description="why it is unconfirmed, an error or the same input")

    @property
    def regression(self) -> bool:
        """A regression of its case (confirmed, or decided by a code check)."""
        return self.status in ("confirmed", "code check")


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
    flip: FlipCheck | None = Field(default=None, description="yes -> no: whether re-asking confirmed it")
    turn: int | None = Field(default=None, description="the assistant turn of a conversation it was asked of")

    @property
    def asked(self) -> str:
        """The question as outputs show it (``turn 3 (assistant): ...`` when asked of one turn)."""
        return self.question if self.turn is None else f"{turn_label(self.turn)}: {self.question}"


class ScoreChange(BaseModel):
    """One dimension's score in the baseline and in this run."""

    name: str
    before: float | None
    after: float | None
    delta: float | None = Field(description="after - before; None when either has no score")
    threshold: float


class EvaluationDiff(BaseModel):
    """One evaluation (same :attr:`EvaluationRecord.key`) in the baseline and in this run."""

    key: str
    test: str
    index: int = 0
    location: Location | None = None
    outcome: Outcome
    baseline_outcome: Outcome
    output_changed: bool = Field(description="the output under test differs from the baseline's (digest)")
    source_change: SourceChange = Field(default_factory=SourceChange, description="how the source differs from "
                                        "the baseline's: same, changed (documents added, removed, changed) or "
                                        "unknown (a baseline that did not record it)")
    changes: list[QuestionChange] = Field(default_factory=list)
    scores: list[ScoreChange] = Field(default_factory=list)
    questions_added: list[QuestionRef] = Field(default_factory=list)
    questions_removed: list[QuestionRef] = Field(default_factory=list)
    matched_by_text: int = Field(default=0, description="questions matched by their text (the id changed)")
    matched_by_id: int = Field(default=0, description="questions matched by their id after a small edit of the text")
    replaced: int = Field(default=0, description="ids asked in both runs with texts too different to compare: "
                          "counted in questions_added and questions_removed")
    unchanged: int = Field(default=0, description="matched questions with the baseline's answer")
    params: dict[str, str] = Field(default_factory=dict, description="the test's parameters (EvaluationRecord.params)")
    output: str | None = Field(default=None, description="this run's output, kept when a question flipped yes -> no")
    baseline_output: str | None = Field(default=None, description="the baseline's output, kept likewise")

    def flips(self) -> list[QuestionChange]:
        """The questions that flipped from yes to no (a slightly edited one is not the same question)."""
        return [c for c in self.changes if c.flip is not None and c.edited_from is None]

    @property
    def regressed(self) -> bool:
        """A confirmed regression of this case: a flip confirmed by re-asking, or decided by a code check."""
        return any(c.flip is not None and c.flip.regression for c in self.flips())

    @property
    def inputs(self) -> str:
        """What changed of what the judge was asked about (:meth:`SourceChange.label`): ``output changed``,
        ``source changed``, ``output and source changed``, ``same output and source`` or ``same output, source
        unknown``."""
        return self.source_change.label(self.output_changed)

    @property
    def same_inputs(self) -> bool:
        """The same output judged against the same source: only here can a flip be the judge's noise."""
        return not self.output_changed and self.source_change.state == "same"


    turns: int | None = Field(default=None, description="the conversation's turns (None: the output is a text)")
    baseline_turns: int | None = Field(default=None, description="the baseline conversation's turns")

    @property
    def turns_changed(self) -> str | None:
        """A conversation that gained or lost turns (or a text that became one), said plainly; None: neither."""
        now, was = self.turns, self.baseline_turns
        if now == was:
            return None
        if now is None or was is None:
            what = "a text" if now is None else f"a conversation of {now} turns"
            other = "a text" if was is None else f"a conversation of {was} turns"
            return f"the output is {what}, the baseline's was {other}: its turns' verdicts are not compared"
        one = abs(now - was) == 1
        span = f"turn {max(now, was)} is" if one else f"turns {min(now, was) + 1}-{max(now, was)} are"
        if now > was:
            return (f"the conversation gained turns: {now} now, {was} in the baseline; {span} new, "
                    f"{'its' if one else 'their'} verdicts are not compared")
        return (f"the conversation lost turns: {now} now, {was} in the baseline; {span} gone, "
                f"{'its' if one else 'their'} verdicts are not compared")

class SuiteDimension(BaseModel):
    """The suite-level answer for one dimension (:func:`pytest_bineval.gate_stats.suite_verdicts`): did its mean
    score over the compared evaluations fall beyond the judge's noise?"""

    name: str
    verdict: SuiteVerdictKind
    evaluations: int = Field(description="compared evaluations with a question of the dimension answered in both runs")
    questions: int = Field(description="such questions, over those evaluations")
    before: float | None = Field(default=None, description="mean score on those questions in the baseline")
    after: float | None = Field(default=None, description="and now")
    change: float = Field(description="mean of the evaluations' paired changes (after - before)")
    p_value: float = Field(description="one-sided sign-flip test over the evaluations")
    p_adjusted: float = Field(description="Holm across the dimensions, x2 (the gate's two questions): vs alpha")
    exact: bool = Field(default=True, description="exact enumeration (else seeded Monte Carlo)")
    detectable: float | None = Field(default=None, description="not regressed: the smallest drop detected with 80% "
                                     "power at detectable_at (None: none the scores leave room for)")
    detectable_at: float = Field(default=0.0, description="the level the detectable drop is computed at")
    meaningful: float = Field(default=MEANINGFUL_DROP, description="uninformative when the detectable drop is larger")


class FlipConfirmation(BaseModel):
    """How the run's flips were confirmed (:mod:`pytest_bineval.flips`) and what it cost."""

    flips: int = Field(description="flips examined by re-asking (F)")
    asks: int = Field(description="k: fresh asks of each output per flip, at most")
    tolerance: int = Field(description="j: answers against the flip allowed per side")
    level: float = Field(description="each flip's level: alpha / 2 / F")
    bound: float = Field(description="the largest chance that a flip of noise is confirmed: at most level")
    reasks: int = Field(default=0, description="fresh asks made (cache hits included)")
    requests: int = Field(default=0, description="requests they sent (cache hits not counted), failed ones included")
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = 0.0
    engine: bool = Field(default=True, description="a judge was there to re-ask (False: bineval report without "
                         "--confirm-flips: every examined flip is unconfirmed)")


class KeptInput(BaseModel):
    """The full output and source of one of this run's evaluations whose record keeps less (cut or redacted):
    what re-asking a flip needs (:mod:`pytest_bineval.gate`), kept in memory and sent by pytest-xdist workers in
    their ledger, never written to a report."""

    key: str
    output: str
    source: str | None = None
    conversation: list[dict[str, Any]] | None = Field(
        default=None, description="a conversation's messages in full (output is then its transcript)")


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
                         "(confirmed regressions of cases and dimensions regressed across the suite) or any (any "
                         "regression flip or score drop)")
    compared: list[EvaluationDiff] = Field(default_factory=list)
    suite: list[SuiteDimension] = Field(default_factory=list, description="the suite-level verdict per dimension")
    confirmation: FlipConfirmation | None = Field(default=None, description="how the flips were confirmed")
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
    untrusted: dict[str, str] = Field(default_factory=dict, description="dimensions the gate does not act on, as "
                                      "--bineval-trust-kappa decided (pytest_bineval.trust) -> why: their changes "
                                      "are shown, not gated")

    def changes(self, kind: ChangeKind) -> list[tuple[EvaluationDiff, QuestionChange]]:
        """The changes of ``kind``, except those of slightly edited questions (:meth:`edited_changes`)."""
        return [(d, c) for d in self.compared for c in d.changes if c.kind == kind and c.edited_from is None]

    def edited_changes(self) -> list[tuple[EvaluationDiff, QuestionChange]]:
        """Answers that changed on questions matched by id after a small edit: shown apart, not gated."""
        return [(d, c) for d in self.compared for c in d.changes if c.edited_from is not None]

    def regressed_cases(self) -> list[EvaluationDiff]:
        """The compared evaluations with a confirmed regression (the per-case question)."""
        return [d for d in self.compared if d.regressed]

    def regressed_dimensions(self) -> list[SuiteDimension]:
        """The dimensions the suite-level question calls regressed."""
        return [s for s in self.suite if s.verdict == "regressed"]

    def flips(self, *statuses: FlipStatus) -> list[tuple[EvaluationDiff, QuestionChange]]:
        """The yes -> no flips (of the given statuses; all when none is given)."""
        return [(d, c) for d in self.compared for c in d.flips()
                if c.flip is not None and (not statuses or c.flip.status in statuses)]

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
        """What the gate fails this run for, without the option, or None. By default (``significant``): cases with a
        confirmed regression, dimensions regressed across the suite, and flips that could not be settled (a
        judge error while re-asking, or no judge to re-ask: neither a regression nor noise until re-asked); with
        ``fail_on="any"``: any regression flip or score drop beyond the tolerance. The :attr:`untrusted`
        dimensions are left out (--bineval-trust-kappa)."""
        parts = []
        if self.fail_on != "any":
            cases = [d for d in self.regressed_cases()
                     if any(c.flip is not None and c.flip.regression and c.dimension not in self.untrusted
                            for c in d.flips())]
            if cases:
                parts.append(f"{len(cases)} case{'s' if len(cases) != 1 else ''} regressed (confirmed): "
                             + names([d.key for d in cases]))
            dims = [s for s in self.regressed_dimensions() if s.name not in self.untrusted]
            if dims:
                parts.append(f"{', '.join(s.name for s in dims)} regressed across the suite ("
                             + ", ".join(f"p = {p_text(s.p_adjusted)}" for s in dims) + ")")
            if n := sum(c.dimension not in self.untrusted for _, c in self.flips("error")):
                parts.append(f"{n} flipped question{'s' if n != 1 else ''} got a judge error on re-asking")
            if n := sum(c.dimension not in self.untrusted for _, c in self.flips("unconfirmed", "pending")):
                parts.append(f"{n} flipped question{'s' if n != 1 else ''} could not be confirmed")
        else:
            if n := sum(c.dimension not in self.untrusted for _, c in self.changes("regression")):
                parts.append(f"{n} regression{'s' if n != 1 else ''}")
            if n := sum(s.name not in self.untrusted for _, s in self.score_drops()):
                parts.append(f"{n} score drop{'s' if n != 1 else ''} beyond tolerance {self.tolerance:.2f}")
        if not parts:
            return None
        return f"{(' and ' if self.fail_on == 'any' else '; ').join(parts)} vs baseline {self.baseline}"


def names(keys: Sequence[str], most: int = 5) -> str:
    """``a, b, c and 2 more``."""
    shown = ", ".join(keys[:most])
    return shown + (f" and {len(keys) - most} more" if len(keys) > most else "")


def p_text(p: float) -> str:
    """A p-value as text: ``0.031``, ``< 0.001``."""
    return f"{p:.2g}" if p >= 0.001 else "< 0.001"


Pair = tuple[Verdict, Verdict]


EDIT_SIMILARITY = 0.8  # difflib ratio of two normalized texts at or above which an edit is small


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def similarity(a: str, b: str) -> float:
    """``difflib.SequenceMatcher`` ratio of the normalized texts: 1.0 the same, 0.0 nothing in common."""
    return SequenceMatcher(None, _norm(a), _norm(b), autojunk=False).ratio()


def match_questions(before: Sequence[Verdict], after: Sequence[Verdict]) -> tuple[list[Pair], int, int,
                                                                                   list[Verdict], list[Verdict]]:
    """(pairs (before, after), matched by text only, matched by id after a small edit, added, removed)."""
    old = list(before)
    new = list(after)
    pairs: list[Pair] = []
    counts = {"text": 0, "id": 0}

    def take(how: str, same: Callable[[Verdict, Verdict], bool]) -> None:
        nonlocal new
        left: list[Verdict] = []
        for a in new:
            found = next((b for b in old if same(b, a)), None)
            if found is None:
                left.append(a)
                continue
            old.remove(found)
            pairs.append((found, a))
            if how in counts:
                counts[how] += 1
        new = left

    take("exact", lambda b, a: (b.question_id == a.question_id and b.dimension == a.dimension and b.turn == a.turn
                                and _norm(b.question) == _norm(a.question)))
    take("text", lambda b, a: (b.dimension == a.dimension and b.turn == a.turn
                               and _norm(b.question) == _norm(a.question)))
    take("id", lambda b, a: (b.question_id == a.question_id and b.dimension == a.dimension and b.turn == a.turn
                             and similarity(b.question, a.question) >= EDIT_SIMILARITY))
    return pairs, counts["text"], counts["id"], new, old


def classify(before: Verdict, after: Verdict) -> ChangeKind | None:
    """What changed between two answers to one question (None: the same answer)."""
    if before.answer == after.answer:
        return None
    if after.answer == "error":
        return "judge error"
    if before.answer == "error":
        return "recovered"
    if before.unstable or after.unstable:
        return "unstable flip"
    return "regression" if before.answer == "yes" else "fix"


def _answers(v: Verdict) -> list[Answer]:
    """Every answer of a question asked more than once (repeats, or --bineval-confirm's asks); [] if asked once."""
    asks = v.asks
    return asks if len(asks) > 1 else []


def _ref(v: Verdict) -> QuestionRef:
    return QuestionRef(id=v.question_id, dimension=v.dimension, text=v.question, turn=v.turn)


def same_input(before: EvaluationRecord, after: EvaluationRecord, b: Verdict, a: Verdict) -> bool:
    """Whether the judge read the same thing for question ``b`` of ``before`` and ``a`` of ``after``: the same
    output and source (digests; a source a baseline did not record is never taken for the same), task, question
    text and judge model. A flip there is the judge's own noise."""
    return (bool(before.output_digest) and before.output_digest == after.output_digest
            and before.source_digest is not None and before.source_digest == after.source_digest
            and before.task == after.task and b.question == a.question and before.model == after.model)


def _flip(before: EvaluationRecord, after: EvaluationRecord, b: Verdict, a: Verdict, same_judge: bool) -> FlipCheck:
    """What the comparison alone says of a yes -> no flip."""
    if b.decided_by == "code" and a.decided_by == "code":
        return FlipCheck(status="code check", reason="a check in code answered it: no judge noise")
    if same_judge and same_input(before, after, b, a):
        return FlipCheck(status="same input", reason="the judge read the same output, source, task and question")
    return FlipCheck()


def _rates(v: Verdict) -> tuple[int, int]:
    """(yes, answers) of a verdict's samples: its repeats, or its one answer (an error counts as none)."""
    samples = [x for x in v.samples if x != "error"] if v.answer != "error" else []
    return samples.count("yes"), len(samples)


def rate_pairs(pairs: Sequence[Pair]) -> dict[str, list[RatePair]]:
    """Dimension -> (yes before, answers before, yes now, answers now) of the questions matched by text."""
    out: dict[str, list[RatePair]] = {}
    for b, a in pairs:
        if _norm(a.question) != _norm(b.question):
            continue  # a slightly edited question is not the same question
        (yb, nb), (ya, na) = _rates(b), _rates(a)
        if nb and na:
            out.setdefault(a.dimension, []).append((yb, nb, ya, na))
    return out


def diff_evaluation(before: EvaluationRecord, after: EvaluationRecord, *, tolerance: float = 0.0,
                    same_judge: bool = True) -> EvaluationDiff:
    """One evaluation in the baseline and in this run, question by question and dimension by dimension;
    ``same_judge``: both runs were judged alike (model, judge prompt, prompts' version)."""
    pairs, by_text, by_id, added, removed = match_questions(before.verdicts, after.verdicts)
    replaced = len({v.question_id for v in added} & {v.question_id for v in removed})
    changes: list[QuestionChange] = []
    unchanged = 0
    for b, a in pairs:
        kind = classify(b, a)
        if kind is None:
            unchanged += 1
            continue
        edited = None if _norm(a.question) == _norm(b.question) else b.question
        changes.append(QuestionChange(
            kind=kind, question_id=a.question_id, dimension=a.dimension, question=a.question,
            before=b.answer, after=a.answer,
            explanation=(a.error or "") if a.answer == "error" else a.explanation,
            baseline_explanation=((b.error or None) if b.answer == "error" else b.explanation) or None,
            repeats=_answers(a), baseline_repeats=_answers(b), edited_from=edited,
            flip=(_flip(before, after, b, a, same_judge) if (b.answer, a.answer) == ("yes", "no") and edited is None
                  else None), turn=a.turn,
        ))
    rank = {k: i for i, k in enumerate(CHANGE_KINDS)}
    changes.sort(key=lambda c: (rank[c.kind], c.dimension, c.question_id, c.turn or 0))
    old_dims = {d.name: d for d in before.dimensions}
    scores = []
    for d in after.dimensions:
        prior = old_dims.get(d.name)
        old_score = prior.score if prior is not None else None
        delta = None if old_score is None or d.score is None else d.score - old_score
        scores.append(ScoreChange(name=d.name, before=old_score, after=d.score, delta=delta, threshold=d.threshold))
    flipped = any(c.flip is not None for c in changes)
    return EvaluationDiff(
        key=after.key, test=after.test, index=after.index, location=after.location, outcome=after.outcome,
        baseline_outcome=before.outcome,
        output_changed=bool(before.output_digest) and before.output_digest != after.output_digest,
        source_change=diff_sources(before, after),
        changes=changes, scores=scores, questions_added=[_ref(v) for v in added],
        questions_removed=[_ref(v) for v in removed], matched_by_text=by_text, matched_by_id=by_id,
        replaced=replaced, unchanged=unchanged, params=dict(after.params),
        output=after.output if flipped else None, baseline_output=before.output if flipped else None,
        turns=None if after.conversation is None else len(after.conversation),
        baseline_turns=None if before.conversation is None else len(before.conversation),
    )


def suite_dimensions(pairs: Sequence[dict[str, list[RatePair]]], *, alpha: float = DEFAULT_ALPHA,
                     tolerance: float = 0.0) -> list[SuiteDimension]:
    """The suite-level verdict of each dimension over the compared evaluations (each one's :func:`rate_pairs`)."""
    dims: dict[str, list[list[RatePair]]] = {}
    for evaluation in pairs:
        for name, ps in evaluation.items():
            dims.setdefault(name, []).append(ps)
    out = []
    for v in suite_verdicts(dims, alpha=alpha, tolerance=tolerance):
        clusters = dims[v.dimension]

        def mean(side: int, clusters: list[list[RatePair]] = clusters) -> float | None:
            scores = [sum(p[side] / p[side + 1] for p in c) / len(c) for c in clusters if c]
            return sum(scores) / len(scores) if scores else None

        out.append(SuiteDimension(
            name=v.dimension, verdict=v.verdict, evaluations=v.evaluations, questions=v.questions, before=mean(0),
            after=mean(2), change=v.change, p_value=v.p_value, p_adjusted=v.p_adjusted, exact=v.exact,
            detectable=v.detectable, detectable_at=v.detectable_at))
    return out


def _digest(digest: str) -> str:
    return digest.removeprefix("sha256:")[:12]


def judge_differences(before: JudgedBy, after: JudgedBy, compared: Collection[str] = ()) -> list[str]:
    """How what judged the baseline (``before``) differs from what judged this run, one sentence each (none: the
    same, as far as both record it); ``compared``: the keys of the evaluations both runs made, whose checklists
    are compared. What a report does not record (an older one) is not compared."""
    lines: list[str] = []
    was = ", ".join(before.models) or before.model
    now = ", ".join(after.models) or after.model
    if was and now and set(before.models or [before.model]) != set(after.models or [after.model]):
        lines.append(f"the baseline was judged by {was}, this run by {now}")
    digests = (before.judge_prompt_digest, after.judge_prompt_digest)
    if all(digests) and digests[0] != digests[1]:
        lines.append(f"the baseline was judged with the judge prompt {before.judge_prompt} (sha256 "
                     f"{_digest(before.judge_prompt_digest)}), this run with {after.judge_prompt} (sha256 "
                     f"{_digest(after.judge_prompt_digest)})")
    if before.prompt_version and after.prompt_version and before.prompt_version != after.prompt_version:
        lines.append(f"the baseline was judged with version {before.prompt_version} of pytest-bineval's prompts, "
                     f"this run with version {after.prompt_version}")
    hosted = [m for m in (after.models or [after.model]) if m and not m.startswith("bineval/")]
    if before.stream and after.stream and before.stream != after.stream and hosted:
        lines.append(f"the baseline was judged with --bineval-stream {before.stream}, this run with "
                     f"--bineval-stream {after.stream}: a hosted judge's requests differ (streamed, its prompt ends "
                     "with a turn asking for the answer and the explanation in one reply)")
    keys = [k for k in compared if k in before.checklists and k in after.checklists]
    other = sum(before.checklists[k] != after.checklists[k] for k in keys)
    if other:
        lines.append(f"{other} of {len(keys)} compared evaluation{'s' if len(keys) != 1 else ''} "
                     f"{'were' if other != 1 else 'was'} judged with another checklist than in the baseline "
                     "(re-pinned or edited): their questions are matched by meaning")
    return lines


def same_judging(before: JudgedBy, after: JudgedBy) -> bool:
    """Both runs were judged alike, as far as both record it: judge models, judge prompt, prompts' version."""
    models = (set(before.models or [before.model]) - {""}, set(after.models or [after.model]) - {""})
    return ((not all(models) or models[0] == models[1])
            and (not (before.judge_prompt_digest and after.judge_prompt_digest)
                 or before.judge_prompt_digest == after.judge_prompt_digest)
            and (not (before.prompt_version and after.prompt_version) or before.prompt_version == after.prompt_version))


def _eref(r: EvaluationRecord) -> EvaluationRef:
    return EvaluationRef(key=r.key, test=r.test, index=r.index, outcome=r.outcome, location=r.location)


def diff_runs(before: Sequence[EvaluationRecord], after: Sequence[EvaluationRecord], *, baseline: str = "",
              tolerance: float = 0.0, created: str = "", generator: str = "", alpha: float = DEFAULT_ALPHA,
              fail_on: FailOn = "significant", ran: Collection[str] | None = None,
              collected: Collection[str] | None = None,
              judged: tuple[JudgedBy, JudgedBy] | None = None) -> RegressionReport:
    """This run's records (``after``) compared with a baseline's (``before``), sorted by evaluation key.

    ``ran``: the ids of the tests this run ran (None: every test); ``collected``: the ids it collected, deselected
    ones included (None: unknown). A baseline evaluation of a test that did not run is *not run* (a ``-k`` subset,
    another set of files, a skip), not *removed* -- unless its file was collected and the test was not: then the
    test is gone, and removed. ``judged``: what judged the baseline and this run (:func:`judge_differences`)."""
    old = {r.key: r for r in before}
    new = {r.key: r for r in after}
    missing = sorted(old.keys() - new.keys())
    tests_with_records = {r.test for r in after}
    files = {t.split("::", 1)[0] for t in collected or ()}

    def gone(test: str) -> bool:
        return collected is not None and test not in collected and test.split("::", 1)[0] in files

    not_run = [k for k in missing if ran is not None and old[k].test not in ran
               and old[k].test not in tests_with_records and not gone(old[k].test)]
    both = sorted(new.keys() & old.keys())
    same_judge = judged is None or same_judging(*judged)
    return RegressionReport(
        baseline=baseline, baseline_created=created, baseline_generator=generator, tolerance=tolerance,
        alpha=alpha, fail_on=fail_on,
        judged_differently=judge_differences(*judged, both) if judged is not None else [],
        compared=[diff_evaluation(old[k], new[k], tolerance=tolerance, same_judge=same_judge) for k in both],
        suite=suite_dimensions([rate_pairs(match_questions(old[k].verdicts, new[k].verdicts)[0]) for k in both],
                               alpha=alpha, tolerance=tolerance),
        added=[_eref(new[k]) for k in sorted(new.keys() - old.keys())],
        removed=[_eref(old[k]) for k in missing if k not in not_run],
        not_run=[_eref(old[k]) for k in not_run],
    )


# -- the HTML page's view of a comparison ------------------------------------------------------------------


@dataclass(frozen=True)
class BaselineDiff:
    """The page's view of a :class:`RegressionReport` (this run against a baseline,
    made by :func:`diff_runs`): its changes by (record key, question id)."""

    report: RegressionReport
    changes: dict[tuple[str, str, int | None], QuestionChange] = field(default_factory=dict)  # key, id, turn
    scores: dict[tuple[str, str], float | None] = field(default_factory=dict)  # (key, dimension) -> old score
    drops: frozenset[tuple[str, str]] = frozenset()  # (key, dimension): fell by more than the tolerance
    sources: dict[str, SourceChange] = field(default_factory=dict)  # key -> how its source changed (changed only)

    @classmethod
    def of(cls, report: RegressionReport) -> BaselineDiff:
        return cls(report=report,
                   changes={(d.key, c.question_id, c.turn): c for d in report.compared for c in d.changes},
                   scores={(d.key, s.name): s.before for d in report.compared for s in d.scores},
                   drops=frozenset((d.key, s.name) for d, s in report.score_drops()),
                   sources={d.key: d.source_change for d in report.compared if d.source_change.changed_source})

    @property
    def label(self) -> str:
        return self.report.baseline or "the baseline"

    @property
    def created(self) -> str:
        return self.report.baseline_created

    @property
    def new_keys(self) -> frozenset[str]:
        """Evaluations the baseline does not have."""
        return frozenset(r.key for r in self.report.added)

    @property
    def removed_keys(self) -> tuple[str, ...]:
        """Evaluations only the baseline has."""
        return tuple(r.key for r in self.report.removed)

    @property
    def compared(self) -> int:
        """Questions asked in both runs (matched by id and text)."""
        return sum(d.unchanged + len(d.changes) for d in self.report.compared)

    def of_kind(self, kind: ChangeKind) -> list[QuestionChange]:
        return [c for _, c in self.report.changes(kind)]

    @property
    def tolerance(self) -> str:
        return f"{self.report.tolerance:.2f}"
