"""``--bineval-pr-comment``: the markdown body of the sticky pull-request comment, rendered from a finished report
document (a snapshot), deterministic, with model text escaped; and the plugin object that writes it."""

# ruff: noqa: E501  (the snapshot holds the markdown table rows as they are)
from __future__ import annotations

from pathlib import Path

import pytest

from pytest_bineval.models import Evaluation, Question, Usage, Verdict
from pytest_bineval.outputs import pr_comment
from pytest_bineval.outputs.pr_comment import PrComment, render
from pytest_bineval.report.comparison import EvaluationDiff, QuestionChange, RegressionReport, ScoreChange
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
                                explanation="The name *Ana* is wrong.")
    noise = QuestionChange(kind="regression", question_id="c-1", dimension="consistency",
                           question=QUESTIONS[0].text, before="yes", after="no", explanation="One claim is not.")
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
                                               threshold=0.5, p_value=0.0156, stat_test="mcnemar",
                                               regressed=True)]),
            EvaluationDiff(key="tests/test_s.py::test_b", test="tests/test_s.py::test_b", outcome="passed",
                           baseline_outcome="failed", output_changed=False, changes=[fix],
                           scores=[ScoreChange(name="consistency", before=0.5, after=1.0, delta=0.5,
                                               threshold=0.5, p_value=1.0, stat_test="mcnemar")]),
            EvaluationDiff(key="tests/test_s.py::test_d", test="tests/test_s.py::test_d", outcome="passed",
                           baseline_outcome="passed", output_changed=False, changes=[noise],
                           scores=[ScoreChange(name="consistency", before=1.0, after=0.5, delta=-0.5,
                                               threshold=0.5, p_value=1.0, stat_test="mcnemar")]),
        ])
    unstable = [UnstableQuestion(key="tests/test_s.py::test_b", dimension="consistency", question_id="c-1",
                                 question=QUESTIONS[0].text, answers=["yes", "no", "yes"], agreement=2 / 3)]
    totals = Totals.of(records, Usage(llm_calls=9, failed_requests=1, cache_hits=3, prompt_tokens=900,
                                      completion_tokens=12, cost_usd=0.0012), regressions=diff)
    return ReportDocument(created="2026-12-01T10:00:00+00:00", totals=totals, evaluations=records,
                          regressions=diff, unstable=unstable)


SNAPSHOT = """\
## bineval: **1 dimension regressed significantly (p < 0.05) vs baseline bineval-baseline.json**

> **Judged differently:** the baseline was judged by openai/gpt-4o-mini, this run by openai/smollm2; an answer that changed may have changed with the judge.

4 evaluations: 3 passed, 0 below threshold, 1 judge error.

Compared with `bineval-baseline.json` (pytest-bineval 0.1.0): 3 evaluations compared, 0 added, 0 removed, 0 not run.

### Significant regressions

Dimensions whose score fell beyond the tolerance (0.10) with p < 0.05 (an exact test on the paired answers):

| test | dimension | baseline | now | change | p-value | exact test | verdict |
|---|---|---|---|---|---|---|---|
| `tests/test_s.py::test_a[ferry]` | consistency | 1.00 | 0.50 | -0.50 | 0.0156 | McNemar | **regressed** |

Their questions answered yes in the baseline and no now:

| test | dimension | question | answer | output / source | explanation now |
|---|---|---|---|---|---|
| `tests/test_s.py::test_a[ferry]` | consistency | Are the names right? &lt;b&gt;&#64;team&lt;/b&gt; \\| \\`x\\` | yes → no | output changed | The name \\*Ana\\* is wrong. |

### Score changes

Not significant at 0.05, or up (McNemar's exact test on the paired answers; Fisher's on the answer counts with repeats):

| test | dimension | baseline | now | change | p-value | exact test | verdict |
|---|---|---|---|---|---|---|---|
| `tests/test_s.py::test_d` | consistency | 1.00 | 0.50 | -0.50 | 1 | McNemar | within noise |
| `tests/test_s.py::test_b` | consistency | 0.50 | 1.00 | +0.50 | 1 | McNemar | up |

Questions answered yes in the baseline and no now, in dimensions within noise:

| test | dimension | question | answer | output / source | explanation now |
|---|---|---|---|---|---|
| `tests/test_s.py::test_d` | consistency | Is every claim supported by the input? | yes → no | same output, source unknown | One claim is not. |

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
    assert body.startswith("## bineval: not compared with a baseline\n")
    assert "### Regressions" not in body


def test_no_regression_headline() -> None:
    doc = _document()
    assert doc.regressions is not None
    quiet = doc.regressions.model_copy(update={"compared": [doc.regressions.compared[1]], "failed": False})
    body = render(doc.model_copy(update={"regressions": quiet}))
    assert body.startswith("## bineval: no significant regression vs baseline `bineval-baseline.json`\n")


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
    """#21.5: what judged the run (when it differs from the baseline's), significant regressions, score changes
    with p-values, unstable questions, cost."""
    body = render(_document())
    marks = ["> **Judged differently:** the baseline was judged by openai/gpt-4o-mini, this run by openai/smollm2",
             "### Significant regressions", "### Score changes", "### Unstable questions", "### What the run cost"]
    places = [body.index(m) for m in marks]
    assert places == sorted(places)
    assert "| `tests/test_s.py::test_d` | consistency | 1.00 | 0.50 | -0.50 | 1 | McNemar | within noise |" in body


def test_nothing_significant_says_so_and_keeps_the_drop_within_noise_with_its_p_value() -> None:
    doc = _document()
    assert doc.regressions is not None
    quiet = doc.regressions.model_copy(update={"compared": doc.regressions.compared[1:], "failed": False,
                                               "judged_differently": []})
    body = render(doc.model_copy(update={"regressions": quiet}))
    assert "Judged differently" not in body
    assert "None: no dimension's drop is beyond the tolerance (0.10) and significant at 0.05." in body
    assert "-0.50 | 1 | McNemar | within noise |" in body
    assert "Questions answered yes in the baseline and no now, in dimensions within noise:" in body


def test_fail_on_any_heads_the_comment_with_every_flip() -> None:
    doc = _document()
    assert doc.regressions is not None
    any_flip = doc.regressions.model_copy(update={"fail_on": "any"})
    body = render(doc.model_copy(update={"regressions": any_flip}))
    assert body.startswith("## bineval: **2 regressions and 2 score drops beyond tolerance 0.10 vs baseline "
                           "bineval-baseline.json**\n")
