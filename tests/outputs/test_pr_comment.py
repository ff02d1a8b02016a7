"""``--bineval-pr-comment``: the markdown body of the sticky pull-request comment, rendered from a finished report
document (a snapshot), deterministic, with model text escaped; and the plugin object that writes it."""

# ruff: noqa: E501  (the snapshot holds the markdown table rows as they are)
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_bineval.models import Evaluation, Question, Usage, Verdict
from pytest_bineval.outputs import pr_comment
from pytest_bineval.outputs.pr_comment import PrComment, render
from pytest_bineval.report.comparison import (
    EvaluationDiff,
    FlipCheck,
    FlipConfirmation,
    QuestionChange,
    RegressionReport,
    ScoreChange,
    SuiteDimension,
)
from pytest_bineval.report.document import ReportDocument, Totals
from pytest_bineval.report.record import Asked, EvaluationRecord, UnstableQuestion

QUESTIONS = [Question(id="c-1", dimension="consistency", text="Is every claim supported by the input?"),
             Question(id="c-2", dimension="consistency", text="Are the names right?")]


def _record(test: str, answers: list[str], *, error: str | None = None) -> EvaluationRecord:
    verdicts = [Verdict(question_id=q.id, dimension=q.dimension, question=q.text, answer=a,  # type: ignore[arg-type]
                        explanation="" if a == "yes" else "It is not.", error=error if a == "error" else None)
                for q, a in zip(QUESTIONS, answers, strict=True)]
    evaluation = Evaluation(task="Summarize.", model="fake/judge", dimensions=["consistency"], verdicts=verdicts,
                            usage=Usage(llm_calls=2, cache_hits=0, prompt_tokens=100, completion_tokens=4))
    return EvaluationRecord.build(Asked(output="out"), evaluation, QUESTIONS, thresholds={"consistency": 0.5},
                                  status="pinned", test=test)


def _document() -> ReportDocument:
    records = [_record("tests/test_s.py::test_a[ferry]", ["yes", "no"]),
               _record("tests/test_s.py::test_b", ["yes", "yes"]),
               _record("tests/test_s.py::test_c", ["yes", "error"], error="cannot connect to http://127.0.0.1:1/v1"),
               _record("tests/test_s.py::test_d", ["no", "yes"])]
    regression = QuestionChange(kind="regression", question_id="c-2", dimension="consistency",
                                question="Are the names right? <b>@team</b> | `x`", before="yes", after="no",
                                explanation="The name *Ana* is wrong.",
                                flip=FlipCheck(status="confirmed", new=["no"] * 7, baseline=["yes"] * 7))
    noise = QuestionChange(kind="regression", question_id="c-1", dimension="consistency",
                           question=QUESTIONS[0].text, before="yes", after="no", explanation="One claim is not.",
                           flip=FlipCheck(status="unstable", new=["yes", "yes"], baseline=["yes"]))
    fix = QuestionChange(kind="fix", question_id="c-1", dimension="consistency", question=QUESTIONS[0].text,
                         before="no", after="yes")
    diff = RegressionReport(
        baseline="bineval-baseline.json", baseline_created="2026-11-30T20:40:30+00:00",
        baseline_generator="pytest-bineval 0.1.0", tolerance=0.1, failed=True,
        judged_differently=["the baseline was judged by openai/gpt-4o-mini, this run by openai/smollm2"],
        compared=[
            EvaluationDiff(key="tests/test_s.py::test_a[ferry]", test="tests/test_s.py::test_a[ferry]",
                           outcome="passed", baseline_outcome="passed", output_changed=True, changes=[regression],
                           scores=[ScoreChange(name="consistency", before=1.0, after=0.5, delta=-0.5,
                                               threshold=0.5)],
                           params={"city": "'ferry <town>'"}, output="The ferry runs <daily> @9.",
                           baseline_output="The ferry runs on Sundays."),
            EvaluationDiff(key="tests/test_s.py::test_b", test="tests/test_s.py::test_b", outcome="passed",
                           baseline_outcome="failed", output_changed=False, changes=[fix],
                           scores=[ScoreChange(name="consistency", before=0.5, after=1.0, delta=0.5,
                                               threshold=0.5)]),
            EvaluationDiff(key="tests/test_s.py::test_d", test="tests/test_s.py::test_d", outcome="passed",
                           baseline_outcome="passed", output_changed=True, changes=[noise],
                           scores=[ScoreChange(name="consistency", before=1.0, after=0.5, delta=-0.5,
                                               threshold=0.5)]),
        ],
        suite=[SuiteDimension(name="consistency", verdict="uninformative", evaluations=3, questions=6, before=0.83,
                              after=0.67, change=-1 / 6, p_value=0.375, p_adjusted=0.75, detectable=0.61,
                              detectable_at=0.025)],
        confirmation=FlipConfirmation(flips=2, asks=8, tolerance=2, level=0.0125, bound=0.0081, reasks=17,
                                      requests=17, cache_hits=0))
    unstable = [UnstableQuestion(key="tests/test_s.py::test_b", dimension="consistency", question_id="c-1",
                                 question=QUESTIONS[0].text, answers=["yes", "no", "yes"], agreement=2 / 3)]
    totals = Totals.of(records, Usage(llm_calls=9, failed_requests=1, cache_hits=3, prompt_tokens=900,
                                      completion_tokens=12, cost_usd=0.0012), regressions=diff)
    return ReportDocument(created="2026-12-01T10:00:00+00:00", totals=totals, evaluations=records,
                          regressions=diff, unstable=unstable)


SNAPSHOT = r"""## bineval: **1 case regressed (confirmed): tests/test\_s.py::test\_a\[ferry\]** · consistency: uninformative (0.83 -&gt; 0.67 over 3 evaluations, p = 0.75; it could miss a drop of 61 points) · **1 judge error**

> **Judged differently:** the baseline was judged by openai/gpt-4o-mini, this run by openai/smollm2; an answer that changed may have changed with the judge.

4 evaluations: 3 passed, 0 below threshold, 1 judge error.

Compared with `bineval-baseline.json` (pytest-bineval 0.1.0): 3 evaluations compared, 0 added, 0 removed, 0 not run.

**The gate failed**: 1 case regressed (confirmed): tests/test\_s.py::test\_a\[ferry\] vs baseline bineval-baseline.json (--bineval-fail-on-regression)

### Regressed cases (confirmed)

A question answered yes in the baseline and no now, re-asked about both outputs (8 asks of each at most, 2 against the flip allowed), kept its answer:

#### `tests/test_s.py::test_a[ferry]`

Since the baseline: output changed.

- `city` = 'ferry &lt;town&gt;'

| dimension | question | answer | re-asked | verdict | explanation now |
|---|---|---|---|---|---|
| consistency | Are the names right? &lt;b&gt;&#64;team&lt;/b&gt; \| \`x\` | yes → no | now no no no no no no no / baseline yes yes yes yes yes yes yes | confirmed | The name \*Ana\* is wrong. |

<details><summary>Outputs: the baseline's and this run's</summary>

<table><tr><th>baseline</th><th>now</th></tr><tr><td><pre>The ferry runs on Sundays.</pre></td><td><pre>The ferry runs &lt;daily&gt; &#64;9.</pre></td></tr></table>

</details>

### The suite, per dimension

Did the suite get worse? A one-sided sign-flip test over the evaluations on their paired score changes (repeats and questions of one evaluation count once), adjusted for the dimensions (Holm) and for the gate's two questions (x2), against alpha = 0.05. *Uninformative*: the suite could miss a drop of 10 points (the smallest drop it detects 80% of the time is larger).

| dimension | verdict | evaluations | baseline | now | change | p (adjusted) | detectable drop |
|---|---|---|---|---|---|---|---|
| consistency | uninformative | 3 | 0.83 | 0.67 | -0.17 | 0.75 | 61 points |

<details><summary>The judge's noise: 1 flip not kept on re-asking, or with the same judge input</summary>

| test | dimension | question | answer | output / source | re-asked |
|---|---|---|---|---|---|
| `tests/test_s.py::test_d` | consistency | Is every claim supported by the input? | yes → no | output changed | judge noise; re-asked: now yes yes; baseline yes |

</details>

### Score changes

Each evaluation's dimension scores that changed (the statistics are the suite's, above):

| test | dimension | baseline | now | change |
|---|---|---|---|---|
| `tests/test_s.py::test_a[ferry]` | consistency | 1.00 | 0.50 | -0.50 |
| `tests/test_s.py::test_d` | consistency | 1.00 | 0.50 | -0.50 |
| `tests/test_s.py::test_b` | consistency | 0.50 | 1.00 | +0.50 |

Other answer changes: 1 fix.

### Unstable questions

Their repeats got both answers: the verdict is not reproducible (`--bineval-repeats`).

| test | dimension | question | answers | agreement |
|---|---|---|---|---|
| `tests/test_s.py::test_b` | consistency | Is every claim supported by the input? | yes no yes | 0.67 |

### Judge errors

Questions the judge gave no answer to: their tests error.

| test | dimension | question | cause |
|---|---|---|---|
| `tests/test_s.py::test_c` | consistency | Are the names right? | cannot connect to http://127.0.0.1:1/v1 |

### What the run cost

8 questions judged; 9 requests sent (1 failed), 3 cache hits; tokens: 900 prompt + 12 completion; cost: $0.0012.
Of which confirming the flips: 2 flips to confirm, 17 fresh asks (17 requests sent, 0 cache hits).
"""


def test_render_snapshot() -> None:
    assert render(_document()) == SNAPSHOT


def test_render_is_deterministic_and_ignores_when_the_run_was() -> None:
    first = _document()
    later = first.model_copy(update={"created": "2027-01-01T00:00:00+00:00"})
    assert render(first) == render(later)
    assert "2026" not in render(first)  # neither this run's nor the baseline's timestamp


def test_without_a_baseline() -> None:
    doc = _document().model_copy(update={"regressions": None})
    body = render(doc)
    assert body.startswith("## bineval: not compared with a baseline · **1 judge error**\n")
    assert "### Regressed cases" not in body


def _headline(diff_update: dict[str, object], totals_update: dict[str, object] | None = None) -> str:
    doc = _document()
    assert doc.regressions is not None
    diff = doc.regressions.model_copy(update={"judged_differently": [], **diff_update})
    totals = doc.totals.model_copy(update={**Totals.comparison_counts(diff), "errors": 0, **(totals_update or {})})
    return render(doc.model_copy(update={"regressions": diff, "totals": totals})).splitlines()[0]


def test_headline_snapshots() -> None:
    """The headline states the outcome in each case, never softened: confirmed regressions (count and cases), the
    suite per dimension (regressed with its p-value, no detectable change or uninformative with the detectable
    drop), flips not settled, threshold failures."""
    doc = _document()
    assert doc.regressions is not None
    compared = doc.regressions.compared
    suite = doc.regressions.suite[0]
    informed = suite.model_copy(update={"verdict": "no detectable change", "detectable": 0.04, "p_adjusted": 0.8})
    regressed = suite.model_copy(update={"verdict": "regressed", "p_adjusted": 0.012, "detectable": None})
    assert _headline({}) == (
        "## bineval: **1 case regressed (confirmed): tests/test\\_s.py::test\\_a\\[ferry\\]** · consistency: "
        "uninformative (0.83 -&gt; 0.67 over 3 evaluations, p = 0.75; it could miss a drop of 61 points) · all 4 "
        "evaluations meet their thresholds")
    assert _headline({"compared": compared[1:], "suite": [informed]}) == (
        "## bineval: no confirmed regression (1 flip of the judge's noise) · consistency: no detectable change "
        "(0.83 -&gt; 0.67 over 3 evaluations, p = 0.8; a drop of 4 points would show) · all 4 evaluations meet "
        "their thresholds")
    assert _headline({"compared": compared[1:], "suite": [regressed]}) == (
        "## bineval: no confirmed regression (1 flip of the judge's noise) · **consistency regressed across the "
        "suite (0.83 -&gt; 0.67 over 3 evaluations, p = 0.012)** · all 4 evaluations meet their thresholds")
    # below threshold without any regression: never "fine"
    assert _headline({"compared": compared[1:2], "suite": [informed]}, {"failed": 2}) == (
        "## bineval: no confirmed regression · consistency: no detectable change (0.83 -&gt; 0.67 over 3 "
        "evaluations, p = 0.8; a drop of 4 points would show) · **2 of 4 evaluations below threshold**")
    pending = compared[0].model_copy(deep=True)
    pending.changes[0].flip = pending.changes[0].flip.model_copy(  # type: ignore[union-attr]
        update={"status": "unconfirmed", "new": [], "baseline": [], "reason": "no judge"})
    assert _headline({"compared": [pending], "suite": [informed]}) == (
        "## bineval: no confirmed regression · consistency: no detectable change (0.83 -&gt; 0.67 over 3 "
        "evaluations, p = 0.8; a drop of 4 points would show) · **1 flipped question could not be confirmed** · "
        "all 4 evaluations meet their thresholds")
    for body in (_headline({}), _headline({"compared": [pending]}), _headline({"compared": [], "suite": []},
                                                                              {"failed": 1})):
        assert "no significant regression" not in body


def test_long_tables_are_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pr_comment, "ROWS", 1)
    doc = _document()
    unstable = doc.unstable * 3
    body = render(doc.model_copy(update={"unstable": unstable}))
    assert "…and 2 more in the JSON report" in body


def test_plugin_object_writes_the_body(tmp_path: Path) -> None:
    target = tmp_path / "comment.md"
    PrComment(target).pytest_bineval_finished(config=None, document=_document())  # type: ignore[arg-type]
    assert target.read_text(encoding="utf-8") == SNAPSHOT


def test_option_is_listed(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--bineval-pr-comment=PATH*"])


def test_sections_come_in_order_of_importance() -> None:
    """The outcome, what judged the run (when it differs from the baseline's), the regressed cases, the suite per
    dimension, the judge's noise, score changes, unstable questions, cost."""
    body = render(_document())
    marks = ["## bineval: **1 case regressed", "> **Judged differently:** the baseline was judged by "
             "openai/gpt-4o-mini, this run by openai/smollm2", "### Regressed cases (confirmed)",
             "### The suite, per dimension", "The judge's noise: 1 flip", "### Score changes",
             "### Unstable questions", "### What the run cost"]
    places = [body.index(m) for m in marks]
    assert places == sorted(places)


def test_a_regressed_case_shows_its_parameters_and_both_outputs_escaped() -> None:
    body = render(_document())
    assert "- `city` = 'ferry &lt;town&gt;'" in body
    assert ("<td><pre>The ferry runs on Sundays.</pre></td><td><pre>The ferry runs &lt;daily&gt; &#64;9.</pre></td>"
            in body)


def test_fail_on_any_heads_the_comment_with_every_flip() -> None:
    doc = _document()
    assert doc.regressions is not None
    any_flip = doc.regressions.model_copy(update={"fail_on": "any"})
    body = render(doc.model_copy(update={"regressions": any_flip}))
    assert "**The gate failed**: 2 regressions and 2 score drops beyond tolerance 0.10 vs baseline " in body


def _big_document(tests: int = 64) -> ReportDocument:
    """``tests`` evaluations with 200-character ids and 5,000-character outputs, each a confirmed regressed case with
    a flip of the judge's noise and a score change: over 100,000 characters when nothing is cut."""
    doc = _document()
    assert doc.regressions is not None
    regressed, _, noisy = doc.regressions.compared
    compared = []
    for i in range(tests):
        key = f"tests/test_support_assistant.py::test_answer[{i:03d}-" + "long-parameter-" * 12 + "]"
        compared.append(regressed.model_copy(update={"key": key, "test": key, "output": f"now {i} " * 1000,
                                                     "baseline_output": f"was {i} " * 1000}))
        compared.append(noisy.model_copy(update={"key": key + "-noisy", "test": key + "-noisy"}))
    diff = doc.regressions.model_copy(update={"compared": compared})
    totals = doc.totals.model_copy(update=Totals.comparison_counts(diff))
    return doc.model_copy(update={"regressions": diff, "totals": totals, "unstable": doc.unstable * tests})


def test_a_large_run_stays_under_githubs_limit_cutting_the_least_important_first() -> None:
    """64 tests with long ids and long outputs: the body keeps under LIMIT (GitHub refuses a comment over 65,536
    characters), the headline, the gate's verdict and the confirmed regressions (their cases and flipped
    questions) whole; the per-test detail, the long outputs and the flip lists are cut, and the body says so and
    where the full report is."""
    doc = _big_document()
    whole = render(doc, limit=10**9)
    assert len(whole) > 100_000 and "Cut to stay under" not in whole  # the unbounded body: far over the limit
    body = render(doc)
    assert len(body) <= pr_comment.LIMIT < 65_536
    assert body.splitlines()[0] == whole.splitlines()[0]  # the headline intact
    assert body.splitlines()[0].startswith("## bineval: **64 cases regressed (confirmed): ")
    assert "**The gate failed**: 64 cases regressed (confirmed)" in body
    cases = [line for line in body.splitlines() if line.startswith("#### `tests/test_support_assistant.py")]
    assert len(cases) == pr_comment.ROWS  # every case the comment shows, by its full id
    assert "…and 34 more in the JSON report" in body
    assert "### The suite, per dimension" in body and "### What the run cost" in body
    note = next(line for line in body.splitlines() if line.startswith("> **Cut to stay under"))
    assert note.startswith("> **Cut to stay under the size GitHub allows a comment (65,536 characters; this body "
                           "keeps under 60,000):** the regressed cases' outputs (20 of 30), the judge's noise, the "
                           "score changes.")
    assert note.endswith(f"The full report: {pr_comment.WHERE}.")
    for gone in ("### Score changes", "The judge's noise:"):
        assert gone in whole and gone not in body
    # the outputs go from the last case up: the first 10 cases keep theirs; what the cuts did not need stays
    assert body.count("Outputs: the baseline's and this run's") == 10
    assert "### Unstable questions" in body
    assert body.index(note) < body.index("### Regressed cases (confirmed)")  # said near the top
    assert render(doc) == body  # deterministic


def test_a_small_run_is_not_cut_and_the_cut_order_holds_at_any_limit() -> None:
    assert "Cut to stay under" not in render(_document())
    doc = _big_document(8)
    whole = render(doc, limit=10**9)
    for limit in (80_000, 40_000, 20_000, 10_000, 5_000, 2_000):
        body = render(doc, limit=limit)
        assert len(body) <= limit
        assert body.splitlines()[0] == whole.splitlines()[0]
        if len(whole) > limit:
            assert "> **Cut to stay under" in body
    # when even what is never cut is too large, the body is clipped at a line, and says so
    tiny = render(doc, limit=3_000)
    assert len(tiny) <= 3_000 and tiny.endswith("… (clipped)\n")
    assert "the end of what was left (clipped)" in tiny and tiny.splitlines()[0] == whole.splitlines()[0]


def test_the_job_summary_stays_under_githubs_1_mib_cutting_the_tests_detail_last_first() -> None:
    """GitHub takes 1 MiB of a step's summary (bytes): 2,000 failing tests with long non-ASCII ids keep under
    SUMMARY_LIMIT bytes, the headline and totals whole, the later tests' detail cut and said."""
    from pytest_bineval.outputs.github import SUMMARY_LIMIT, SUMMARY_WHERE, step_summary

    records = [_record(f"tests/test_s.py::test_ü[{i:04d}-" + "ßtraße-" * 40 + "]", ["no", "no"]) for i in range(2000)]
    totals = Totals.of(records, Usage(llm_calls=4000))
    whole = step_summary(records, totals, limit=10**9)
    text = step_summary(records, totals)
    assert len(whole.encode()) > 1024 * 1024 and len(text.encode()) <= SUMMARY_LIMIT < 1024 * 1024
    lines = text.splitlines()
    assert lines[:4] == whole.splitlines()[:4] and "- **2000 of 2000 evaluations below threshold**" in lines
    note = next(line for line in lines if line.startswith("> **Cut to stay under"))
    assert "the detail of the failing and changed tests (" in note and note.endswith(f"{SUMMARY_WHERE}.")
    assert "### tests/test\\_s.py::test\\_ü\\[0000-" in text and "### tests/test\\_s.py::test\\_ü\\[1999-" not in text
    assert "### Totals" in text and "| 2000 | 4000 |" in text
    assert "Cut to stay under" not in step_summary(records[:3], Totals.of(records[:3], Usage()))
