"""--bineval-confirm through pytester and the real terminal output, with a scripted judge whose answers flip from
one ask of a question to the next: exact request counts, the majority verdict, unstable questions in the summary,
the JSON report and the PR comment, and a second run from the cache (under ``-n 2``: tests/plugin/test_xdist.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import ANSWERS_FILE_RULE as ANSWER
from support import report_of

from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

# answers.json (support.ANSWERS_FILE_RULE): {"<output>|<question>": [answers]}: the n-th ask of that question
# about that output gets item n (cycling); unlisted: yes.
SUITE = '''
import pytest
from pytest_bineval import assert_passes

pytestmark = pytest.mark.bineval(task="Summarize the article.")

def test_a():
    assert_passes("output a", dimension=["consistency", "fluency"], threshold=0.5)

def test_b():
    assert_passes("output b", dimension="fluency", threshold=0.6)
'''


def Q(dim: str, i: int) -> str:  # the scripted checklist writer's question text
    return f"Does the response meet {dim} check {i}?"


# With --bineval-confirm 5 at 95% (an interval clears 0.5 after 4 equal answers):
# a/consistency-1  no x4            3 re-asks, decided no
# a/consistency-2  no yes yes ...   5 re-asks: no yes yes no yes yes, 4 of 6 yes, undecided: yes, unstable
# a/fluency-1      yes              not re-asked
# a/fluency-2      no yes ...       5 re-asks: 3 of 6 yes, a tie: no, unstable
# b/fluency-1      no x4            3 re-asks, decided no
# b/fluency-2      yes              not re-asked
# -> 6 questions, 4 re-asked, 16 re-asks (one request each: re-asks are not explained), --bineval-repeats 6: 36 asks
ANSWERS = {
    f"output a|{Q('consistency', 1)}": ["no"],
    f"output a|{Q('consistency', 2)}": ["no", "yes", "yes"],
    f"output a|{Q('fluency', 2)}": ["no", "yes"],
    f"output b|{Q('fluency', 1)}": ["no"],
}
SUMMARY = ("of which confirmation (--bineval-confirm 5, 95% Wilson interval): 4 of 6 questions re-asked, 16 re-asks "
           "({requests}, {hits}), 2 decided, 2 unstable; 22 asks in all, where --bineval-repeats 6 would make 36")


def project(pytester: pytest.Pytester, answers: dict[str, Any], ini: str = "") -> None:
    scripted_project(pytester, provider="cfake", rule=ANSWER, ini=ini)
    (pytester.path / "answers.json").write_text(json.dumps(answers))
    pytester.makepyfile(test_suite=SUITE)


def test_confirm_counts_majority_unstable_and_a_cached_second_run(pytester: pytest.Pytester) -> None:
    project(pytester, ANSWERS)
    args = ["--color=no", "--bineval-confirm=5", "--bineval-report=report.json", "--bineval-pr-comment=comment.md"]
    result = pytester.runpytest(*args)
    result.assert_outcomes(passed=1, failed=1)  # b: fluency 0.50 < 0.60
    result.stdout.fnmatch_lines([
        "*= bineval summary =*",
        "BELOW THRESHOLD test_suite.py::test_b: fluency 0.50 < 0.60",
        f"    [[]fluency[]] {Q('fluency', 1)}",
        f"        -> no: scripted no for: {Q('fluency', 1)}",
        "unstable questions (2): the judge's asks gave both answers, and none won at 95% confidence",
        f"    test_suite.py::test_a [[]fluency[]] {Q('fluency', 2)}: no (3 of 6 yes)",
        f"    test_suite.py::test_a [[]consistency[]] {Q('consistency', 2)}: yes (4 of 6 yes)",
        "evaluations: 2 *",
        SUMMARY.format(requests="16 requests", hits="0 cache hits"),
    ])
    doc = report_of(pytester)
    c = doc.confirmation
    assert c is not None
    assert (c.rounds, c.level, c.questions, c.reasked, c.reasks, c.requests, c.cache_hits) == (5, 0.95, 6, 4, 16,
                                                                                                16, 0)
    assert (c.decided, c.unstable, c.asks, c.repeats_asks) == (2, 2, 22, 36)
    verdicts = {(e.test.split("::")[1], v.question_id): v for e in doc.evaluations for v in e.verdicts}
    assert verdicts["test_a", "consistency-1"].asks == ["no"] * 4
    assert verdicts["test_a", "consistency-2"].answer == "yes"  # the majority, though the first ask said no
    assert verdicts["test_a", "fluency-1"].confirmation is None  # yes: not re-asked
    assert doc.totals.unstable_questions == 2
    assert sorted((u.question_id, " ".join(u.answers)) for u in doc.unstable) == [
        ("consistency-2", "no yes yes no yes yes"), ("fluency-2", "no yes no yes no yes")]
    # the judge's requests: 6 first asks + 3 explanations of the first no's (a/c1, a/c2, a/f2, b/f1: 4) + 16 re-asks
    evaluation_calls = sum(e.usage.llm_calls for e in doc.evaluations)
    assert evaluation_calls == 6 + 4 + 16
    comment = (pytester.path / "comment.md").read_text()
    assert "### Unstable questions" in comment and "none won" not in comment  # the comment's own wording
    assert "no answer won at 95% confidence (`--bineval-confirm`)" in comment
    assert ("Of which confirmation (`--bineval-confirm 5`): 4 of 6 questions re-asked, 16 re-asks (16 requests "
            "sent); 22 asks in all, where `--bineval-repeats 6` would make 36.") in comment

    again = pytester.runpytest(*args)  # every ask and re-ask from the reply cache: no request at all
    again.assert_outcomes(passed=1, failed=1)
    again.stdout.fnmatch_lines([
        "evaluations: 2 *requests: 0, cache hits: *",
        SUMMARY.format(requests="0 requests", hits="16 cache hits"),
    ])
    assert report_of(pytester).totals.llm_calls == 0


def test_the_options_are_validated_and_listed(pytester: pytest.Pytester) -> None:
    project(pytester, {})
    for args, message in ((["--bineval-confirm=-1"], "*must be >= 0*"),
                          (["--bineval-confidence=1"], "*strictly between 0 and 1*"),
                          (["--bineval-confirm=2", "--bineval-repeats=3"],
                           "*confirm=2 (--bineval-confirm) and repeats=3 (--bineval-repeats) do not combine*")):
        result = pytester.runpytest(*args)
        assert result.ret == pytest.ExitCode.USAGE_ERROR, args
        result.stderr.fnmatch_lines([message])
    pytester.runpytest("--help").stdout.fnmatch_lines(["*--bineval-confirm=K*", "*--bineval-confidence=LEVEL*"])


def test_the_ini_key_turns_confirmation_on(pytester: pytest.Pytester) -> None:
    project(pytester, {f"output b|{Q('fluency', 1)}": ["no"]}, ini="bineval_confirm = 3\nbineval_confidence = 0.8")
    result = pytester.runpytest("--color=no", "-k", "test_b")
    result.stdout.fnmatch_lines([
        # at 80% (z 1.28) two equal answers decide (high 1.64 / 3.64 = 0.45): 1 re-ask, not 3
        "of which confirmation (--bineval-confirm 3, 80% Wilson interval): 1 of 2 questions re-asked, 1 re-ask "
        "(1 request, 0 cache hits), 1 decided, 0 unstable; 3 asks in all, where --bineval-repeats 4 would make 8",
    ])
