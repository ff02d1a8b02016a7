"""This run against a baseline run (``--bineval-baseline``): a pure function of two lists of records.

Evaluations are matched by :attr:`EvaluationRecord.key` (test id and index of the evaluation in the test),
questions within a matched pair by meaning, always within one dimension: first the same id with the same
normalized text (whitespace collapsed, case folded), then the same text under another id (the checklist was
renumbered), then the same id with a *small edit* of the text: a :func:`similarity` of at least
:data:`EDIT_SIMILARITY` (0.8). Answers that changed on a slightly edited question are shown apart and kept out
of the gate. An id whose text differs more is a *replaced* question: removed and added, never compared, so never
a regression or a fix. What is left over was asked in one run only and is listed as added or removed.

A dimension's score change is tested for significance (:mod:`pytest_bineval.gate_stats`) on the pairs matched
by text (the slightly edited ones are left out).

What judged each run (:class:`~pytest_bineval.record.JudgedBy`: judge model, judge prompt, prompts version,
checklists) is compared too: :func:`judge_differences` says how they differ, and every output says it first, as
an answer that changed with the judge is no news about the output.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from difflib import SequenceMatcher

from .gate_stats import DEFAULT_ALPHA, dimension_test
from .kinds import FailOn
from .models import Answer, Verdict
from .record import (
    CHANGE_KINDS,
    ChangeKind,
    EvaluationDiff,
    EvaluationRecord,
    EvaluationRef,
    JudgedBy,
    QuestionChange,
    QuestionRef,
    RegressionReport,
    ScoreChange,
)

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

    take("exact", lambda b, a: (b.question_id == a.question_id and b.dimension == a.dimension
                                and _norm(b.question) == _norm(a.question)))
    take("text", lambda b, a: b.dimension == a.dimension and _norm(b.question) == _norm(a.question))
    take("id", lambda b, a: (b.question_id == a.question_id and b.dimension == a.dimension
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
    return QuestionRef(id=v.question_id, dimension=v.dimension, text=v.question)


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
            edited_from=None if _norm(a.question) == _norm(b.question) else b.question,
        ))
    rank = {k: i for i, k in enumerate(CHANGE_KINDS)}
    changes.sort(key=lambda c: (rank[c.kind], c.dimension, c.question_id))
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
