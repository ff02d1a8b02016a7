"""``source=`` as a list of documents on the real embedded model (SmolLM2-135M through llama.cpp and litellm): the
judge answers every question about the numbered documents (no judge error), the record keeps each document's
digest, a rerun is served from the reply cache (the rendering is deterministic), and a retrieval change against
the baseline (k = 2 -> 1) is reported as a source change naming the document that went, never as the judge's noise.

Quality is not asserted (a 135M judge is noise); the pinned hand-written checklist keeps the run short."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import real_judge_project

from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]

SUITE = '''
import pathlib

import pytest
from pytest_bineval import assert_passes

DOCUMENTS = [
    {"id": "news-1", "title": "Lyon bridge",
     "text": "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."},
    {"id": "news-2", "title": "Weather", "text": "Rain is expected in Lyon on Tuesday."},
]


@pytest.mark.bineval(task="Summarize the article in one sentence.",
                     dimensions=[{"consistency": "The summary states only facts from the article."}])
def test_docs():
    k = int((pathlib.Path(__file__).parent / "k.txt").read_text())
    assert_passes("Lyon opened a new bridge on Monday for 40 million euros.", source=DOCUMENTS[:k],
                  threshold=0.0)
'''


@pytest.mark.local_model
def test_documents_on_the_real_embedded_model(pytester: pytest.Pytester, tmp_path: Path) -> None:
    real_judge_project(pytester, "test_docs", SUITE)
    k = pytester.path / "k.txt"
    args = ["--color=no", "--bineval-strict", f"--bineval-cache-dir={tmp_path / 'cache'}"]

    k.write_text("2")
    first = pytester.runpytest_inprocess(*args, "--bineval-report=base.json")
    first.assert_outcomes(passed=1)
    base = ReportDocument.load(pytester.path / "base.json")
    (rec,) = base.evaluations
    assert rec.model.startswith("bineval/") and len(rec.verdicts) == 3
    assert all(v.answer in ("yes", "no") and v.p_yes is not None for v in rec.verdicts)  # every reply read
    assert rec.documents is not None
    assert [d.heading for d in rec.documents] == ["[1] Lyon bridge (id: news-1)", "[2] Weather (id: news-2)"]
    assert rec.source is not None and rec.source.startswith("<document>\n[1] Lyon bridge (id: news-1)\nThe city")
    assert base.totals.llm_calls >= 3

    again = pytester.runpytest_inprocess(*args, "--bineval-report=again.json")
    again.assert_outcomes(passed=1)
    rerun = ReportDocument.load(pytester.path / "again.json")
    assert rerun.totals.llm_calls == 0 and rerun.totals.cache_hits == 3  # the same documents, the same prompts
    assert rerun.evaluations[0].source_digest == rec.source_digest

    k.write_text("1")  # the pull request: the retriever keeps one document
    pr = pytester.runpytest_inprocess(*args, "--bineval-baseline=base.json", "--bineval-report=pr.json")
    pr.assert_outcomes(passed=1)
    pr.stdout.fnmatch_lines(["*= bineval regressions =*", "sources: 1 changed, 0 the same"])
    assert "same output" not in pr.stdout.str()  # a flip here, if the judge made one, is said to be the source's
    doc = ReportDocument.load(pytester.path / "pr.json")
    assert doc.regressions is not None
    (d,) = doc.regressions.compared
    assert not d.output_changed and d.source_change.state == "changed" and not d.same_inputs
    assert [x.heading for x in d.source_change.removed] == ["[2] Weather (id: news-2)"]
    assert all(c.kind != "judge error" for c in d.changes)
    for line in pr.stdout.lines:
        if line.startswith(("REGRESSION ", "FIX ", "UNSTABLE FLIP ")):
            assert line.endswith("(source changed)")
