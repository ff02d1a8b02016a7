"""--bineval-batch on the real embedded model (SmolLM2-135M through llama.cpp, via litellm's in-process provider):
it runs in this process and has no batch API, so its requests are asked directly, in one pass (no first pass: the
test bodies run once), the summary says so, and the run is judged as without the option."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REAL_CHECKLIST

from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]

SUITE = '''
import pytest
from pytest_bineval import assert_passes

ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."

@pytest.mark.bineval(task="Summarize the article in one sentence.",
                     dimensions=[{"consistency": "The summary states only facts from the article."}])
def test_batched():
    with open("bodies.log", "a") as log:
        log.write("ran\\n")
    assert_passes("Lyon opened a new bridge on Monday; it cost 40 million euros.", source=ARTICLE, threshold=0.0)
'''


@pytest.mark.local_model
def test_the_embedded_model_is_asked_directly_in_one_pass(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pin = pytester.path / "__bineval__" / "test_real" / "test_batched.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(json.dumps({"format": 1, "checklists": [REAL_CHECKLIST]}))
    pytester.makepyfile(test_real=SUITE)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    args = ["--color=no", "--bineval-strict", "--bineval-batch", "--bineval-report=report.json",
            f"--bineval-cache-dir={tmp_path / 'cache'}"]
    result = pytester.runpytest_inprocess(*args)
    result.assert_outcomes(passed=1)
    assert (pytester.path / "bodies.log").read_text().splitlines() == ["ran"]  # no first pass
    doc = ReportDocument.load(pytester.path / "report.json")
    (record,) = doc.evaluations
    assert [v.answer for v in record.verdicts if v.answer == "error"] == []
    assert doc.totals.llm_calls >= 3 and doc.totals.batch_requests == 0  # asked directly, at no batch price
    batch = doc.batch
    assert batch is not None and 3 <= batch.in_process <= doc.totals.llm_calls and batch.submitted == 0
    result.stdout.fnmatch_lines([
        f"batch: {batch.in_process} requests of in-process models asked directly (no batch API) (at the full price)",
        "bineval: --bineval-batch: the judge bineval/* runs in this process and has no batch API: its requests were "
        "asked directly, in one pass (the test bodies ran once)"])
    assert "requests sent in" not in result.stdout.str()
    assert not (tmp_path / "cache" / "batches").exists()  # nothing was written down: no batch was sent
