"""One shape per concept (issue 8): parametrized pins, dimension usage errors, judge errors in the summary,
the typed record through the hook, the ini threshold layer, the report's round trip, assert_passes outside
pytest, settings as the one source of defaults, and an import that leaves the environment alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from dataclasses import fields
from pathlib import Path

import pytest
from support import PASS_AND_FAIL, Q, make_project, report_of

from pytest_bineval.errors import BinevalError, PinError
from pytest_bineval.models import Checklist, Question
from pytest_bineval.options import SPECS
from pytest_bineval.pins import PinFile, pin
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import EvaluationRecord
from pytest_bineval.settings import SETTING_SPECS, Settings

pytest_plugins = ["pytester"]

CASES = '''
import pytest
from pytest_bineval import assert_passes

CASES = [("short", "Summarize the article in one sentence."),
         ("french", "Summarize the article in French."),
         ("bullets", "Summarize the article as three bullet points.")]

@pytest.mark.parametrize(("name", "task"), CASES, ids=[c[0] for c in CASES])
def test_case(name, task):
    assert_passes(f"summary for {name}", dimension="fluency", task=task)
'''


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_parametrized_pins_keep_every_tasks_checklist(pytester: pytest.Pytester, workers: list[str]) -> None:
    """Bug: pin_path dropped the parameter id and put() replaced any checklist of the same dimensions, so only
    the last case's checklist survived --bineval-update-checklists and --bineval-strict failed the others."""
    make_project(pytester)
    pytester.makepyfile(test_cases=CASES)
    run = pytester.runpytest_subprocess if workers else pytester.runpytest
    result = run("--bineval-update-checklists", *workers)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["pinned checklists written: 3"])  # checklists, not files
    pin_file = pytester.path / "__bineval__" / "test_cases" / "test_case.json"
    data = json.loads(pin_file.read_text())
    assert data["format"] == 2
    tasks = {c["task"]: c["tests"] for c in data["checklists"]}
    assert tasks == {
        "Summarize the article in one sentence.": ["test_case[short]"],
        "Summarize the article in French.": ["test_case[french]"],
        "Summarize the article as three bullet points.": ["test_case[bullets]"],
    }
    result = run("--bineval-strict", "--bineval-report=report.json", *workers)
    result.assert_outcomes(passed=3)
    assert {r.checklist_status for r in report_of(pytester).evaluations} == {"pinned"}


def test_a_changed_task_of_one_case_is_stale_and_repinning_keeps_the_others(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_cases=CASES)
    pytester.runpytest("--bineval-update-checklists").assert_outcomes(passed=3)
    pytester.makepyfile(test_cases=CASES.replace("in French.", "in German."))
    result = pytester.runpytest("--bineval-strict")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*the checklist of *test_case[[]french[]] is stale (the task text changed*"])
    pytester.runpytest("--bineval-update-checklists").assert_outcomes(passed=3)
    data = json.loads((pytester.path / "__bineval__" / "test_cases" / "test_case.json").read_text())
    assert sorted(c["task"] for c in data["checklists"]) == [
        "Summarize the article as three bullet points.",
        "Summarize the article in German.",
        "Summarize the article in one sentence.",
    ]  # the French checklist had no other user: replaced; the other cases' checklists untouched
    pytester.runpytest("--bineval-strict").assert_outcomes(passed=3)


def _checklist(task: str) -> Checklist:
    return Checklist(task=task, dimensions={"fluency": "Reads well."},
                     questions=[Question(id="fluency-1", dimension="fluency", text="Is it fluent?")])


def test_concurrent_pin_writers_lose_no_update(tmp_path: Path) -> None:
    """Processes pinning into one file at once (as xdist workers do): every task's checklist survives."""
    path = tmp_path / "__bineval__" / "test_m" / "test_x.json"
    code = textwrap.dedent(f"""
        import sys
        from pathlib import Path
        from pytest_bineval.models import Checklist, Question
        from pytest_bineval.pins import pin
        n = int(sys.argv[1])
        for k in range(10):
            task = f"Task {{n}}-{{k}}"
            c = Checklist(task=task, dimensions={{"fluency": "Reads well."}},
                          questions=[Question(id="fluency-1", dimension="fluency", text="Is it fluent?")])
            pin(Path({str(path)!r}), c, f"test_x[{{n}}-{{k}}]")
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, str(n)]) for n in range(4)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0, 0, 0]
    pins = PinFile.read(path)
    assert len(pins.entries) == 40
    assert sorted(t for e in pins.entries for t in e.tests or []) == sorted(
        f"test_x[{n}-{k}]" for n in range(4) for k in range(10))


def test_pin_file_round_trip_and_format_1_entries(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    legacy = {"format": 1, "checklists": [_checklist("Old task.").model_dump(mode="json")]}
    path.write_text(json.dumps(legacy))
    found, stale = PinFile.read(path).find("New task.", {"fluency": "Reads well."}, "test_x")
    assert found is None and stale  # a format-1 entry of the same dimensions belonged to this test
    assert pin(path, _checklist("New task."), "test_x")
    assert not pin(path, _checklist("New task."), "test_x")  # unchanged: nothing written
    (entry,) = PinFile.read(path).entries
    assert entry.checklist.task == "New task." and entry.tests == ["test_x"]


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


def test_summary_counts_evaluations_that_ended_in_a_judge_error(pytester: pytest.Pytester) -> None:
    """Bug: 'N (P passed, F below threshold)' left out the evaluations that ended in a judge error."""
    make_project(pytester, boom=(Q.format("fluency", 2),))
    pytester.makepyfile(PASS_AND_FAIL)
    result = pytester.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["evaluations: 2 (0 passed, 0 below threshold, 2 judge error), *judge errors: 2*"])


def test_the_hook_receives_the_typed_record(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("consistency", 2),))
    pytester.makeconftest(pytester.path.joinpath("conftest.py").read_text() + textwrap.dedent('''
        from pytest_bineval.report.record import EvaluationRecord
        SEEN = []

        def pytest_bineval_evaluated(config, record):
            assert isinstance(record, EvaluationRecord)
            SEEN.append(record)

        def pytest_sessionfinish(session):
            with open("seen.json", "w") as fh:
                fh.write("[" + ",".join(r.model_dump_json() for r in SEEN) + "]")
    '''))
    pytester.makepyfile(PASS_AND_FAIL)
    pytester.runpytest().assert_outcomes(passed=1, failed=1)
    seen = [EvaluationRecord.model_validate(r) for r in json.loads((pytester.path / "seen.json").read_text())]
    assert sorted(r.outcome for r in seen) == ["failed", "passed"]
    bad = next(r for r in seen if r.outcome == "failed")
    assert bad.location is not None and bad.location.line > 0
    assert [v.question for v in bad.failing()] == [Q.format("consistency", 2)]


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


def test_report_round_trip_and_format_1(tmp_path: Path, pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("consistency", 2),))
    pytester.makepyfile(PASS_AND_FAIL)
    pytester.runpytest("--bineval-report=report.json")
    doc = report_of(pytester)
    again = ReportDocument.parse(json.loads(doc.to_json()))
    assert again == doc
    # format 1, as the plugin wrote it before this version
    old = {
        "format": 1, "settings": {"model": "m", "cache": "on"},
        "totals": {"evaluations": 1, "passed": 0, "failed": 1, "judge_errors": 0, "questions": 2,
                   "llm_calls": 2, "cache_hits": 0, "prompt_tokens": 10, "completion_tokens": 4,
                   "cost_usd": None, "unpinned_checklists": 1, "pinned_checklists_written": 0},
        "evaluations": [{
            "test": "t.py::test_a", "task": "Summarize.", "prompt": None, "model": "m", "checklist_model": "m",
            "checklist_status": "unpinned", "output": "out", "source": "src", "dimensions": ["consistency"],
            "thresholds": {"consistency": 0.8}, "scores": {"consistency": 0.5}, "overall": 0.5,
            "outcome": "failed",
            "verdicts": [{"question_id": "c-1", "dimension": "consistency", "question": "Q1?", "answer": "yes"},
                         {"question_id": "c-2", "dimension": "consistency", "question": "Q2?", "answer": "no",
                          "explanation": "wrong"}],
            "questions": [{"id": "c-1", "dimension": "consistency", "text": "Q1?"},
                          {"id": "c-2", "dimension": "consistency", "text": "Q2?"}],
            "usage": {"llm_calls": 2},
        }],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    doc1 = ReportDocument.load(path)
    (rec,) = doc1.evaluations
    assert rec.scores == {"consistency": 0.5} and rec.thresholds == {"consistency": 0.8}
    assert rec.dimensions[0].outcome == "failed" and [v.question for v in rec.failing()] == ["Q2?"]
    assert doc1.totals.errors == 0 and doc1.settings.model == "m"


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "cannot read the bineval report"),
    ('{"format": 9}', "unknown bineval report format 9"),
    ('{"format": 2, "evaluations": [{"test": 1}]}', "not a valid bineval report"),
])
def test_an_unreadable_report_is_a_usage_error_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(BinevalError, match=message) as info:
        ReportDocument.load(path)
    assert str(path) in str(info.value)


OUTSIDE = '''
import sys
from pytest_bineval import BinevalAssertionError, Checklist, Question, assert_passes
from pytest_bineval.testing import ScriptedModel

fake = ScriptedModel(provider="ofake", answers={"Does the response meet fluency check 2?": "no"}).register()
ev = assert_passes("A summary.", dimension="fluency", task="Summarize the article.", threshold=0.5,
                   model=fake.model)
assert ev.scores["fluency"] == 0.5, ev.scores
q = Question(id="f-1", dimension="fluency", text="Does the response meet fluency check 2?")
checklist = Checklist(task="Summarize.", dimensions={"fluency": "Reads well."}, questions=[q])
try:
    assert_passes("A summary.", checklist=checklist, model=fake.model)
except BinevalAssertionError as exc:
    assert "[fluency] Does the response meet fluency check 2?" in str(exc), str(exc)
    print("raised as expected")
else:
    sys.exit("no assertion error")
'''


def test_assert_passes_outside_pytest_with_task_and_with_checklist(tmp_path: Path) -> None:
    """No plugin, no test context: task= generates a checklist, checklist= is used as given."""
    proc = subprocess.run([sys.executable, "-c", OUTSIDE], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "raised as expected" in proc.stdout


def test_importing_the_plugin_leaves_the_environment_alone() -> None:
    """Bug: importing pytest_bineval.llm set LITELLM_LOCAL_MODEL_COST_MAP in the user's environment."""
    code = ("import os; before = dict(os.environ); import pytest_bineval, pytest_bineval.plugin, "
            "pytest_bineval.llm.client, pytest_bineval.llm.providers; "
            "assert dict(os.environ) == before, set(os.environ) ^ set(before); "
            "import sys; assert 'litellm' not in sys.modules")
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr


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


def test_every_exception_the_package_defines_is_a_bineval_error() -> None:
    import inspect

    import pytest_bineval.errors as errors

    defined = [c for _, c in inspect.getmembers(errors, inspect.isclass) if c.__module__ == errors.__name__]
    warnings = [c for c in defined if issubclass(c, Warning)]
    assert warnings and all(issubclass(c, errors.BinevalWarning) for c in warnings)
    classes = [c for c in defined if c not in warnings]
    assert classes and all(issubclass(c, BinevalError) for c in classes)
    assert issubclass(PinError, BinevalError)


def test_data_files_and_settings_raise_bineval_errors_naming_the_place(tmp_path: Path) -> None:
    """Review finding: bad data files and a bad cache mode raised a bare ValueError (a BinevalError now)."""
    from pytest_bineval.errors import DataFileError, UsageError
    from pytest_bineval.jsonl import field_text, iter_records
    from pytest_bineval.llm.cache import ResponseCache

    bad = tmp_path / "outputs.jsonl"
    bad.write_text('{"summary": "ok"}\n{"summary": \n', encoding="utf-8")
    with pytest.raises(DataFileError, match=r"outputs.jsonl, line 2: invalid JSON"):
        list(iter_records(bad))
    with pytest.raises(DataFileError, match=r"here: missing key 'article'"):
        field_text({"summary": "ok"}, "article", "here")
    with pytest.raises(UsageError, match="cache mode must be one of"):
        ResponseCache(tmp_path / "cache", mode="sometimes")  # type: ignore[arg-type]


def test_cache_hits_never_make_an_unknown_cost_known(pytester: pytest.Pytester) -> None:
    """Review finding: a cache hit costs $0, and adding it to a request of unknown cost showed '$0.0000'."""
    make_project(pytester)
    pytester.makepyfile(PASS_AND_FAIL)
    first = pytester.runpytest("--color=no")
    first.stdout.fnmatch_lines(["evaluations: 2 *requests: *, cache hits: *, cost: unknown"])
    # one output changed: its question is a new request of unknown price, the other verdicts are cache hits
    pytester.makepyfile(PASS_AND_FAIL.replace("A fine summary.", "Another fine summary."))
    mixed = pytester.runpytest("--color=no", "--bineval-report=report.json")
    mixed.stdout.fnmatch_lines(["evaluations: 2 *requests: *, cache hits: *, cost: unknown"])
    totals = report_of(pytester).totals
    assert totals.llm_calls == totals.unpriced_requests > 0 and totals.cache_hits > 0
    # nothing sent: nothing paid
    cached = pytester.runpytest("--color=no")
    cached.stdout.fnmatch_lines(["evaluations: 2 *requests: 0, cache hits: *, cost: $0.0000"])


def test_cost_text_is_a_lower_bound_when_some_replies_are_unpriced() -> None:
    from pytest_bineval.models import Usage, cost_text

    priced, unpriced, hit = Usage(llm_calls=1, cost_usd=0.002), Usage(llm_calls=1, unpriced_requests=1), \
        Usage(cache_hits=1, cost_usd=0.0)
    assert cost_text((priced + hit).cost_usd, (priced + hit).unpriced_requests) == "$0.0020"
    total = unpriced + hit
    assert (total.cost_usd, cost_text(total.cost_usd, total.unpriced_requests)) == (0.0, "unknown")
    total = priced + unpriced + hit
    assert cost_text(total.cost_usd, total.unpriced_requests) == "at least $0.0020 (1 unpriced)"
    assert (total.since(priced).unpriced_requests, cost_text(None, 0)) == (1, "$0.0000")


SCORED = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_scored():
    assert_passes("s", dimension="fluency")
'''
UNSCORED = SCORED + '''
def test_no_task():
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


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_a_threshold_key_that_names_no_dimension_is_not_silently_ignored(pytester: pytest.Pytester,
                                                                       workers: list[str]) -> None:
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
    run = pytester.runpytest_subprocess if workers else pytester.runpytest
    result = run("--bineval-threshold=fluncy=0.3,consistency_strict=0.5", *workers)
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





@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_a_test_that_errors_before_any_evaluation_is_in_the_totals_and_reports(
        pytester: pytest.Pytester, workers: list[str]) -> None:
    """Bug: a test with no task, or a pin error under --bineval-strict, left no record: the JSON and HTML
    totals and the summary counted only the scored tests, as if the others had not run."""
    make_project(pytester)
    pytester.makepyfile(test_unscored=UNSCORED)
    run = pytester.runpytest_subprocess if workers else pytester.runpytest
    result = run("--bineval-report=report.json", "--bineval-html=report.html", *workers)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines([
        "*bineval summary*",
        "NOT SCORED test_unscored.py::test_no_task: NoTaskError: pytest-bineval needs the task*",
        "PASS test_unscored.py::test_scored*",
        "evaluations: 1 (1 passed*",
        "tests not scored: 1 (errored before any evaluation)",
    ])
    doc = report_of(pytester)
    assert doc.totals.unscored_tests == 1 and doc.totals.evaluations == 1
    assert [(u.test, u.error) for u in doc.unscored] == [("test_unscored.py::test_no_task", "NoTaskError")]
    html = (pytester.path / "report.html").read_text()
    assert 'id="total-unscored">1<' in html and "test_unscored.py::test_no_task" in html

    result = run("--bineval-strict", "--bineval-report=report.json", *workers)
    result.assert_outcomes(errors=2)
    assert sorted((u.test, u.error) for u in report_of(pytester).unscored) == [
        ("test_unscored.py::test_no_task", "NoTaskError"), ("test_unscored.py::test_scored", "PinError")]
    result.stdout.fnmatch_lines(["tests not scored: 2 (errored before any evaluation)"])


FLAKY = '''
import pathlib
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
def test_flaky():
    attempts = pathlib.Path("attempts")
    first = not attempts.exists()
    attempts.write_text("x")
    assert_passes("s", dimension="fluency", threshold=0.9 if first else 0.5)  # 0.50: below, then at threshold
'''


@pytest.mark.parametrize("workers", [[], ["-p", "xdist", "-n", "2"]], ids=["serial", "xdist"])
def test_a_rerun_keeps_the_last_attempts_records_and_counts_the_others(
        pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, workers: list[str]) -> None:
    """Bug: under pytest-rerunfailures every attempt's records stayed (a test that passed on its re-run showed
    a BELOW THRESHOLD evaluation) and the test stayed among the failed ones (a GitHub error annotation)."""
    pytest.importorskip("pytest_rerunfailures")
    make_project(pytester, no=(Q.format("fluency", 2),))
    pytester.makepyfile(test_flaky=FLAKY)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    run = pytester.runpytest_subprocess if workers else pytester.runpytest
    result = run("-p", "rerunfailures", "--reruns=1", "--bineval-report=report.json", *workers)
    assert result.parseoutcomes() == {"passed": 1, "rerun": 1}
    doc = report_of(pytester)
    assert [r.outcome for r in doc.evaluations] == ["passed"]
    assert doc.totals.rerun_evaluations == 1 and doc.totals.evaluations == 1
    assert doc.totals.cache_hits == 2  # the re-run's answers came from the cache: counted, not hidden
    out = result.stdout.str()
    assert "BELOW THRESHOLD" not in out and "::error" not in out
    result.stdout.fnmatch_lines(["re-runs: 1 evaluation of earlier attempts replaced by the last attempt's*"])


def test_unpinned_checklists_are_counted_per_pin_entry_not_per_parameter(pytester: pytest.Pytester) -> None:
    """Bug: the count was per (test id, task), so three cases of one task were three unpinned checklists,
    though --bineval-update-checklists writes one."""
    make_project(pytester)
    pytester.makepyfile(test_same='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        @pytest.mark.parametrize("n", [1, 2, 3])
        def test_case(n):
            assert_passes(f"summary {n}", dimension="fluency")
    ''')
    pytester.makepyfile(test_cases=CASES)  # three tasks: three checklists
    pytester.makepyfile(test_two_dims='''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        @pytest.mark.parametrize("n", [1, 2])
        def test_case(n):  # one task, two dimensions asked apart: two checklists (found in review)
            assert_passes(f"summary {n}", dimension="fluency")
            assert_passes(f"summary {n}", dimension="coherence")
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(passed=8)
    result.stdout.fnmatch_lines(["unpinned checklists: 6 (review and pin them*"])
    result = pytester.runpytest("--bineval-update-checklists")
    result.stdout.fnmatch_lines(["pinned checklists written: 6"])


def test_a_run_of_unscored_tests_only_reaches_every_output(pytester: pytest.Pytester,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Found in review: the bineval_checklist fixture's missing task was pytest's UsageError (not counted), and
    the GitHub job summary was written only when some test had been scored."""
    make_project(pytester)
    pytester.makepyfile(test_fixture="def test_checklist_without_a_task(bineval_checklist):\n    pass\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest("--bineval-report=report.json")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "NOT SCORED test_fixture.py::test_checklist_without_a_task: NoTaskError: pytest-bineval needs the task*",
        "tests not scored: 1 (errored before any evaluation)",
    ])
    assert report_of(pytester).totals.unscored_tests == 1
    assert "**1 test not scored** (errored before any evaluation)." in (pytester.path / "summary.md").read_text()
