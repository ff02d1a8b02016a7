"""The package's warnings share one base class, pytest_bineval.BinevalWarning: one -W filter (or filterwarnings
entry) turns every one of them into an error, or silences them."""

from __future__ import annotations

import inspect

import pytest
from support import make_project

import pytest_bineval
from pytest_bineval import errors

pytest_plugins = ["pytester"]

# A pinned-by-hand checklist whose question is about the input, asked without source=: a MissingSourceWarning.
NO_SOURCE = '''
from pytest_bineval import Checklist, assert_passes

CHECKLIST = Checklist.model_validate({
    "task": "Summarize the article.",
    "dimensions": {"consistency": "Only facts of the article."},
    "questions": [{"id": "consistency-1", "dimension": "consistency",
                   "text": "Does the summary name the city mentioned in the article?"}],
})

def test_no_source():
    assert_passes("A bridge opened.", dimension="consistency", checklist=CHECKLIST)
'''


def test_every_warning_class_is_a_bineval_warning_exported_by_the_package() -> None:
    warnings = [c for _, c in inspect.getmembers(errors, inspect.isclass)
                if c.__module__ == errors.__name__ and issubclass(c, Warning)]
    assert {c.__name__ for c in warnings} >= {"BinevalWarning", "MissingSourceWarning", "GeneratedCheckWarning",
                                              "BinevalCacheWarning", "BinevalEncodingWarning",
                                              "BinevalInsecureKeyWarning"}
    for cls in warnings:
        assert issubclass(cls, pytest_bineval.BinevalWarning), cls
        assert getattr(pytest_bineval, cls.__name__) is cls  # importable from the package, as the docs say


def test_one_filter_on_the_base_class_makes_the_warnings_errors_or_silences_them(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_src=NO_SOURCE)
    result = pytester.runpytest("-W", "error::pytest_bineval.BinevalWarning")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*MissingSourceWarning: test_src.py::test_no_source: 1 question(s) of dimension "
                                 "'consistency' are about the input*"])

    result = pytester.runpytest("-W", "ignore::pytest_bineval.BinevalWarning")
    result.assert_outcomes(passed=1)
    assert "MissingSourceWarning" not in result.stdout.str()

    result = pytester.runpytest("-W", "default")  # without a filter: a warning, and the test passes
    result.assert_outcomes(passed=1, warnings=1)
