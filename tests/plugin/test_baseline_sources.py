"""A retrieval change against a baseline, through pytester and a scripted judge: the same answers, judged against
the documents a retriever returns; between the baseline run and the PR run only the retriever's ``k`` changes
(2 -> 1), which drops the refund article. The flip it causes is reported as ``source changed`` (never as a flip on
the same output and source, the judge's noise), with the document that went, in the terminal, the PR comment and
the HTML report. In one process: the controller compares (a baseline's run under ``-n 2`` is
tests/plugin/test_gate.py's, and each record's sources and kept texts cross a worker in tests/unit/test_ledger.py)."""

from __future__ import annotations

import pytest

from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

# The judge: an answer about refunds is grounded only when the refund article was retrieved.
RULE = '''
import json

def answer(req):
    if "groundedness" in req.question and "refund" in req.output and "Refund policy" not in req.user:
        return json.dumps({"answer": "no", "explanation": "No retrieved article mentions refunds."})
    return "yes"
'''

SUITE = '''
import pathlib

import pytest
from pytest_bineval import assert_passes

ARTICLES = [
    {"id": "kb-2", "title": "Shipping", "text": "Orders ship within 2 business days."},
    {"id": "kb-7", "title": "Refund policy", "text": "Refunds are accepted within 30 days of purchase."},
]
ANSWERS = {
    "refund": "You can get a refund within 30 days of purchase.",
    "shipping": "Your order ships within 2 business days.",
}


def retrieve(k):
    return ARTICLES[:k]


@pytest.mark.bineval(task="Answer the customer's question from the help articles.",
                     dimensions={"groundedness": "Every claim is supported by the retrieved help articles."})
@pytest.mark.parametrize("case", ["refund", "shipping"])
def test_answer(case):
    k = int((pathlib.Path(__file__).parent / "k.txt").read_text())
    assert_passes(ANSWERS[case], source=retrieve(k))


@pytest.mark.bineval(task="Answer the customer's question from the help articles.",
                     dimensions={"groundedness": "Every claim is supported by the retrieved help articles."})
def test_hours():
    assert_passes("We are open from 9 to 5.", source="Opening hours: 9 to 5, Monday to Friday.")
'''


ENTRY_POINTS = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes_async

DOCS = [{"id": "kb-7", "title": "Refund policy", "text": "Refunds are accepted within 30 days."}, "A chunk."]
CHECKLIST = Checklist(task="Answer from the help articles.", dimensions={"groundedness": "Supported."},
                      questions=[Question(id="g-1", dimension="groundedness", text="Is it grounded?")])


def test_fixture(bineval):
    evaluation = bineval.evaluate("Refunds within 30 days.", CHECKLIST, source=DOCS)
    assert [v.answer for v in evaluation.verdicts] == ["yes"]


@pytest.mark.asyncio
async def test_async():
    await assert_passes_async("Refunds within 30 days.", checklist=CHECKLIST, source=DOCS)


@pytest.mark.asyncio
async def test_async_bad_document():
    with pytest.raises(TypeError, match=r"source\\[0\\]\\['id'\\] must be a str"):
        await assert_passes_async("x", checklist=CHECKLIST, source=[{"id": 7, "text": "x"}])
'''


def test_the_fixture_and_the_async_assertion_take_documents(pytester: pytest.Pytester) -> None:
    # the judge says yes only when it reads both documents, numbered, each between its markers
    rule = '''
def answer(req):
    numbered = ("<document>\\n[1] Refund policy (id: kb-7)\\nRefunds are accepted within 30 days.\\n</document>"
                "\\n\\n<document>\\n[2]\\nA chunk.\\n</document>")
    return "yes" if numbered in req.user else "no"
'''
    scripted_project(pytester, provider="dfake", rule=rule)
    pytester.makepyfile(test_entry=ENTRY_POINTS)
    pytester.runpytest().assert_outcomes(passed=3)


def test_a_retrieval_change_is_reported_as_source_changed(pytester: pytest.Pytester) -> None:
    scripted_project(pytester, provider="sfake", rule=RULE)
    pytester.makepyfile(test_support=SUITE)
    (pytester.path / "k.txt").write_text("2")
    base = pytester.runpytest("--bineval-report=base.json")
    base.assert_outcomes(passed=3)

    (pytester.path / "k.txt").write_text("1")  # the PR: the retriever keeps one article
    result = pytester.runpytest("--color=no", "--bineval-baseline=base.json", "--bineval-report=report.json",
                                "--bineval-pr-comment=comment.md", "--bineval-html=report.html")
    result.assert_outcomes(passed=2, failed=1)
    t = "test_support.py::test_answer"
    q1 = "Does the response meet groundedness check 1?"
    # the flip is re-asked about both runs: the same answer, judged against the baseline's source (with the refund
    # article) and against this run's (without): the judge keeps its answers, so the case regressed
    result.stdout.fnmatch_lines([
        "*= bineval regressions =*",
        f"REGRESSED {t}[[]refund[]] (case='refund'): source changed",
        f"  [[]groundedness[]] {q1}: yes -> no (confirmed; re-asked: now no no no no no no no; baseline yes yes yes "
        "yes yes yes yes)",
        "    now: No retrieved article mentions refunds.",
        f"SOURCE CHANGED {t}[[]refund[]]: 1 document removed: [[]2[]] Refund policy (id: kb-7)",
        "outputs: 0 changed, 3 unchanged and judged again, of 3 compared evaluations",
        "sources: 2 changed, 1 the same",
    ])
    out = result.stdout.str()
    assert "same output" not in out  # never the judge's noise
    assert f"SOURCE CHANGED {t}[shipping]" not in out  # its source changed, its answers did not

    doc = ReportDocument.load(pytester.path / "report.json")
    assert doc.regressions is not None
    by_key = {d.key: d for d in doc.regressions.compared}
    refund = by_key[f"{t}[refund]"]
    assert refund.inputs == "source changed" and not refund.same_inputs
    assert [d.heading for d in refund.source_change.removed] == ["[2] Refund policy (id: kb-7)"]
    assert by_key["test_support.py::test_hours"].inputs == "same output and source"
    (record,) = [r for r in doc.evaluations if r.key == f"{t}[refund]"]
    assert record.documents is not None and [d.id for d in record.documents] == ["kb-2"]

    comment = (pytester.path / "comment.md").read_text()
    assert "Since the baseline: source changed." in comment
    assert "### Source changes" in comment
    assert f"| `{t}[refund]` | 2 | \\[2\\] Refund policy (id: kb-7) | - | - |" in comment
    page = (pytester.path / "report.html").read_text()
    assert '<p class="docs-removed">removed: <code>[2] Refund policy (id: kb-7)</code></p>' in page
