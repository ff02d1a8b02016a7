"""The options and ini keys: each setting is an option with the setting's own default, they reach the engine, the
native ``[tool.pytest]`` table takes numbers, and the threshold's layers (explicit > marker > command line > ini)
with a note for a key that names no dimension."""

from __future__ import annotations

from dataclasses import fields

import pytest
from support import Q, make_project

from pytest_bineval.options import SPECS
from pytest_bineval.settings import SETTING_SPECS, Settings

pytest_plugins = ["pytester"]


def test_threshold_from_the_ini_key_sits_below_marker_and_explicit(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("fluency", 2),), ini="bineval_threshold = fluency=0.4")
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_ini_passes():                      # ini 0.4 <= 0.5
            assert_passes("s", dimension="fluency")

        @pytest.mark.bineval(task="Summarize the article.", threshold=0.6)
        def test_marker_beats_ini():                # marker 0.6 > 0.5
            assert_passes("s", dimension="fluency")

        @pytest.mark.bineval(task="Summarize the article.", threshold=0.6)
        def test_explicit_beats_marker():           # explicit 0.5 <= 0.5
            assert_passes("s", dimension="fluency", threshold=0.5)
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED *::test_marker_beats_ini*"])
    result = pytester.runpytest("--bineval-threshold=0.55")  # the command line wins over the ini key
    result.assert_outcomes(passed=1, failed=2)


def test_every_setting_is_an_option_with_the_settings_own_default() -> None:
    """Settings is the one definition: each field with option metadata is a --bineval-* option and a
    `bineval` flag, and the help shows the dataclass default (nothing repeated elsewhere)."""
    names = {s.attr for s in SPECS}
    for f in fields(Settings):
        if "help" in f.metadata:
            assert f.name in names
    spec = {s.attr: s for s in SETTING_SPECS}
    assert spec["timeout"].default == Settings().timeout == 120.0
    assert spec["concurrency"].default == Settings().concurrency
    assert "default: 120.0" in spec["timeout"].help_with_default()
    from pytest_bineval.cli import build_parser

    args = build_parser().parse_args(["checklist", "--task", "t", "--temperature", "0.3", "--api-base", "http://x/v1"])
    from pytest_bineval.settings import settings_from_args

    s = settings_from_args(args)
    assert (s.temperature, s.api_base, s.timeout) == (0.3, "http://x/v1", 120.0)


@pytest.mark.parametrize(("flag", "attr", "value"), [
    ("--bineval-api-base=http://127.0.0.1:9/v1", "api_base", "http://127.0.0.1:9/v1"),
    ("--bineval-temperature=0.7", "temperature", 0.7),
])
def test_api_base_and_temperature_options_reach_the_engine(pytester: pytest.Pytester, flag: str, attr: str,
                                                            value: object) -> None:
    make_project(pytester)
    pytester.makepyfile(f'''
        def test_settings(bineval):
            assert getattr(bineval.options.settings, {attr!r}) == {value!r}
    ''')
    pytester.runpytest(flag).assert_outcomes(passed=1)


SCORED = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_scored():
    assert_passes("s", dimension="fluency")
'''


def test_native_toml_table_takes_unquoted_numbers(pytester: pytest.Pytester) -> None:
    """Bug: every valued ini key was registered as a string, and pytest 9's native ``[tool.pytest]`` table
    rejects a TOML number for a string key, so ``bineval_threshold = 0.4`` was a crash, not a threshold."""
    if pytest.version_tuple < (9, 2):
        pytest.skip("type unions in addini (needed for a number or a string) arrived in pytest 9.2")
    make_project(pytester, no=(Q.format("fluency", 2),))
    (pytester.path / "tox.ini").unlink()  # make_project's ini file: the pyproject.toml table below is the config
    body = '[tool.pytest]\nbineval_model = "pfake/judge"\nasyncio_default_fixture_loop_scope = "function"\n'
    (pytester.path / "pyproject.toml").write_text(body + "bineval_threshold = 0.4\nbineval_concurrency = 2\n")
    pytester.makepyfile(SCORED)
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)  # 0.50 >= 0.4
    (pytester.path / "pyproject.toml").write_text(body + "bineval_threshold = 0.6\n")
    pytester.runpytest().assert_outcomes(failed=1)


def test_a_threshold_key_that_names_no_dimension_is_not_silently_ignored(pytester: pytest.Pytester) -> None:
    """Bug: ``--bineval-threshold=fluncy=0.4`` (a typo) was silently ignored and the default 0.7 applied. The
    assertion's own threshold= names what it checks: an error; the marker's and the command line's keys are shared
    by many tests: the summary notes a key no assertion of the run checked (a dimension of your own that one test
    checks, named close to a built-in, is no typo for the others)."""
    make_project(pytester, no=(Q.format("fluency", 2),))
    pytester.makepyfile(test_keys='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.", threshold={"fluency": 0.4, "cohrence": 0.5})
        def test_fluency():
            assert_passes("s", dimension="fluency")

        @pytest.mark.bineval(task="Summarize the article.")
        def test_own_dimension():
            assert_passes("s", dimension={"consistency_strict": "Every number is the input's."})

        @pytest.mark.bineval(task="Summarize the article.")
        def test_explicit_key_not_checked_here():
            assert_passes("s", dimension="fluency", threshold={"fluency": 0.4, "consistency": 0.9})
    ''')
    result = pytester.runpytest("--bineval-threshold=fluncy=0.3,consistency_strict=0.5")
    result.assert_outcomes(passed=2, errors=1)  # a usage error is an error of the test, as in pytest
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*threshold={'consistency': ...} names a dimension this assertion does not check (it checks: fluency)*",
        "bineval: --bineval-threshold (or the bineval_threshold ini key) sets a threshold for 'fluncy', which no "
        "assertion of this run checks; did you mean 'fluency'?",
        "bineval: @pytest.mark.bineval(threshold=...) sets a threshold for 'cohrence', which no assertion of this "
        "run checks; did you mean 'coherence'?",
    ])
    assert "'consistency_strict', which" not in out and "'fluency', which" not in out
