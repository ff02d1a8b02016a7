"""Messages a careless user meets (issue 20, items 12-14): an assertion without the input its questions need,
a threshold key for a dimension the run does not reach, a typo in a dimension's name, copyable test ids, and a
read-only cache that is not there."""

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


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_a_threshold_for_a_dimension_this_run_does_not_reach_needs_no_note(pytester: pytest.Pytester,
                                                                           workers: list[str]) -> None:
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
    run = pytester.runpytest_subprocess if workers else pytester.runpytest
    result = run("-k", "fluency", *workers)
    result.assert_outcomes(passed=2)  # and test_coherence_and_brevity deselected (xdist does not count it)
    out = result.stdout.str()
    assert "'coherence', which" not in out and "'brevity', which" not in out
    result.stdout.fnmatch_lines([
        "bineval: --bineval-threshold (or the bineval_threshold ini key) sets a threshold for 'fluncy', which no "
        "assertion of this run checks; did you mean 'fluency'?",
    ])
