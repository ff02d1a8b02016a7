"""The whole regression loop on the real embedded judge (#21): pin, hand-edit, re-pin (the edit is kept), baseline, a
change of the output, the gate; in-process, and as a hosted judge is reached: over HTTP, llama.cpp's server with the
embedded model on 127.0.0.1 (``bineval serve``'s server). Over HTTP the loop skips the hand-edit and the re-pin (they
are about pins, not transport: the in-process variant runs them): the server writes the pin, then the baseline and
the gate. What the 135M judge answers is not asserted (it is close to a coin flip); that each step does what it says
with the real model in the loop is. The runs are in this process (pytester's in-process runs: the worker has litellm
and the model loaded already)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_bineval.llm.server import SERVER_ALIAS
from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]

ARTICLE = ("The city of Lyon opened a new bridge over the Rhone on Monday. It cost 40 million euros and took "
           "three years to build.")
SUITE = f'''
import pathlib
import pytest
from pytest_bineval import assert_passes

ARTICLE = {ARTICLE!r}

@pytest.mark.bineval(task="Summarize the article in one sentence.")
def test_summary():
    output = (pathlib.Path(__file__).parent / "output.txt").read_text()
    assert_passes(output, dimension="consistency", source=ARTICLE, threshold=0.0)
'''
EDITED = "Does the summary name the city mentioned in the article?"


@pytest.fixture(params=["in-process", pytest.param("llama.cpp server", marks=pytest.mark.http_server)])
def judge_args(request: pytest.FixtureRequest) -> list[str]:
    """The options that choose the judge (and checklist writer): none for the in-process embedded model; the
    model alias and API base of the session's llama.cpp server (tests/integration/conftest.py)."""
    if request.param == "in-process":
        return []
    base_url = request.getfixturevalue("llama_server")
    return [f"--bineval-model=openai/{SERVER_ALIAS}", f"--bineval-api-base={base_url}"]


@pytest.mark.local_model
def test_pin_edit_repin_baseline_change_gate_on_the_embedded_model(pytester: pytest.Pytester, tmp_path: Path,
                                                                   judge_args: list[str]) -> None:
    pytester.makepyfile(test_real=SUITE)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    output = pytester.path / "output.txt"
    output.write_text("Lyon opened a 40 million euro bridge over the Rhone on Monday.")
    cache = f"--bineval-cache-dir={tmp_path / 'cache'}"
    pin = pytester.path / "__bineval__" / "test_real" / "test_summary.json"

    def run(*args: str) -> pytest.RunResult:
        return pytester.runpytest_inprocess("--color=no", cache, *judge_args, *args)

    # 1. pin: the embedded model writes the checklist
    first = run("--bineval-update-checklists")
    first.assert_outcomes(passed=1)
    first.stdout.fnmatch_lines(["pin created: __bineval__/test_real/test_summary.json [[]consistency[]] "
                                "'Summarize the article in one sentence.'",
                                "pins: 1 created, 0 rewritten, 0 kept because edited by hand, 0 entries given "
                                "more tests"])
    question = json.loads(pin.read_text())["checklists"][0]["questions"][0]["text"]
    if not judge_args:  # in-process: the pin steps (over HTTP, the pin as the server wrote it)
        # 2. a reviewer rewrites the first question
        data = json.loads(pin.read_text())
        data["checklists"][0]["questions"][0]["text"] = EDITED
        pin.write_text(json.dumps(data, indent=2))
        edited = pin.read_text()
        # 3. re-pin: the edit is kept
        again = run("--bineval-update-checklists")
        again.assert_outcomes(passed=1)
        again.stdout.fnmatch_lines(["pin kept: __bineval__/test_real/test_summary.json [[]consistency[]] *: "
                                    "edited by hand; --bineval-update-checklists=all rewrites it"])
        assert pin.read_text() == edited
        question = EDITED
    # 4. the baseline, judged with the reviewed pin
    run("--bineval-strict", "--bineval-report=base.json").assert_outcomes(passed=1)
    base = ReportDocument.load(pytester.path / "base.json")
    assert base.evaluations[0].verdicts[0].question == question  # judged with the pin (the reviewed one)
    assert base.judged_by is not None and base.judged_by.models == [base.evaluations[0].model]
    # 5. the change under review, 6. the gate
    output.write_text("Paris closed an old tunnel in 1990 after a fire.")
    gate = run("--bineval-strict", "--bineval-baseline=base.json", "--bineval-fail-on-regression",
               "--bineval-report=now.json", "--bineval-pr-comment=comment.md")
    now = ReportDocument.load(pytester.path / "now.json")
    report = now.regressions
    assert report is not None and [d.key for d in report.compared] == ["test_real.py::test_summary"]
    assert report.judged_differently == []  # the same judge, prompt and pin
    # the two questions: the flips of the changed output were re-asked about both outputs by the same judge (the
    # embedded model decodes greedily: it keeps its answers), and the suite's one evaluation is uninformative
    flips = report.flips()
    assert all(c.flip is not None and c.flip.status in ("confirmed", "skipped") for _, c in flips)
    if flips:
        assert report.confirmation is not None and report.confirmation.reasks > 0
        assert now.totals.llm_calls >= report.confirmation.requests > 0  # counted in the run's requests
    (suite,) = report.suite
    assert suite.verdict == "uninformative"  # one evaluation cannot show a suite-level drop
    failed = bool(report.regressed_cases())
    assert gate.ret == (1 if failed else 0)  # the gate acts on a confirmed regression
    gate.stdout.fnmatch_lines(["*= bineval regressions =*", "baseline: base.json *",
                               "SUITE consistency: uninformative *",
                               f"vs baseline base.json: {len(report.regressed_cases())} case* regressed (confirmed), *",
                               "bineval: * · consistency: uninformative * · the 1 evaluation meets its thresholds"])
    comment = (pytester.path / "comment.md").read_text(encoding="utf-8")
    assert comment.startswith("## bineval: " + ("**1 case regressed (confirmed)" if failed else "no confirmed "
                                                "regression"))
    assert "no significant regression" not in comment
    assert comment.index("### Regressed cases (confirmed)") < comment.index("### The suite, per dimension") < \
        comment.index("### What the run cost")
