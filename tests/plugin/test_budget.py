"""``--bineval-budget``: once spent, the remaining evaluations are errors that say so (never passes, never skips),
and the summary says how much of the suite was judged; in dollars (a fake Anthropic endpoint's priced replies), in
tokens (a scripted judge), per worker share under pytest-xdist; a dollar budget with unpriced replies refuses."""

from __future__ import annotations

import argparse

import pytest
from support import report_of

from pytest_bineval.budget import Budget, parse_budget
from pytest_bineval.testing.faults import FaultServer, Received, Reply, anthropic_message
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

TESTS = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task="Summarize.", dimensions={"consistency": "D"}, questions=[
    Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?") for i in (1, 2)])

@pytest.mark.parametrize("i", range(N))
def test_summary(i):
    assert_passes(f"summary {i}", "consistency", checklist=CHECKLIST)
'''


def project(pytester: pytest.Pytester, n: int, ini: str = "") -> None:
    scripted_project(pytester, answers={}, ini="bineval_cache = off\n" + ini)
    pytester.makepyfile(test_it=TESTS.replace("range(N)", f"range({n})"))


def test_token_budget_stops_the_run_with_errors(pytester: pytest.Pytester) -> None:
    project(pytester, 4)
    result = pytester.runpytest("--bineval-budget", "1tok", "--bineval-report", "report.json")
    result.assert_outcomes(passed=1, errors=3)
    result.stdout.fnmatch_lines([
        "*NOT SCORED test_it.py::test_summary[[]1[]]: BudgetReachedError: the budget is reached: * tokens spent of "
        "1 tokens (--bineval-budget), so this was not judged*",
        "budget 1 tokens reached: * tokens spent; 1 evaluation judged, 3 refused (their tests are errors: not "
        "judged)",
    ])
    totals = report_of(pytester).totals
    assert (totals.evaluations, totals.budget_refused, totals.unscored_tests) == (1, 3, 3)
    assert report_of(pytester).settings.budget == "1tok"


def test_budget_not_reached_says_so(pytester: pytest.Pytester) -> None:
    project(pytester, 2, ini="bineval_budget = 1Mtok")
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["budget 1,000,000 tokens: * tokens spent; every evaluation was judged"])


def test_budget_under_xdist_is_a_share_per_worker(pytester: pytest.Pytester) -> None:
    project(pytester, 6)
    result = pytester.runpytest("-p", "xdist", "-n", "2", "--bineval-budget", "1tok", "--bineval-report=report.json")
    # each worker judges its first evaluation (nothing spent yet), then its share, 0.5 tokens, is spent
    result.assert_outcomes(passed=2, errors=4)
    result.stdout.fnmatch_lines([
        "*BudgetReachedError: the budget is reached: * tokens spent of 0.5 tokens (this worker's share of 1 tokens "
        "over 2 workers)*",
        # the summary says plainly that the budget was kept per process (issue 33 item 18)
        "budget 1 tokens, 0.5 tokens per worker (2 workers, each counting its own) reached: * spent; 2 evaluations "
        "judged, 4 refused*",
    ])
    assert report_of(pytester).settings.budget_workers == 2
    help_text = pytester.runpytest("--help").stdout.str()
    assert "The budget is kept per process" in " ".join(help_text.split())


def test_dollar_budget_with_unpriced_replies_refuses(pytester: pytest.Pytester) -> None:
    project(pytester, 3)  # the scripted judge's replies have no price
    result = pytester.runpytest("--bineval-budget", "$0.50")
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*BudgetReachedError: the budget $0.5000 (--bineval-budget) is in dollars, but * replies had no known price*"
        "Give the budget in tokens, e.g. --bineval-budget 200000tok*",
    ])


def test_dollar_budget_on_priced_replies(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")

    def respond(req: Received, index: int) -> Reply:
        return Reply(200, anthropic_message('{"answer": "yes"}', model="claude-haiku-4-5", input_tokens=30,
                                            output_tokens=6))

    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\nbineval_cache = off\n")
    pytester.makepyfile(test_it=TESTS.replace("range(N)", "range(3)"))
    with FaultServer(respond, paths=("/v1/messages",)) as server:
        # one evaluation: 2 x (30 x $1/M + 6 x $5/M) = $0.00012, over the budget of $0.0001
        result = pytester.runpytest("--bineval-model", "anthropic/claude-haiku-4-5", "--bineval-api-base",
                                    server.root_url, "--bineval-budget", "0.0001")
        assert server.requests == 2
    result.assert_outcomes(passed=1, errors=2)
    result.stdout.fnmatch_lines([
        "*BudgetReachedError: the budget is reached: $0.0001 spent of $0.0001 (--bineval-budget)*",
        "budget $0.0001 reached: $0.0001 spent; 1 evaluation judged, 2 refused*",
    ])


@pytest.mark.parametrize(("text", "budget"), [
    ("0.50", Budget(0.5, "usd")), ("$2", Budget(2.0, "usd")), ("$ .25", Budget(0.25, "usd")),
    ("200000tok", Budget(200000.0, "tokens")), ("200ktok", Budget(200000.0, "tokens")),
    ("2Mtok", Budget(2e6, "tokens")), ("1.5k tokens", Budget(1500.0, "tokens")),
])
def test_budget_syntax(text: str, budget: Budget) -> None:
    assert parse_budget(text) == budget


@pytest.mark.parametrize("text", ["0", "$0", "-1", "abc", "5 dollars", "0tok", "2Gtok", "1.2.3"])
def test_bad_budgets_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_budget(text)


def test_bad_budget_option_is_a_usage_error(pytester: pytest.Pytester) -> None:
    project(pytester, 1)
    result = pytester.runpytest("--bineval-budget=ten")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --bineval-budget*not a budget: 'ten' (give dollars like 0.50 or $0.50, "
                                 "or tokens like 200000tok, 200ktok or 2Mtok)*"])


def test_bad_budget_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    project(pytester, 1, ini="bineval_budget = 0")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bineval_budget = '0': a budget is more than $0, not '0'*"])
