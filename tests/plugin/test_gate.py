"""The regression gate's two questions through pytester and the real terminal output, with a scripted judge: a
support assistant answers 13 customer questions from help articles (custom dimensions groundedness, helpfulness,
tone, 3 questions each), a baseline from main, and a pull request after which 4 of the 13 answers invent a refund
policy. The default gate fails naming the 4 cases as confirmed regressions; a judge that says no once and yes on
re-asking makes unstable flips and the gate passes; the PR comment's headline in each case. The failing gate runs
in one process and under ``-p xdist -n 2`` (the ``workers`` fixture: the controller compares the merged records and
re-asks the flips, with the texts its workers kept)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]


QUESTIONS = [
    "How do I reset my password?", "Can I change my delivery address?", "Where is my order?",
    "How do I cancel my subscription?", "Do you ship abroad?", "Can I return a sale item?",
    "How long does a refund take?", "Can I pay by invoice?", "How do I update my card?",
    "Is my data shared with third parties?", "Can I have two accounts?", "How do I delete my account?",
    "Do you offer student discounts?",
]
INVENTED = QUESTIONS[2:6]  # the 4 answers the pull request makes invent a policy

APP = f'''
import pathlib

import pytest

from pytest_bineval import assert_passes

HERE = pathlib.Path(__file__).parent
QUESTIONS = {QUESTIONS!r}
INVENTED = {INVENTED!r}


def article(question):
    return f"Help article for: {{question}} Follow the steps in your account settings."


def answer(question):
    """The support assistant: an answer from the article; the pull request (a file named pr) invents a policy."""
    text = f"Thanks for asking! {{article(question)}}"
    if (HERE / "pr").exists() and question in INVENTED:
        text += " Also, every order can be refunded within 90 days, no questions asked."
    return text


@pytest.mark.bineval(task="Answer the customer's question from the help articles.", threshold=0.0,
                     dimensions={{"groundedness": "Every claim is stated in the articles.",
                                 "helpfulness": "The answer solves the customer's problem.",
                                 "tone": "The answer is friendly and professional."}})
@pytest.mark.parametrize("question", QUESTIONS)
def test_answer(question):
    assert_passes(answer(question), source=article(question))
    once = HERE / "fail-once" / question.replace("?", "").replace(" ", "-")
    if once.exists():  # a test that fails its first attempt (a re-run plugin runs it again)
        once.unlink()
        raise RuntimeError("flaky")
'''

# The judge: a groundedness question about an answer that invents a policy is answered no, every other yes; with
# FLAKY, such a no is given once per question and output, and re-asking gets yes (counted in a file, so that the
# pytest-xdist controller, which re-asks, sees what a worker asked).
RULE = '''
import fcntl, json, pathlib

HERE = pathlib.Path(__file__).parent


def asked_before(key):
    with open(HERE / "calls.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        path = HERE / "calls.json"
        calls = json.loads(path.read_text()) if path.exists() else {}
        n = calls.get(key, 0)
        calls[key] = n + 1
        path.write_text(json.dumps(calls))
    return n > 0


def answer(req):
    if "groundedness" in req.question and "90 days" in req.output:
        if (HERE / "flaky").exists() and asked_before(req.output + "|" + req.question):
            return "yes"
        return "no"
    return "yes"
'''


def project(pytester: pytest.Pytester) -> None:
    scripted_project(pytester, provider="gfake", rule=RULE, questions_per_dimension=3)
    pytester.makepyfile(test_support=APP)


def run(pytester: pytest.Pytester, workers: list[str], *args: str) -> pytest.RunResult:
    return pytester.runpytest(*workers, *args)  # in-process: under xdist the workers are processes anyway


def baseline_then_pr(pytester: pytest.Pytester, workers: list[str], *extra: str) -> pytest.RunResult:
    project(pytester)
    base = run(pytester, [], "--bineval-report=base.json")  # the baseline from main: how it ran is not the subject
    base.assert_outcomes(passed=13)
    (pytester.path / "pr").write_text("")
    return run(pytester, workers, "--bineval-baseline=base.json", "--bineval-fail-on-regression",
               "--bineval-report=pr.json", "--bineval-pr-comment=comment.md", *extra)


def headline(pytester: pytest.Pytester) -> str:
    return (pytester.path / "comment.md").read_text().splitlines()[0]


def test_a_pr_that_invents_a_policy_fails_the_default_gate_naming_the_four_cases(
        pytester: pytest.Pytester, workers: list[str]) -> None:
    result = baseline_then_pr(pytester, workers, "--bineval-html=page.html")
    assert result.ret == 1
    result.assert_outcomes(passed=13)  # every threshold holds: only the gate sees the regression
    cases = sorted(f"test_support.py::test_answer[{q}]" for q in INVENTED)
    first = cases[0]  # test_answer[Can I return a sale item?]
    result.stdout.fnmatch_lines([
        "*= bineval regressions =*",
        f"REGRESSED {first.replace('[', '[[]')} (question='Can I return a sale item?'): output changed",
        "  [[]groundedness] Does the response meet groundedness check 1?: yes -> no (confirmed; re-asked: now no "
        "no no no no no no; baseline yes yes yes yes yes yes yes)",
        "  [[]groundedness] Does the response meet groundedness check 2?: yes -> no (not re-asked: another flip of "
        "the case was confirmed)",
        "SUITE groundedness: uninformative (1.00 -> 0.69 over 13 evaluations, p = 0.38; it could miss a drop of 57 "
        "points)",
        "SUITE helpfulness: uninformative (1.00 -> 1.00 over 13 evaluations, p = 1; it could miss a drop of 29 "
        "points)",
        "confirmation of flips: 12 flips to confirm by re-asking about both runs (at most 8 asks of each, 1 "
        "against the flip allowed; each flip at level 0.0021, a flip of noise confirmed with chance <= 0.0012): 56 "
        "fresh asks, 56 requests, 0 cache hits, *",
        "vs baseline base.json: 4 cases regressed (confirmed), 4 confirmed flips, 0 flips of the judge's noise, 0 "
        "flips unsettled, 0 dimensions regressed across the suite; 12 regressions, *",
        "bineval: session failed: 4 cases regressed (confirmed): " + ", ".join(cases).replace("[", "[[]")
        + " vs baseline base.json (--bineval-fail-on-regression)",
        "bineval: 4 cases regressed (confirmed): * · groundedness: uninformative (* · all 13 evaluations meet their "
        "thresholds",
    ])
    assert headline(pytester) == HEADLINE_FAILED
    comment = (pytester.path / "comment.md").read_text()
    assert "- `question` = 'Can I return a sale item?'" in comment
    assert comment.count("<details><summary>Outputs: the baseline's and this run's</summary>") == 4
    assert "every order can be refunded within 90 days" in comment  # the new output, beside the old one
    # the HTML page says the same, in the same order, and shows each case with its parameters and both outputs
    page = (pytester.path / "page.html").read_text(encoding="utf-8")
    outcome = page[page.index('<ul class="outcome" id="outcome"'):page.index("</ul>", page.index('id="outcome"'))]
    assert outcome.index("4 cases regressed (confirmed)") < outcome.index("groundedness: uninformative") < \
        outcome.index("all 13 evaluations meet their thresholds")
    assert page.count('<div class="case">') == 4
    assert "<code>question</code> = <code>&#39;Where is my order?&#39;" in page
    assert "every order can be refunded within 90 days, no questions asked.</pre>" in page
    document = ReportDocument.load(pytester.path / "pr.json")
    diff = document.regressions
    assert diff is not None and diff.failed
    assert [d.key for d in diff.regressed_cases()] == cases
    assert [d.params for d in diff.regressed_cases()] == [{"question": repr(k.split("[")[1][:-1])} for k in cases]
    c = diff.confirmation
    assert c is not None and (c.flips, c.asks, c.tolerance, c.reasks, c.requests) == (12, 8, 1, 56, 56)
    assert len(diff.flips("confirmed")) == 4 and len(diff.flips("skipped")) == 8
    # the fresh asks are requests of the run: 4 new outputs x 9 questions + 12 explanations of a no, and 56 re-asks
    assert document.totals.llm_calls == 4 * 9 + 12 + 56


def _escaped(key: str) -> str:
    return key.replace("_", "\\_").replace("[", "\\[").replace("]", "\\]")


HEADLINE_FAILED = (
    "## bineval: **4 cases regressed (confirmed): " + ", ".join(
        _escaped(f"test_support.py::test_answer[{q}]") for q in sorted(INVENTED)) + "** · groundedness: "
    "uninformative (1.00 -&gt; 0.69 over 13 evaluations, p = 0.38; it could miss a drop of 57 points) · "
    "helpfulness: uninformative (1.00 -&gt; 1.00 over 13 evaluations, p = 1; it could miss a drop of 29 points) · "
    "tone: uninformative (1.00 -&gt; 1.00 over 13 evaluations, p = 1; it could miss a drop of 29 points) · all 13 "
    "evaluations meet their thresholds")


def test_a_judge_that_says_no_once_and_yes_on_re_asking_makes_unstable_flips_and_passes(
        pytester: pytest.Pytester) -> None:
    project(pytester)
    run(pytester, [], "--bineval-report=base.json").assert_outcomes(passed=13)
    (pytester.path / "pr").write_text("")
    (pytester.path / "flaky").write_text("")
    result = run(pytester, [], "--bineval-baseline=base.json", "--bineval-fail-on-regression",
                 "--bineval-report=pr.json", "--bineval-pr-comment=comment.md")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines([
        "UNSTABLE FLIP test_support.py::test_answer[[]Where is my order?] [[]groundedness] Does the response meet "
        "groundedness check 1?: yes -> no (output changed; judge noise; re-asked: now yes yes; baseline yes)",
    ])
    result.stdout.no_fnmatch_line("*session failed*")
    assert headline(pytester).startswith("## bineval: no confirmed regression (12 flips of the judge's noise) · ")
    document = ReportDocument.load(pytester.path / "pr.json")
    assert document.regressions is not None and not document.regressions.failed
    assert len(document.regressions.flips("unstable")) == 12


def test_re_runs_keep_one_record_per_case_and_the_gate_still_confirms(pytester: pytest.Pytester) -> None:
    """pytest-rerunfailures: two of the regressed cases fail their first attempt; the last attempt's records are
    compared, the 4 cases are confirmed once each, and the re-run's requests are counted."""
    project(pytester)
    run(pytester, [], "--bineval-report=base.json").assert_outcomes(passed=13)
    (pytester.path / "pr").write_text("")
    (pytester.path / "fail-once").mkdir()
    for q in INVENTED[:2]:
        (pytester.path / "fail-once" / q.replace("?", "").replace(" ", "-")).write_text("")
    result = run(pytester, [], "-p", "rerunfailures", "--reruns", "1", "--bineval-baseline=base.json",
                 "--bineval-fail-on-regression", "--bineval-report=pr.json")
    assert result.parseoutcomes() == {"passed": 13, "rerun": 2}
    assert result.ret == 1
    diff = ReportDocument.load(pytester.path / "pr.json").regressions
    assert diff is not None and len(diff.compared) == 13
    assert [d.key for d in diff.regressed_cases()] == sorted(f"test_support.py::test_answer[{q}]" for q in INVENTED)
    assert diff.confirmation is not None and diff.confirmation.flips == 12


def test_without_a_judge_bineval_report_says_what_it_could_not_confirm(pytester: pytest.Pytester) -> None:
    """bineval report --baseline has no judge: the flips are unconfirmed, said, and the gate fails on them
    (neither a regression nor noise until re-asked); --confirm-flips re-asks them."""
    from pytest_bineval.cli import main

    project(pytester)
    run(pytester, [], "--bineval-report=base.json").assert_outcomes(passed=13)
    (pytester.path / "pr").write_text("")
    run(pytester, [], "--bineval-report=pr.json").assert_outcomes(passed=13)
    code = main(["report", str(pytester.path / "pr.json"), "--baseline", str(pytester.path / "base.json"),
                 "--fail-on-regression", "--pr-comment", str(pytester.path / "comment.md")])
    assert code == 1
    assert headline(pytester).startswith("## bineval: no confirmed regression · ")
    assert "**12 flipped questions could not be confirmed**" in headline(pytester)
    assert "12 flips not re-asked: no judge here (`bineval report --confirm-flips` re-asks them)." in (
        pytester.path / "comment.md").read_text()
    # --confirm-flips: the report's judge (the scripted one, registered in this process) re-asks them
    from pytest_bineval.testing import ScriptedModel

    rules: dict[str, object] = {"__file__": str(pytester.path / "conftest.py")}
    exec(RULE, rules)
    ScriptedModel(provider="gfake", answers=rules["answer"], questions_per_dimension=3).register()
    code = main(["report", str(pytester.path / "pr.json"), "--baseline", str(pytester.path / "base.json"),
                 "--fail-on-regression", "--confirm-flips", "--cache-dir", str(pytester.path / ".cache"),
                 "--pr-comment", str(pytester.path / "comment.md")])
    assert code == 1
    assert headline(pytester).startswith("## bineval: **4 cases regressed (confirmed): ")
    assert "Of which confirming the flips: 12 flips to confirm, 56 fresh asks (56 requests sent, 0 cache hits)." in (
        pytester.path / "comment.md").read_text()


def test_records_keep_the_tests_parameters(pytester: pytest.Pytester) -> None:
    project(pytester)
    run(pytester, [], "--bineval-report=base.json", "-k", "password").assert_outcomes(passed=1)
    (record,) = json.loads(Path(pytester.path / "base.json").read_text())["evaluations"]
    assert record["params"] == {"question": repr(QUESTIONS[0])}
