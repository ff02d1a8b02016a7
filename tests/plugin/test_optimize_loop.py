"""The self-update loop inside one session (issue 24): several iterations, train and held-out tests, a candidate
kept only when the held-out score does not drop, rollback, early stop, Ctrl-C, pytest-xdist, the real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_bineval.optimize.lessons import history_path
from pytest_bineval.optimize.loop import split

PROMPT = """## system
You are a news editor.

## user
<article>
{{article}}
</article>

Summarize the article above in 2-3 sentences.
"""

# The judge: check 1 passes once the output says COPY, check 2 once it says NAME, check 3 always, except that the
# case HURT (the held-out one, in the rollback test) loses checks 2 and 3 as soon as the prompt says COPY.
# The note-taker: a lesson for check 1 while the prompt lacks COPY, for check 2 once it has COPY; otherwise a reply
# that is not a lesson ("Ok."), which is discarded and counted.
CONFTEST = '''
from pytest_bineval.testing import ScriptedModel

HURT = {hurt!r}

def answer(req):
    out = req.user
    q = req.question
    if HURT and HURT in out and "COPY" in out and q in ("Does the response meet consistency check 2?",
                                                         "Does the response meet consistency check 3?"):
        return "no"
    if q == "Does the response meet consistency check 1?":
        return "yes" if "COPY" in out else "no"
    if q == "Does the response meet consistency check 2?":
        return "yes" if "NAME" in out or HURT else "no"
    return "yes"

def lesson(req):
    has_copy = "(COPY)" in req.user
    if "consistency check 1" in req.user and not has_copy:
        return '{{"lesson": "Copy every number exactly (COPY)."}}'
    if "consistency check 2" in req.user and has_copy:
        return '{{"lesson": "Name the city in the summary (NAME)."}}'
    return '{{"lesson": "Ok."}}'

FAKE = ScriptedModel(provider="lofake", answers=answer, questions_per_dimension=3).register()
FAKE.rules["lesson"] = lesson
'''

TESTS = '''
from pathlib import Path
import pytest
from pytest_bineval import assert_passes

PROMPT = Path(__file__).parent / "prompts" / "gen.md"

@pytest.mark.parametrize("case", range(4))
@pytest.mark.bineval(task="Summarize the article.", prompt="prompts/gen.md")
def test_summary(case):
    made_with = PROMPT.read_text()
    if {interrupt!r} and {interrupt!r} in made_with:
        raise KeyboardInterrupt
    words = [w for w in ("COPY", "NAME") if "(" + w + ")" in made_with]
    assert_passes(f"Summary of case {{case}}. " + " ".join(words), dimension="consistency", source="An article.",
                  threshold=1.0)
'''

IDS = [f"test_gen.py::test_summary[{i}]" for i in range(4)]


def project(pytester: pytest.Pytester, *, hurt: str = "", interrupt: str = "") -> Path:
    pytester.makeconftest(CONFTEST.format(hurt=hurt))
    pytester.makeini("[pytest]\nbineval_model = lofake/judge\nbineval_cache = off\n"
                     "asyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_gen=TESTS.format(interrupt=interrupt))
    prompt = pytester.path / "prompts" / "gen.md"
    prompt.parent.mkdir()
    prompt.write_text(PROMPT)
    return prompt


def test_the_split_is_deterministic_and_holds_out_a_quarter_from_four_tests() -> None:
    train, held = split(IDS)
    assert len(held) == 1 and sorted(train + held) == sorted(IDS)
    assert split(list(reversed(IDS))) == (train, held)  # independent of the order the tests ran in
    assert split(IDS[:3]) == (sorted(IDS[:3]), [])  # fewer than 4 tests: no held-out set
    eight = [f"t.py::test[{i}]" for i in range(8)]
    assert len(split(eight)[1]) == 2


def test_several_iterations_run_in_one_session_and_the_best_prompt_is_kept(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    result = pytester.runpytest("--color=no", "--bineval-optimize", "--bineval-report=report.json")
    result.assert_outcomes(failed=4)  # the run's own verdicts stand: they were made with the original prompt
    result.stdout.fnmatch_lines([
        "bineval optimize prompts/gen.md iteration 1: kept; train 0.33 -> 0.67, held-out 0.33 -> 0.67; prompt * -> * "
        "characters; lessons written 1, rejected 1; requests *, cost *",
        "bineval optimize prompts/gen.md iteration 2: kept; train 0.67 -> 1.00, held-out 0.67 -> 1.00; *",
        "*= bineval optimize =*",
        "UPDATED prompts/gen.md: 2 of 2 iteration(s) kept; train 0.333 -> 1.000, held-out 0.333 -> 1.000; stopped: "
        "no failure of the train tests remains",
        "    tests: 3 train, 1 held-out",
        "    iteration 1: kept; train 0.33 -> 0.67, held-out 0.33 -> 0.67, * characters",
        "    iteration 2: kept; train 0.67 -> 1.00, held-out 0.67 -> 1.00, * characters",
    ])
    text = prompt.read_text()
    assert "(COPY)" in text and "(NAME)" in text and "{{article}}" in text
    history = json.loads(history_path(prompt).read_text())
    first, second = history["iterations"]
    assert (first["train_before"], first["kept"], second["kept"]) == (pytest.approx(1 / 3), True, True)
    assert first["rejected"] == 1 and history["rejected"][0]["text"] == "Ok."
    assert first["measure_usage"]["llm_calls"] > 0 and "failing_after" in first and first["after"] in second["before"]
    (done,) = json.loads((pytester.path / "report.json").read_text())["optimize"]
    assert done["status"] == "updated" and len(done["iterations"]) == 2 and len(done["held_out"]) == 1
    report = json.loads((pytester.path / "report.json").read_text())
    assert len(report["evaluations"]) == 4  # the re-runs' records are the loop's measurements, not the run's


def test_a_candidate_that_lowers_the_held_out_score_is_rolled_back(pytester: pytest.Pytester) -> None:
    (held,) = split(IDS)[1]
    case = held.split("[")[1].rstrip("]")
    prompt = project(pytester, hurt=f"case {case}.")
    result = pytester.runpytest("--color=no", "--bineval-optimize")
    result.stdout.fnmatch_lines([
        "bineval optimize prompts/gen.md iteration 1: rolled back; train 0.67 -> 1.00, held-out 0.67 -> 0.33; *",
        "UNCHANGED prompts/gen.md: 0 of 1 iteration(s) kept; *stopped: iteration 1 was rolled back: the held-out "
        "score dropped (0.667 -> 0.333)",
    ])
    assert prompt.read_text() == PROMPT  # the best prompt is the original one
    history = json.loads(history_path(prompt).read_text())
    assert history["iterations"][0]["kept"] is False
    assert [e["status"] for e in history["lessons"]] == ["rolled back"]  # retired, not proposed again


def test_no_failure_no_iteration(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    prompt.write_text(PROMPT.replace("2-3 sentences.", "2-3 sentences. (COPY) (NAME)"))
    result = pytester.runpytest("--color=no", "--bineval-optimize")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["UNCHANGED prompts/gen.md: 0 of 0 iteration(s) kept; *stopped: no failure of the "
                                 "train tests remains"])


def test_max_iterations_bounds_the_loop(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    result = pytester.runpytest("--color=no", "--bineval-optimize", "--bineval-max-iterations", "1")
    result.stdout.fnmatch_lines(["UPDATED prompts/gen.md: 1 of 1 iteration(s) kept; *stopped: the iteration limit "
                                 "(1) was reached"])
    assert "(COPY)" in prompt.read_text() and "(NAME)" not in prompt.read_text()


def test_ctrl_c_mid_loop_keeps_the_best_prompt_so_far_and_says_the_loop_was_cut(pytester: pytest.Pytester) -> None:
    prompt = project(pytester, interrupt="(NAME)")  # the re-run of iteration 2's candidate is interrupted
    # in-process: the run's Ctrl-C (a KeyboardInterrupt in a test) ends that run, not this one
    result = pytester.runpytest("--color=no", "--bineval-optimize", no_reraise_ctrlc=True)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["CUT prompts/gen.md: interrupted (Ctrl-C): the best prompt so far is kept*"])
    text = prompt.read_text()
    assert "(COPY)" in text and "(NAME)" not in text  # iteration 1's prompt: the best measured so far
    history = json.loads(history_path(prompt).read_text())
    assert history["cut"]["why"] == "interrupted (Ctrl-C)" and len(history["iterations"]) == 1


def test_a_run_cut_by_maxfail_optimizes_nothing(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    result = pytester.runpytest("--color=no", "--bineval-optimize", "-x")
    result.stdout.fnmatch_lines(["NOT RUN prompts/gen.md: the run was cut (-x, --maxfail, Ctrl-C or an error): "
                                 "nothing was optimized"])
    assert prompt.read_text() == PROMPT and not history_path(prompt).exists()


def test_under_xdist_the_controller_runs_the_loop(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    prompt = project(pytester)
    result = pytester.runpytest("--color=no", "--bineval-optimize", "-p", "xdist", "-n", "2")
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines(["UPDATED prompts/gen.md: 2 of 2 iteration(s) kept; *"])
    assert "(NAME)" in prompt.read_text()
