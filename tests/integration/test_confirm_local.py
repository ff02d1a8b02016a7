"""--bineval-confirm 2 on the real embedded model (SmolLM2-135M through llama.cpp): the re-asks go through the
prefill shape (one request each, no explanation), the counts add up, and a second run asks nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import real_judge_project

from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]

SUITE = '''
import pytest
from pytest_bineval import assert_passes

ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."

@pytest.mark.bineval(task="Summarize the article in one sentence.",
                     dimensions=[{"consistency": "The summary states only facts from the article."}])
def test_confirmed():
    assert_passes("Paris closed an old tunnel in 1990 after a fire that cost 3 euros.", source=ARTICLE,
                  threshold=0.0)
'''


@pytest.mark.local_model
def test_confirm_on_the_real_embedded_model(pytester: pytest.Pytester, tmp_path: Path) -> None:
    real_judge_project(pytester, "test_confirmed", SUITE)
    args = ["--color=no", "--bineval-strict", "--bineval-confirm=2", "--bineval-report=report.json",
            f"--bineval-cache-dir={tmp_path / 'cache'}"]
    first = pytester.runpytest_inprocess(*args)
    first.assert_outcomes(passed=1)
    doc = ReportDocument.load(pytester.path / "report.json")
    c = doc.confirmation
    assert c is not None and (c.rounds, c.questions) == (2, 3)
    (ev,) = doc.evaluations
    confirmed = [v for v in ev.verdicts if v.confirmation is not None]
    assert len(confirmed) == c.reasked >= 1  # the wrong summary gets at least one no from this greedy judge
    for v in confirmed:  # at 95% three answers never decide: every re-asked question is asked K + 1 = 3 times
        assert len(v.asks) == 3 and "error" not in v.asks and not v.confirmation.decided  # type: ignore[union-attr]
    # greedy decoding agrees with itself: nothing splits; each re-ask is one request (the answer token only)
    assert (c.reasks, c.requests, c.unstable, c.cache_hits) == (2 * c.reasked, 2 * c.reasked, 0, 0)
    first.stdout.fnmatch_lines([f"of which confirmation (--bineval-confirm 2, 95% Wilson interval): {c.reasked} "
                                f"of 3 questions re-asked, {c.reasks} re-asks ({c.requests} requests, 0 cache "
                                f"hits), 0 decided, 0 unstable; {3 + c.reasks} asks in all, where "
                                "--bineval-repeats 3 would make 9"])

    again = pytester.runpytest_inprocess(*args)
    again.assert_outcomes(passed=1)
    second = ReportDocument.load(pytester.path / "report.json")
    assert second.totals.llm_calls == 0
    assert second.confirmation is not None and second.confirmation.cache_hits == c.reasks
    assert [v.asks for v in second.evaluations[0].verdicts] == [v.asks for v in ev.verdicts]
