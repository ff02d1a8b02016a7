"""The pytest plugin, through pytester and the real terminal output, with a scripted fake judge."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
from support import PASS_AND_FAIL, Q, make_project, report_of, with_finished_hook

from pytest_bineval import DEFAULT_MODEL
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import EvaluationRecord

pytest_plugins = ["pytester"]

QUIET_INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


def test_help_lists_the_option_group_without_loading_litellm(pytester: pytest.Pytester) -> None:
    pytester.makeini(QUIET_INI)
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines([
        "*LLM output tests with binary checklists (pytest-bineval)*",
        "*--bineval-model=MODEL*",
        "*--bineval-api-base=URL*",
        "*--bineval-cache=MODE*",
        "*--bineval-temperature=T*",
        "*--bineval-threshold=T*",
        "*--bineval-update-checklists*",
        "*--bineval-strict*",
        "*--bineval-report=PATH*",
        "*--bineval-optimize*",
    ])


HEAVY = ("pytest_bineval.models", "pytest_bineval.report.record", "pytest_bineval.engine", "litellm", "llama_cpp")


@pytest.mark.parametrize("args", [["--help"], ["--collect-only", "-q"]])
def test_loading_the_plugin_imports_no_model_module_litellm_or_model(pytester: pytest.Pytester,
                                                                     args: list[str]) -> None:
    """``pytest --help`` and collecting a project of bineval tests (which import assert_passes and carry the
    marker) load neither the package's pydantic models nor litellm nor the embedded model."""
    pytester.makeini(QUIET_INI)
    pytester.makepyfile(test_app="""
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the text.", dimensions=["fluency"], threshold={"fluency": 0.5})
        def test_summary():
            assert_passes("A summary.", source="A text.")
    """)
    code = (f"import sys, pytest; code = pytest.main({args!r}); "
            f"bad = [m for m in {HEAVY!r} if m in sys.modules]; "
            "print('HEAVY', bad); sys.exit(3 if bad else int(code))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=pytester.path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    if "--collect-only" in args:
        assert "test_app.py::test_summary" in proc.stdout


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--bineval-threshold=1.5", "*argument --bineval-threshold*within [[]0, 1[]]*"),
        ("--bineval-threshold=high", "*argument --bineval-threshold*not a number*"),
        ("--bineval-cache=maybe", "*argument --bineval-cache*invalid choice*"),
        ("--bineval-concurrency=0", "*argument --bineval-concurrency*must be >= 1*"),
        ("--bineval-timeout=-3", "*argument --bineval-timeout*within (0, 3600], not -3.0*"),
        # a number that is no finite number, or past a sane bound
        ("--bineval-timeout=inf", "*argument --bineval-timeout*not a finite number: 'inf'*"),
        ("--bineval-timeout=1e309", "*argument --bineval-timeout*not a finite number: '1e309'*"),
        ("--bineval-timeout=nan", "*argument --bineval-timeout*not a finite number: 'nan'*"),
        ("--bineval-timeout=7200", "*argument --bineval-timeout*within (0, 3600], not 7200.0*"),
        ("--bineval-retries=21", "*argument --bineval-retries*retries are within [[]0, 20[]], not 21*"),
        # a word that reads as "no" never turns a gate (or the pin update) off silently: `off` does, explicitly
        ("--bineval-fail-on-regression=", "*argument --bineval-fail-on-regression*invalid choice: ''*or off*"),
        ("--bineval-fail-on-regression=0", "*argument --bineval-fail-on-regression*invalid choice: '0'*"),
        ("--bineval-fail-on-regression=false", "*argument --bineval-fail-on-regression*invalid choice: 'false'*"),
        ("--bineval-update-checklists=", "*argument --bineval-update-checklists*invalid mode ''*"),
        ("--bineval-update-checklists=no", "*argument --bineval-update-checklists*invalid mode 'no'*"),
        # an empty path would write (or read) nothing without a word
        ("--bineval-report=", "*argument --bineval-report*a path is needed here, not an empty value*"),
        ("--bineval-baseline=", "*argument --bineval-baseline*a path is needed here*"),
        ("--bineval-html=", "*argument --bineval-html*a path is needed here*"),
        ("--bineval-pr-comment=", "*argument --bineval-pr-comment*a path is needed here*"),
        ("--bineval-cache-dir=", "*argument --bineval-cache-dir*must not be empty*"),
        ("--bineval-budget=", "*argument --bineval-budget*"),
        ("--bineval-model=", "*argument --bineval-model*must not be empty*"),
    ],
)
def test_invalid_option_values_are_argparse_errors(pytester: pytest.Pytester, option: str, message: str) -> None:
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest(option)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


@pytest.mark.parametrize(("ini", "cli", "expected"), [
    ("", "--bineval-fail-on-regression", "significant"),
    ("", "--bineval-fail-on-regression=off", None),
    ("bineval_fail_on_regression = any", None, "any"),
    ("bineval_fail_on_regression = true", None, "significant"),
    ("bineval_fail_on_regression = any", "--bineval-fail-on-regression=off", None),  # off wins over the ini
    ("bineval_fail_on_regression = off", None, None),
])
def test_off_is_the_one_word_that_turns_a_mode_option_off(pytester: pytest.Pytester, ini: str, cli: str | None,
                                                          expected: str | None) -> None:
    from pytest_bineval.options import read_options

    pytester.makeini(f"[pytest]\n{ini}\n")
    config = pytester.parseconfig(*([cli] if cli else []))
    assert read_options(config).fail_on_regression == expected


@pytest.mark.parametrize("value", ["false", "0", "no"])
def test_a_no_word_in_the_ini_is_a_usage_error_naming_off(pytester: pytest.Pytester, value: str) -> None:
    pytester.makeini(f"{QUIET_INI}bineval_fail_on_regression = {value}\n")
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*bineval_fail_on_regression = '{value}'*invalid choice*significant, any or off*"])


def test_invalid_ini_value_is_a_usage_error(pytester: pytest.Pytester) -> None:
    make_project(pytester, ini="bineval_concurrency = lots")
    pytester.makepyfile("def test_x(): pass")
    # a UsageError raised in pytest_configure leaves an in-process pytest half-configured: use a subprocess
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bineval_concurrency*lots*not an integer*"])


def test_pass_and_fail_with_reasons_section_and_summary(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("consistency", 2),))
    pytester.makepyfile(PASS_AND_FAIL)
    result = pytester.runpytest("--color=no", "--bineval-report=report.json", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1)
    # the assertion message: scores vs thresholds and every failing question with its explanation
    result.stdout.fnmatch_lines([
        "*BinevalAssertionError: bineval: output scored below threshold",
        "*consistency: 0.50 (threshold 0.80) FAIL",
        "*fluency: 1.00 (threshold 0.70) ok",
        "*failing questions (1):",
        "*[[]consistency[]] Does the response meet consistency check 2?",
        "*-> no: scripted no for: Does the response meet consistency check 2?",
    ])
    # the report section under the failing test, failing question first
    result.stdout.fnmatch_lines([
        "*- bineval -*",
        "task: Summarize the article.",
        "*outcome: failed*",
        "*consistency*Does the response meet*no*scripted no for: Does*",
    ])
    # the end-of-run summary
    result.stdout.fnmatch_lines([
        "*= bineval summary =*",  # by test id
        "BELOW THRESHOLD *::test_bad: consistency 0.50 < 0.80, fluency 1.00 >= 0.70",
        "    [[]consistency[]] Does the response meet consistency check 2?",
        "        -> no: scripted no for: Does the response meet consistency check 2?",
        "PASS test_pass_and_fail_with_reasons_section_and_summary.py::test_good: fluency 1.00 >= 0.70",
        "evaluations: 2 (1 passed, 1 below threshold, 0 judge error), questions: 6, judge errors: 0, "
        "requests: *, cache hits: *",
        "unpinned checklists: 2 *",
    ])
    assert result.stdout.str().count("- bineval -") == 1  # only under the failing test
    data = report_of(pytester)
    assert data.format == 2 and data.totals.evaluations == 2
    bad = next(e for e in data.evaluations if e.test.endswith("test_bad"))
    assert bad.outcome == "failed"
    assert bad.thresholds == {"consistency": 0.8, "fluency": 0.7}
    assert bad.scores == {"consistency": 0.5, "fluency": 1.0}
    assert [d.outcome for d in bad.dimensions] == ["failed", "passed"]
    assert bad.model == "pfake/judge"
    assert bad.task == "Summarize the article."
    assert bad.output == "A wrong summary." and bad.source == "An article."
    assert bad.location is not None
    assert bad.location.file == "test_pass_and_fail_with_reasons_section_and_summary.py"
    source_lines = (pytester.path / bad.location.file).read_text().splitlines()
    assert 'assert_passes("A wrong summary."' in source_lines[bad.location.line - 1]  # the call's own line
    assert {v.answer for v in bad.verdicts} == {"yes", "no"}
    # explain=failing (the default): every "no" is explained, no "yes" is, and the report says which mode
    assert all(bool(v.explanation) == (v.answer == "no") for v in bad.verdicts)
    assert {v.explain for v in bad.verdicts} == {"failing"}
    # 4 answers, 1 explanation (the one "no", under the default --bineval-explain failing)
    assert len(bad.questions) == 4 and bad.usage.llm_calls + bad.usage.cache_hits == 4 + 1
    junit = (pytester.path / "junit.xml").read_text()
    assert 'name="bineval:consistency" value="0.5"' in junit


def test_summary_and_section_honour_color(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("consistency", 1),))
    pytester.makepyfile(PASS_AND_FAIL)
    colored = pytester.runpytest("--color=yes").stdout.str()
    plain = pytester.runpytest("--color=no").stdout.str()
    assert "\x1b[" in colored and "\x1b[" not in plain


def test_thresholds_explicit_over_marker_over_cli_over_default(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("consistency", 1),))  # consistency scores 0.5
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="T")
        def test_default():                       # default 0.8 -> fails
            assert_passes("x", dimension="consistency")

        @pytest.mark.bineval(task="T", threshold={"consistency": 0.5})
        def test_marker():                        # marker 0.5 -> passes
            assert_passes("x", dimension="consistency")

        @pytest.mark.bineval(task="T", threshold=0.9)
        def test_explicit_wins():                 # explicit 0.4 beats marker 0.9 -> passes
            assert_passes("x", dimension="consistency", threshold=0.4)
    ''')
    result = pytester.runpytest("--bineval-report=r1.json")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["BELOW THRESHOLD *::test_default: consistency 0.50 < 0.80"])
    result = pytester.runpytest("--bineval-threshold=consistency=0.5")
    result.assert_outcomes(passed=3)  # the CLI lowers the default; the marker/explicit still win
    result = pytester.runpytest("--bineval-threshold=0.6", "-k", "not test_default")
    result.assert_outcomes(passed=2)


def test_task_precedence_explicit_marker_fixture(pytester: pytest.Pytester) -> None:
    # The judge only says yes when the prompt carries "RIGHT-TASK": a test passes iff the right task won.
    make_project(pytester, task_must_contain="RIGHT-TASK")
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.fixture
        def bineval_task():
            return "wrong task from the module fixture"

        @pytest.mark.bineval(task="wrong task from the marker")
        def test_explicit_beats_marker():
            assert_passes("x", dimension="fluency", task="RIGHT-TASK explicit")

        @pytest.mark.bineval(task="RIGHT-TASK from the marker")
        def test_marker_beats_fixture():
            assert_passes("x", dimension="fluency")

        @pytest.mark.bineval(task="RIGHT-TASK from the class marker")
        class TestClass:
            def test_class_marker(self):
                assert_passes("x", dimension="fluency")

        def test_fixture_fallback(bineval_task):
            assert_passes("x", dimension="fluency")   # the module's fixture is wrong: fails

        class TestOverride:
            @pytest.fixture
            def bineval_task(self):
                return "RIGHT-TASK from a class fixture"

            def test_class_fixture(self):
                assert_passes("x", dimension="fluency")
    ''')
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["*test_fixture_fallback FAILED*"])


def test_no_task_anywhere_says_the_three_ways(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile('''
        from pytest_bineval import assert_passes

        def test_no_task():
            assert_passes("x")
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*needs the task the output was made for*",
        "*1. assert_passes(output, task=*",
        "*2. @pytest.mark.bineval(task=*",
        "*3. a `bineval_task` fixture*",
    ])


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        ('@pytest.mark.bineval(task="T", treshold=0.5)', "*unknown @pytest.mark.bineval argument(s) [[]'treshold'[]]; "
         "'treshold': did you mean 'threshold'?; allowed: *"),
        ('@pytest.mark.bineval(taks="T", colour=1)',
         "*unknown @pytest.mark.bineval argument(s) [[]'colour', 'taks'[]]; 'taks': did you mean 'task'?; allowed: *"),
        ('@pytest.mark.bineval("T")', "*keyword arguments only*"),
        ('@pytest.mark.bineval(task="")', "*task=...) must be a non-empty string*"),
    ],
)
def test_marker_kwargs_are_validated(pytester: pytest.Pytester, marker: str, message: str) -> None:
    make_project(pytester)
    pytester.makepyfile(f'''
        import pytest

        {marker}
        def test_x():
            pass
    ''')
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


PINNED = '''
import pytest

from pytest_bineval import assert_passes

@pytest.mark.bineval(task="{task}", dimensions=["consistency", {{"tone": "The response is polite."}}])
def test_pinned():
    assert_passes("x", source="src")
'''


def test_pinned_checklists_update_use_and_strict(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_pin=PINNED.format(task="Summarize it."))
    pin = pytester.path / "__bineval__" / "test_pin" / "test_pinned.json"

    # 1. without the flag nothing is written; --bineval-strict makes the unpinned checklist an error
    result = pytester.runpytest("--bineval-strict")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*--bineval-strict: the checklist of *test_pinned is not pinned*"])
    result = pytester.runpytest()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["unpinned checklists: 1 *"])
    assert not pin.exists()

    # 2. --bineval-update-checklists writes a reviewable file
    result = pytester.runpytest("--bineval-update-checklists")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["pinned checklists written: 1"])
    data = json.loads(pin.read_text())
    (checklist,) = data["checklists"]
    assert checklist["task"] == "Summarize it."
    assert set(checklist["dimensions"]) == {"consistency", "tone"}
    assert pin.read_text().count("\n") > 20  # indented, diff-friendly

    # 3. a pinned file is used verbatim: no generation call, edits show up
    checklist["questions"][0]["text"] = "Is this the hand-edited question?"
    pin.write_text(json.dumps(data, indent=2))
    result = pytester.runpytest("--bineval-strict", "--bineval-report=report.json", "--bineval-cache=off")
    result.assert_outcomes(passed=1)
    rep = report_of(pytester)
    (ev,) = rep.evaluations
    assert ev.checklist_status == "pinned"
    assert ev.verdicts[0].question == "Is this the hand-edited question?"
    assert rep.totals.llm_calls == len(ev.verdicts)  # judge calls only, no generation

    # 4. the task text changed since pinning: stale -> error under --bineval-strict
    pytester.makepyfile(test_pin=PINNED.format(task="Summarize it in French."))
    result = pytester.runpytest("--bineval-strict")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*is stale (the task text changed since it was pinned)*"])


def test_pins_of_same_named_methods_in_two_classes_do_not_collide(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_cls='''
        import pytest
        from pytest_bineval import assert_passes

        class TestA:
            @pytest.mark.bineval(task="Task A")
            def test_it(self):
                assert_passes("x", dimension="fluency")

        class TestB:
            @pytest.mark.bineval(task="Task B")
            def test_it(self):
                assert_passes("x", dimension="fluency")
    ''')
    pytester.runpytest("--bineval-update-checklists").assert_outcomes(passed=2)
    base = pytester.path / "__bineval__" / "test_cls"
    assert json.loads((base / "TestA.test_it.json").read_text())["checklists"][0]["task"] == "Task A"
    assert json.loads((base / "TestB.test_it.json").read_text())["checklists"][0]["task"] == "Task B"
    pytester.runpytest("--bineval-strict").assert_outcomes(passed=2)


def test_checklist_generation_failure_is_a_short_test_error(pytester: pytest.Pytester) -> None:
    make_project(pytester, rules={"questions": "lambda req: '{\"questions\": []}'"})
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="T")
        def test_gen():
            assert_passes("x", dimension="fluency")
    ''')
    result = pytester.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ChecklistGenerationError: step 2 (questions for dimension 'fluency') failed*"])
    assert "checklist.py" not in result.stdout.str()  # a message, not a traceback through the engine


def test_judge_error_is_a_test_error_never_a_pass(pytester: pytest.Pytester) -> None:
    make_project(pytester, boom=(Q.format("fluency", 2),))
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="T")
        def test_judged():
            assert_passes("x", dimension="fluency", threshold=0.0)
    ''')
    result = pytester.runpytest("--bineval-report=report.json", "--bineval-retries=0")  # no backoff waits
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([
        "*BinevalJudgeError: bineval: the judge (pfake/judge) failed on 1 question(s)*",
        "*[[]fluency[]] Does the response meet fluency check 2?",
        "*cause: *provider exploded: 503*",
        "JUDGE ERROR *::test_judged: fluency 1.00 over the answered questions, threshold 0.00 "
        "(judge error: not scored)",
        "*judge errors: 1*",
    ])
    (ev,) = report_of(pytester).evaluations
    assert ev.outcome == "error" and ev.dimensions[0].outcome == "error"


def test_fixtures_service_checklist_and_task(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("relevance", 1),))
    pytester.makepyfile('''
        import pytest

        @pytest.fixture
        def bineval_task():
            return "Answer the question."

        @pytest.mark.bineval(dimensions=["relevance"])
        def test_fixtures(bineval, bineval_checklist, bineval_task):
            assert bineval_checklist.task == "Answer the question."
            assert list(bineval_checklist.dimensions) == ["relevance"]
            ev = bineval.evaluate("an answer", bineval_checklist, source="a question")
            assert ev.scores == {"relevance": 0.5}
            again = bineval.checklist("Answer the question.", ["relevance"])
            assert again == bineval_checklist
    ''')
    pytester.runpytest().assert_outcomes(passed=1)


def test_async_variant_in_pytest_asyncio(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("coherence", 1),))
    pytester.makepyfile('''
        import pytest
        from pytest_bineval import assert_passes_async, BinevalAssertionError

        @pytest.mark.asyncio
        @pytest.mark.bineval(task="T")
        async def test_async():
            ev = await assert_passes_async("x", dimension="fluency")
            assert ev.overall == 1.0
            with pytest.raises(BinevalAssertionError, match="coherence: 0.50"):
                await assert_passes_async("x", dimension="coherence")
    ''')
    pytester.runpytest("-p", "asyncio").assert_outcomes(passed=1)


def test_finished_hook_gets_the_run_document_once(pytester: pytest.Pytester) -> None:
    make_project(pytester, no=(Q.format("consistency", 2),))
    with_finished_hook(pytester)
    pytester.makepyfile(PASS_AND_FAIL)
    pytester.runpytest().assert_outcomes(passed=1, failed=1)
    lines = (pytester.path / "finished.txt").read_text().splitlines()
    assert lines == ["False 2 2 ['test_finished_hook_gets_the_run_document_once.py::test_bad']"]


def test_plugin_can_be_disabled(pytester: pytest.Pytester) -> None:
    pytester.makeini(QUIET_INI)
    pytester.makepyfile("def test_x(): pass")
    result = pytester.runpytest("-p", "no:bineval", "--help")
    assert "--bineval-model" not in result.stdout.str()


def test_an_unwritable_report_path_is_a_note_and_a_failed_session_not_a_crash(pytester: pytest.Pytester) -> None:
    """The results stay on the terminal; the files asked for that cannot be written are named, the other is written,
    and the session fails (an artifact a CI job expects is missing)."""
    make_project(pytester)
    pytester.makepyfile(test_a="""
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Summarize the article.")
        def test_good():
            assert_passes("A fine summary.", dimension="fluency", source="An article.")
    """)
    result = pytester.runpytest("--bineval-report=test_a.py/r.json", "--bineval-html=page.html")
    result.stdout.fnmatch_lines([
        "*bineval summary*",
        "*PASS*test_good*",
        "bineval: cannot write the JSON report *test_a.py*r.json: *",
        "*1 passed*",
    ])
    result.stdout.no_fnmatch_line("bineval report: *")
    result.stdout.fnmatch_lines(["bineval html report: page.html"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
    assert (pytester.path / "page.html").is_file()
    assert result.ret == pytest.ExitCode.TESTS_FAILED


def test_totals_are_the_records_plus_checklist_generation(pytester: pytest.Pytester) -> None:
    """Checklist generation's requests are carried by no record: the report's checklists section has them, the
    summary shows them, and the totals are the records' usage plus that section's."""
    make_project(pytester, no=(Q.format("consistency", 2),))
    pytester.makepyfile(PASS_AND_FAIL)
    result = pytester.runpytest("--color=no", "--bineval-report=report.json")
    result.assert_outcomes(passed=1, failed=1)
    data = report_of(pytester)
    assert data.checklists.generated == 2  # one task, checked on two sets of dimensions
    spent = data.checklists.usage
    assert spent.llm_calls > 0
    for name in ("llm_calls", "cache_hits", "prompt_tokens", "completion_tokens", "failed_requests"):
        records = sum(getattr(r.usage, name) for r in data.evaluations)
        assert getattr(data.totals, name) == records + getattr(spent, name), name
    result.stdout.fnmatch_lines([f"of which checklist generation: 2 checklists, requests: {spent.llm_calls}, *"])


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


CACHED_TEST = '''
import sys
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
@pytest.mark.parametrize("i", range(3))
def test_cached(i):
    assert_passes(f"Summary number {i}.", source="An article.", threshold=0.0)

def test_zz_nothing_heavy_was_imported():
    heavy = [m for m in ("litellm", "llama_cpp", "openai") if m in sys.modules]
    assert heavy == [], heavy
'''


def test_a_fully_cached_run_imports_no_litellm(pytester: pytest.Pytester) -> None:
    """First run: a scripted fake stands in for the embedded model (registered under its provider name,
    ``bineval``) and fills the cache. Second run, in a fresh process whose conftest registers nothing: the
    default (embedded) model would have to be loaded through litellm for any miss, but every checklist and
    verdict comes from the cache, so litellm and llama.cpp are never imported (the last test checks
    sys.modules) and the summary counts 0 requests."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makeconftest(textwrap.dedent('''
        from pytest_bineval.testing import ScriptedModel

        ScriptedModel(provider="bineval", prefill=True,
                      answers={"Does the response meet consistency check 2?": "no"}).register()
    '''))
    pytester.makepyfile(test_cached=CACHED_TEST.replace("def test_zz", "def skip_zz"))
    first = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    first.assert_outcomes(passed=3)
    pytester.makeconftest("")
    pytester.makepyfile(test_cached=CACHED_TEST)
    second = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--bineval-report=report.json")
    second.assert_outcomes(passed=4)
    second.stdout.fnmatch_lines(["*requests: 0, cache hits: *"])
    report = ReportDocument.load(pytester.path / "report.json")
    assert report.totals.llm_calls == 0 and report.totals.cache_hits > 0
    assert {r.model for r in report.evaluations} == {DEFAULT_MODEL}
