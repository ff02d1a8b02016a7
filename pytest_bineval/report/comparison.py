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
All the verdicts of one evaluation, every turn's, stay that evaluation's: the statistics take an evaluation as
one unit, so a long conversation does not count as many independent cases.

A dimension's score change is tested for significance (:mod:`pytest_bineval.gate_stats`) on the pairs matched
by text (the slightly edited ones are left out).

What judged each run (:class:`~pytest_bineval.report.record.JudgedBy`: judge model, judge prompt, prompts version,
checklists) is compared too: :func:`judge_differences` says how they differ, and every output says it first, as
an answer that changed with the judge is no news about the output.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Literal

from pydantic import BaseModel, Field

from ..conversation import turn_label
from ..gate_stats import DEFAULT_ALPHA, dimension_test
from ..kinds import FailOn
from ..models import Answer, Verdict
from .record import EvaluationRecord, JudgedBy, Location, Outcome

ChangeKind = Literal["regression", "unstable flip", "fix", "judge error", "recovered"]
CHANGE_KINDS: tuple[ChangeKind, ...] = ("regression", "unstable flip", "judge error", "fix", "recovered")


class QuestionRef(BaseModel):
    """A question asked in one of the two compared runs only (the checklist changed, or the conversation's turns)."""

    id: str
    dimension: str
    text: str
    turn: int | None = Field(default=None, description="the assistant turn of a conversation it was asked of")


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


def diff_evaluation(before: EvaluationRecord, after: EvaluationRecord, *, tolerance: float = 0.0,
                    alpha: float = DEFAULT_ALPHA) -> EvaluationDiff:
    """One evaluation in the baseline and in this run, question by question and dimension by dimension."""
    pairs, by_text, by_id, added, removed = match_questions(before.verdicts, after.verdicts)
    replaced = len({v.question_id for v in added} & {v.question_id for v in removed})
    changes: list[QuestionChange] = []
    unchanged = 0
    for b, a in pairs:
        kind = classify(b, a)
        if kind is None:
            unchanged += 1
            continue
        changes.append(QuestionChange(
            kind=kind, question_id=a.question_id, dimension=a.dimension, question=a.question,
            before=b.answer, after=a.answer,
            explanation=(a.error or "") if a.answer == "error" else a.explanation,
            baseline_explanation=((b.error or None) if b.answer == "error" else b.explanation) or None,
            repeats=_answers(a), baseline_repeats=_answers(b),
            edited_from=None if _norm(a.question) == _norm(b.question) else b.question, turn=a.turn,
        ))
    rank = {k: i for i, k in enumerate(CHANGE_KINDS)}
    changes.sort(key=lambda c: (rank[c.kind], c.dimension, c.question_id, c.turn or 0))
    old_dims = {d.name: d for d in before.dimensions}
    scores = []
    for d in after.dimensions:
        prior = old_dims.get(d.name)
        old_score = prior.score if prior is not None else None
        delta = None if old_score is None or d.score is None else d.score - old_score
        stat = dimension_test([(b, a) for b, a in pairs
                               if a.dimension == d.name and _norm(a.question) == _norm(b.question)])
        regressed = delta is not None and delta < -tolerance - 1e-9 and stat.p_value < alpha
        scores.append(ScoreChange(name=d.name, before=old_score, after=d.score, delta=delta, threshold=d.threshold,
                                  p_value=stat.p_value if stat.test != "none" else None, stat_test=stat.test,
                                  regressed=regressed))
    return EvaluationDiff(
        key=after.key, test=after.test, index=after.index, location=after.location, outcome=after.outcome,
        baseline_outcome=before.outcome,
        output_changed=bool(before.output_digest) and before.output_digest != after.output_digest,
        changes=changes, scores=scores, questions_added=[_ref(v) for v in added],
        questions_removed=[_ref(v) for v in removed], matched_by_text=by_text, matched_by_id=by_id,
        replaced=replaced, unchanged=unchanged,
        turns=None if after.conversation is None else len(after.conversation),
        baseline_turns=None if before.conversation is None else len(before.conversation),
    )


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
    return RegressionReport(
        baseline=baseline, baseline_created=created, baseline_generator=generator, tolerance=tolerance,
        alpha=alpha, fail_on=fail_on,
        judged_differently=judge_differences(*judged, both) if judged is not None else [],
        compared=[diff_evaluation(old[k], new[k], tolerance=tolerance, alpha=alpha) for k in both],
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

    @classmethod
    def of(cls, report: RegressionReport) -> BaselineDiff:
        return cls(report=report,
                   changes={(d.key, c.question_id, c.turn): c for d in report.compared for c in d.changes},
                   scores={(d.key, s.name): s.before for d in report.compared for s in d.scores},
                   drops=frozenset((d.key, s.name) for d, s in report.score_drops()))

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
