"""Usage errors and warnings a careless user meets: an assertion without the input its questions need, a threshold
key for a dimension the run does not reach, a typo in a dimension's name or one the checklist lacks, copyable test
ids, a read-only cache that is not there, an output file option naming a directory."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import make_project

pytest_plugins = ["pytester"]

# A pinned-by-hand checklist: one question about the input, one about the output alone.
NEEDS_INPUT = '''
import pytest
from pytest_bineval import assert_passes
from pytest_bineval.models import Checklist

CHECKLIST = Checklist.model_validate({
    "task": "Summarize the article.",
    "dimensions": {"consistency": "Only facts of the article.", "fluency": "Reads well."},
    "questions": [
        {"id": "consistency-1", "dimension": "consistency",
         "text": "Does the summary name the city mentioned in the article?"},
        {"id": "fluency-1", "dimension": "fluency", "text": "Is the summary grammatical?"},
    ],
})

def test_no_source():
    for _ in range(3):  # one warning for the three calls
        assert_passes("A bridge opened.", dimension="consistency", checklist=CHECKLIST)

def test_with_source():
    assert_passes("A bridge opened.", dimension="consistency", checklist=CHECKLIST, source="An article.")

def test_fluency_only():
    assert_passes("A bridge opened.", dimension="fluency", checklist=CHECKLIST)
'''


def test_an_assertion_without_the_input_its_questions_need_warns_once(pytester: pytest.Pytester) -> None:
    """Bug: assert_passes(summary, dimension="consistency") without source=: the questions about "the input" were
    asked about nothing and the test failed with no hint. A warning at the call, once per test and checklist,
    naming the test, the dimension and one such question; none with a source or when no question needs one."""
    make_project(pytester)
    pytester.makepyfile(test_src=NEEDS_INPUT)
    result = pytester.runpytest("-W", "default")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "*warnings summary*",
        "test_src.py::test_no_source",
        "  test_src.py:17: MissingSourceWarning: test_src.py::test_no_source: 1 question(s) of dimension "
        "'consistency' are about the input (e.g. 'Does the summary name the city mentioned in the article?') but "
        "the assertion gave no source*",
    ])
    out = result.stdout.str()
    assert out.count("MissingSourceWarning") == 1
    assert "test_with_source" not in out.split("warnings summary")[1].split("bineval summary")[0]
    assert "1 warning" in out


def test_a_failure_without_the_input_says_so_under_its_reasons(pytester: pytest.Pytester) -> None:
    """The failure message itself (not only the warnings summary) says the failing questions were about an input
    that was not given."""
    make_project(pytester, no=("Does the summary name the city mentioned in the article?",))
    pytester.makepyfile(test_src=NEEDS_INPUT)
    result = pytester.runpytest("-k", "no_source or with_source")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["E*note: no source= was given, and 1 failing question(s) are about the input: "
                                 "they were judged about nothing; pass assert_passes(output, ..., source=...)"])
    # in the failure messages (E lines) once: not for test_with_source (the short summary may repeat a message
    # whole, depending on the terminal's width)
    assert sum(line.startswith("E") and "note: no source= was given" in line for line in result.stdout.lines) == 1


def test_the_missing_source_warning_outside_pytest_names_assert_passes(tmp_path: Path) -> None:
    """Outside a pytest run there is no test id: the warning names assert_passes, at the user's call."""
    script = tmp_path / "outside.py"
    script.write_text(textwrap.dedent('''
        import warnings
        from pytest_bineval.assertions import AssertionRequest, _warn_missing_source
        from pytest_bineval.models import Checklist, Question

        checklist = Checklist(task="t", dimensions={"consistency": "c"}, questions=[
            Question(id="consistency-1", dimension="consistency", text="Is every fact in the input?")])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            _warn_missing_source(AssertionRequest.build("out", checklist=checklist), checklist)
        print(caught[0].category.__name__, caught[0].filename, caught[0].message)
    '''))
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout
    assert out.startswith("MissingSourceWarning outside.py assert_passes: 1 question(s) of dimension 'consistency'")


def test_a_threshold_for_a_dimension_this_run_does_not_reach_needs_no_note(pytester: pytest.Pytester) -> None:
    """Bug: ini ``bineval_threshold = "0.3,coherence=0"`` and a -k or single-file run that checks no coherence:
    "... sets a threshold for 'coherence', which no assertion of this run checks; did you mean 'coherence'?". A
    built-in name, or one a collected test's marker defines (deselected by -k), is no typo: no note. A misspelling
    still gets one, suggesting a different name."""
    make_project(pytester, ini='bineval_threshold = 0.3,coherence=0,brevity=0.5,fluncy=0.2')
    pytester.makepyfile(test_dims='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_fluency():
            assert_passes("s", dimension="fluency", source="An article.")

        @pytest.mark.bineval(task="Summarize the article.", dimensions=["coherence", {"brevity": "Short."}])
        def test_coherence_and_brevity():
            assert_passes("s", source="An article.")

        @pytest.mark.bineval(task="Summarize the article.")
        def test_fluency_again():
            assert_passes("s", dimension="fluency", source="An article.")
    ''')
    result = pytester.runpytest("-k", "fluency")
    result.assert_outcomes(passed=2)  # and test_coherence_and_brevity deselected (xdist does not count it)
    out = result.stdout.str()
    assert "'coherence', which" not in out and "'brevity', which" not in out
    result.stdout.fnmatch_lines([
        "bineval: --bineval-threshold (or the bineval_threshold ini key) sets a threshold for 'fluncy', which no "
        "assertion of this run checks; did you mean 'fluency'?",
    ])


def test_a_test_id_in_a_not_scored_message_can_be_copied_and_run(pytester: pytest.Pytester) -> None:
    """Bug: a NOT SCORED message carried the test id with an invisible U+2060 inside its '::' (the CI command
    guard), so a node id copied from it did not run. Only a '::' at the start of a line is a command."""
    make_project(pytester)
    pytester.makepyfile(test_ids='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_unpinned():
            assert_passes("s", dimension="fluency", source="An article.")
    ''')
    result = pytester.runpytest("--bineval-strict")
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert "\u2060" not in out
    line = next(x for x in out.splitlines() if x.startswith("NOT SCORED"))
    assert "the checklist of test_ids.py::test_unpinned is not pinned" in line
    copied = line.split("the checklist of ", 1)[1].split(" ", 1)[0]
    pytester.runpytest(copied, "--bineval-cache=off").assert_outcomes(passed=1)  # the copied id runs


def test_a_misspelt_dimension_gets_a_did_you_mean(pytester: pytest.Pytester) -> None:
    """Bug: assert_passes(..., dimension="coherance") said "unknown dimension" with no hint (threshold keys get
    one); also for a dimension the test's checklist lacks."""
    make_project(pytester)
    pytester.makepyfile(test_typo='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_builtin_typo():
            assert_passes("s", dimension="coherance", source="An article.")

        @pytest.mark.bineval(task="Summarize the article.", dimensions=["fluency", {"brevity": "Short."}])
        def test_not_in_checklist():
            assert_passes("s", dimension="brevty", source="An article.")
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines([
        "*UsageError: unknown dimension 'coherance'; did you mean 'coherence'?: built-in ones are*",
        "*UsageError: dimension(s) 'brevty' requested but not in the checklist of task*or ask for one it has; "
        "did you mean 'brevity'?",
    ])


@pytest.mark.parametrize("mode", ["read-only", "replay"])
def test_a_read_only_cache_that_is_not_there_is_said_plainly(pytester: pytest.Pytester, mode: str) -> None:
    """Bug: --bineval-cache read-only with no cache directory said nothing: every question went to the judge
    (in CI: the cache restore had failed, and nobody knew). A note under the summary says where it looked and
    what that means in CI; a read-only cache that is there needs no note."""
    make_project(pytester)
    pytester.makepyfile(test_cached='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_one():
            assert_passes("s", dimension="fluency", source="An article.")
    ''')
    result = pytester.runpytest(f"--bineval-cache={mode}", "--bineval-cache-dir=restored/cache")
    missing = str(pytester.path / "restored" / "cache")
    result.stdout.fnmatch_lines([
        f"bineval: --bineval-cache {mode} (or the bineval_cache ini key), but there is no cache at {missing} (no "
        "such directory): * and nothing was written. In CI this means the cache was not restored: the restore step "
        "found no cache for its key, or restored it to another path than the cache directory*",
    ])
    pytester.runpytest("--bineval-cache-dir=restored/cache").assert_outcomes(passed=1)  # writes the cache
    again = pytester.runpytest(f"--bineval-cache={mode}", "--bineval-cache-dir=restored/cache")
    again.assert_outcomes(passed=1)
    assert "there is no cache at" not in again.stdout.str()


@pytest.mark.parametrize(("option", "example"), [("--bineval-report", "bineval-report.json"),
                                                 ("--bineval-html", "bineval-report.html"),
                                                 ("--bineval-pr-comment", "bineval-comment.md")])
def test_an_output_file_option_naming_a_directory_is_a_usage_error_up_front(pytester: pytest.Pytester,
                                                                             option: str, example: str) -> None:
    """Bug: ``--bineval-report=out`` with ``out/`` a directory judged the whole suite, then said "cannot write the
    JSON report ...: [Errno 21] Is a directory" and failed the session: the run's results were lost."""
    make_project(pytester)
    pytester.mkdir("out")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(f"{option}=out")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {option} out: {pytester.path / 'out'} is a directory; give the path of "
                                 f"the file to write in it, e.g. {option} out/{example}"])
    assert "passed" not in result.stdout.str()


def test_unknown_dimension_for_the_markers_checklist_is_a_clear_usage_error(pytester: pytest.Pytester) -> None:
    """Bug: a dimension missing from the marker's checklist raised a raw ValueError with a traceback."""
    make_project(pytester)
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.", dimensions=["consistency", "fluency"])
        def test_dim():
            assert_passes("A summary.", dimension="relevance")
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*UsageError: dimension(s) 'relevance' requested but not in the checklist of task 'Summarize the article.'*"
        "it has 'consistency', 'fluency'*",
    ])
    assert "Traceback" not in result.stdout.str()
