"""Every markdown table of the PR comment and the job summary keeps its columns whatever a test id, dimension,
question or explanation holds: a ``|`` splits a GFM table row even inside a code span, so every cell that can hold
user or model text escapes it. Checked by parsing the markdown as GitHub does (markdown-it's GFM tables, which
follow the spec's rule for ``\\|`` in a code span), cell by cell."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt

from pytest_bineval.models import Evaluation, Question, Usage, Verdict
from pytest_bineval.outputs.github import step_summary
from pytest_bineval.outputs.pr_comment import render
from pytest_bineval.report.comparison import EvaluationDiff, FlipCheck, QuestionChange, RegressionReport, ScoreChange
from pytest_bineval.report.document import ReportDocument, Totals
from pytest_bineval.report.record import Asked, EvaluationRecord, SourceDocument, UnstableQuestion
from pytest_bineval.report.source_change import SourceChange

PIPE_IDS = ["tests/test_s.py::test_a[a|b]", "tests/test_s.py::test_b[x | `y` |]", "tests/test_s.py::test_c[||]"]
DIMENSION = "tone|style"
QUESTION = Question(id="q-1", dimension=DIMENSION, text="Is it a | b?")


def _record(test: str, answer: str) -> EvaluationRecord:
    verdict = Verdict(question_id=QUESTION.id, dimension=DIMENSION, question=QUESTION.text,
                      answer=answer,  # type: ignore[arg-type]
                      explanation="" if answer == "yes" else "no | not", error="down | out" if answer == "error"
                      else None)
    evaluation = Evaluation(task="Summarize.", model="fake/judge", dimensions=[DIMENSION], verdicts=[verdict],
                            usage=Usage(llm_calls=1))
    return EvaluationRecord.build(Asked(output="out"), evaluation, [QUESTION], thresholds={DIMENSION: 0.5},
                                  status="pinned", test=test)


def _document() -> ReportDocument:
    records = [_record(PIPE_IDS[0], "no"), _record(PIPE_IDS[1], "yes"), _record(PIPE_IDS[2], "error")]
    flip = QuestionChange(kind="regression", question_id=QUESTION.id, dimension=DIMENSION, question=QUESTION.text,
                          before="yes", after="no", explanation="a | b",
                          flip=FlipCheck(status="confirmed", new=["no"], baseline=["yes"]))  # a regressed case
    document = SourceDocument(number=1, id="kb|7", title="a | b", digest="d")
    diffs = [EvaluationDiff(key=key, test=key, outcome="failed", baseline_outcome="passed", output_changed=True,
                            changes=[flip], source_change=SourceChange(state="changed", added=[document],
                                                                        text_diff="-a|b\n+a|c"),
                            scores=[ScoreChange(name=DIMENSION, before=1.0, after=0.0, delta=-1.0, threshold=0.5,
                                                p_value=p, stat_test="mcnemar", regressed=p < 0.05)])
             for key, p in zip(PIPE_IDS, [0.01, 0.5, 0.5], strict=True)]
    regressions = RegressionReport(baseline="base.json", tolerance=0.1, failed=True, compared=diffs)
    unstable = [UnstableQuestion(key=PIPE_IDS[1], dimension=DIMENSION, question_id=QUESTION.id,
                                 question=QUESTION.text, answers=["yes", "no"], agreement=0.5)]
    totals = Totals.of(records, Usage(llm_calls=3), regressions=regressions)
    return ReportDocument(created="2026-12-01T10:00:00+00:00", totals=totals, evaluations=records,
                          regressions=regressions, unstable=unstable)


class _Tables(HTMLParser):
    """The tables of an HTML page as rows of cell texts (header row first)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[list[list[str]]] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def tables(markdown: str) -> list[list[list[str]]]:
    parser = _Tables()
    parser.feed(MarkdownIt("commonmark").enable("table").render(markdown))
    return parser.tables


def _check(markdown: str) -> list[list[list[str]]]:
    found = tables(markdown)
    assert found
    for table in found:
        header, *rows = table
        for row in rows:  # GFM drops a row's extra cells and pads missing ones: compare the cells themselves
            assert len(row) == len(header), (header, row)
    return found


def test_the_parser_splits_a_row_at_a_pipe_in_a_code_span() -> None:
    """The hazard itself, so that the checks below can fail: an unescaped ``|`` in inline code splits the cell."""
    assert tables("| a | b |\n|---|---|\n| `x|y` | 2 |\n") == [[["a", "b"], ["`x", "y`"]]]
    assert tables("| a | b |\n|---|---|\n| `x\\|y` | 2 |\n") == [[["a", "b"], ["x|y", "2"]]]


def test_every_pr_comment_table_keeps_its_columns_and_shows_the_ids_as_they_are() -> None:
    found = _check(render(_document()))
    first_cells = {row[0] for table in found for row in table[1:]}
    shown = {key.replace("`", "'") for key in PIPE_IDS}
    assert shown <= first_cells  # every id whole, in the test column
    cells = {cell for table in found for row in table[1:] for cell in row}
    assert {DIMENSION, QUESTION.text, "a | b", "down | out"} <= cells


def test_every_job_summary_table_keeps_its_columns() -> None:
    doc = _document()
    found = _check(step_summary(doc.evaluations, doc.totals, doc.regressions))
    assert any(row[0] == DIMENSION for table in found for row in table[1:])


def test_the_qworld_cost_tables_keep_their_columns() -> None:
    """``bineval qworld cost``'s markdown: a question (from the user's file) and an error may hold a ``|``."""
    from pytest_bineval.bench.qworld_measure import CostRow, cost_markdown

    rows = [CostRow(variant="bineval", question="A | B?", calls=2, error="bad | reply"),
            CostRow(variant="qworld", question="C||D\nE", calls=3)]
    found = _check(cost_markdown(rows, "fake/judge", "1.0", "1.0"))
    cells = {cell for table in found for row in table[1:] for cell in row}
    assert {"A | B?", "bad | reply", "C||D E"} <= cells
