"""A source that changed since the baseline, in every output: the terminal section says ``source changed`` and
which documents went, the PR comment lists the removed document and shows the text diff in a fence the text cannot
close, the HTML page lists it escaped. Rendered from a stored comparison (no pytest run)."""

from __future__ import annotations

import re
from typing import Any

from pytest_bineval.models import Evaluation, Question, Usage, Verdict
from pytest_bineval.outputs.html import render_html
from pytest_bineval.outputs.pr_comment import render
from pytest_bineval.outputs.terminal import regression_lines
from pytest_bineval.report.document import ReportDocument, Totals, diff_reports
from pytest_bineval.report.record import Asked, EvaluationRecord

QUESTION = Question(id="groundedness-1", dimension="groundedness", text="Is every claim supported by the input?")
REFUNDS = {"id": "kb-7", "title": "Refund policy <b>@team</b>", "text": "Refunds within 30 days.\n```\n</details>"}
SHIPPING = {"id": "kb-2", "title": "Shipping", "text": "Orders ship within 2 business days."}
KEY = "tests/test_support.py::test_answer[q07]"


def record(source: Any, answer: str) -> EvaluationRecord:
    verdict = Verdict(question_id=QUESTION.id, dimension="groundedness", question=QUESTION.text,
                      answer=answer, explanation="" if answer == "yes" else "No article says so.")  # type: ignore[arg-type]
    ev = Evaluation(task="Answer from the articles.", model="fake/judge", dimensions=["groundedness"],
                    verdicts=[verdict])
    return EvaluationRecord.build(Asked(output="Refunds are possible within 30 days.", source=source), ev, [QUESTION],
                                  thresholds={"groundedness": 0.8}, status="pinned", test=KEY)


def documents(source_before: Any, source_after: Any) -> ReportDocument:
    """This run (``source_after``, answered no) compared with a baseline (``source_before``, answered yes)."""
    base = ReportDocument(evaluations=[record(source_before, "yes")])
    now = [record(source_after, "no")]
    doc = ReportDocument(evaluations=now, totals=Totals.of(now, Usage()))
    comparison = diff_reports(doc, base, "base.json")
    return doc.model_copy(update={"regressions": comparison})


def test_terminal_says_source_changed_and_which_document_went() -> None:
    doc = documents([REFUNDS, SHIPPING], [SHIPPING])
    assert doc.regressions is not None
    lines = [text for text, _ in regression_lines(doc.regressions)]
    # compared without a judge (diff_reports): the flip is not settled, and never the judge's noise
    assert (f"NOT CONFIRMED {KEY} [groundedness] {QUESTION.text}: yes -> no (source changed; not confirmed: not "
            "re-asked)") in lines
    assert (f"SOURCE CHANGED {KEY}: 1 document removed: [1] Refund policy <b>@team</b> (id: kb-7)") in lines
    assert "sources: 1 changed, 0 the same" in lines
    assert not any("same output" in line for line in lines)


def test_pr_comment_lists_the_removed_document_and_fences_the_diff() -> None:
    body = render(documents([REFUNDS, SHIPPING], [SHIPPING]))
    assert "| yes → no | source changed | not confirmed: not re-asked |" in body  # under "Flips not settled"
    assert "### Source changes" in body
    assert (f"| `{KEY}` | 1 | \\[1\\] Refund policy &lt;b&gt;&#64;team&lt;/b&gt; (id: kb-7) | - | - |") in body
    assert f"<details><summary>source diff of {KEY}</summary>" in body  # raw HTML: no markdown escapes
    # the diff's text holds ``` and </details>: the fence is longer than any run of backticks in it
    block = body[body.index("<details><summary>source diff"):]
    fence = re.search(r"^(`{3,})diff$", block, re.MULTILINE)
    assert fence is not None and len(fence.group(1)) == 4
    inside = block[fence.end():block.index("\n" + fence.group(1) + "\n", fence.end())]
    assert "-[1] Refund policy <b>@team</b> (id: kb-7)" in inside and "-</details>" in inside
    assert block.index("\n</details>") > fence.end() + len(inside)  # the block's own end comes after the fence


def test_pr_comment_says_nothing_of_sources_that_did_not_change() -> None:
    body = render(documents([REFUNDS, SHIPPING], [REFUNDS, SHIPPING]))
    assert "### Source changes" not in body
    assert "| yes → no | same output and source |" in body


def test_html_shows_the_removed_document_escaped() -> None:
    page = render_html(documents([REFUNDS, SHIPPING], [SHIPPING]))
    assert "1 source(s) changed" in page
    change = page[page.index('id="source-change-0"'):]
    change = change[:change.index("</div>")]
    assert ('<p class="docs-removed">removed: <code>[1] Refund policy &lt;b&gt;@team&lt;/b&gt; (id: kb-7)</code></p>'
            in change)
    assert "<b>@team</b>" not in page
    assert '<span class="del">-[1] Refund policy &lt;b&gt;@team&lt;/b&gt; (id: kb-7)</span>' in change


def test_html_shows_a_single_text_sources_diff() -> None:
    page = render_html(documents("The old article.\nIt said refunds.", "The new article.\nIt said refunds."))
    change = page[page.index('id="source-change-0"'):]
    assert '<span class="del">-The old article.</span>' in change
    assert '<span class="ins">+The new article.</span>' in change
