"""``--bineval-cache replay``: fork pull requests (no API key) judged from the shared reply cache only. A reply the
cache holds is used; one it lacks sends no request and is a judge error of its test that says what to do, once per
test; the cache directory is never written."""

from __future__ import annotations

import textwrap

import pytest
from support import report_of

from pytest_bineval import Settings
from pytest_bineval.llm.cache import CACHE_MODES, REPLAY_MISS

CONFTEST = '''
from pathlib import Path
from pytest_bineval.testing import ScriptedModel

def answer(req):
    with open(Path(__file__).parent / "requests.log", "a") as log:
        log.write(req.kind + "\\n")
    return "yes"

FAKE = ScriptedModel(provider="preplay", answers=answer).register()
'''

TESTS = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_cached():
    assert_passes("A fine summary.", dimension="fluency", source="An article.")
'''

NEW_TEST = '''

@pytest.mark.bineval(task="Summarize the article.")
def test_new():
    assert_passes("A summary the cache has never seen.", dimension="fluency", source="An article.")
'''


def test_replay_is_a_cache_mode() -> None:
    assert "replay" in CACHE_MODES
    assert Settings(cache="replay").cache == "replay"


def test_replay_answers_from_the_cache_and_errors_on_a_miss(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(CONFTEST)
    pytester.makeini(textwrap.dedent("""
        [pytest]
        bineval_model = preplay/judge
        asyncio_default_fixture_loop_scope = function
    """))
    pytester.makepyfile(test_x=TESTS)
    first = pytester.runpytest("-p", "no:cacheprovider")  # the main branch's run fills the shared cache
    first.assert_outcomes(passed=1)
    log = pytester.path / "requests.log"
    paid = log.read_text().count("\n")
    assert paid > 0
    cache = pytester.path / ".bineval_cache"
    before = {p: p.stat().st_mtime_ns for p in cache.rglob("*")}

    pytester.makepyfile(test_x=TESTS + NEW_TEST)  # the pull request adds a test
    result = pytester.runpytest("-p", "no:cacheprovider", "--bineval-cache", "replay",
                                "--bineval-report", "report.json")
    result.assert_outcomes(passed=1, errors=1)
    assert log.read_text().count("\n") == paid, "replay sent a request"
    result.stdout.fnmatch_lines(["*test_new*", f"*{REPLAY_MISS}*"])
    assert result.stdout.str().count(REPLAY_MISS) >= 1
    assert {p: p.stat().st_mtime_ns for p in cache.rglob("*")} == before  # nothing written
    doc = report_of(pytester)
    new = next(r for r in doc.evaluations if r.test.endswith("test_new"))
    assert new.outcome == "error"
    assert all(v.answer == "error" and REPLAY_MISS in (v.error or "") for v in new.verdicts)
    assert doc.totals.llm_calls == 0
