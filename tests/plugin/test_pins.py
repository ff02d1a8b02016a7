"""Pins are reviewed code: --bineval-update-checklists writes what is missing or stale and keeps what was edited by
hand (=all rewrites it), long test names, symlinked pin folders, and pin files given to ``bineval eval``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from support import make_project, report_of

from pytest_bineval.cli import main
from pytest_bineval.models import Checklist, Question
from pytest_bineval.pins import MAX_PIN_NAME, PinFile, pin, pin_path, questions_digest
from pytest_bineval.testing import ScriptedModel

pytest_plugins = ["pytester"]

SUITE = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="{task_a}")
def test_a():
    assert_passes("output a", dimension="fluency")

@pytest.mark.bineval(task="Task B.")
def test_b():
    assert_passes("output b", dimension="fluency")
'''
NEW_TEST = '''

@pytest.mark.bineval(task="Task C.")
def test_c():
    assert_passes("output c", dimension="fluency")
'''
EDITED = "Is this the question a reviewer wrote?"


def _edit_first_question(path: Path) -> str:
    data = json.loads(path.read_text())
    data["checklists"][0]["questions"][0]["text"] = EDITED
    path.write_text(json.dumps(data, indent=2))
    return path.read_text()


def test_a_hand_edited_pin_is_kept_by_an_update_run_and_rewritten_only_with_all(pytester: pytest.Pytester) -> None:
    """Bug: an update run to pin one new test regenerated every other pin, hand edits lost, and said only
    "pinned checklists written: 4"."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A."))
    pins = pytester.path / "__bineval__" / "test_suite"
    result = pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pin created: __bineval__/test_suite/test_a.json [[]fluency[]] 'Task A.'",
                                 "pin created: __bineval__/test_suite/test_b.json [[]fluency[]] 'Task B.'",
                                 "pins: 2 created, 0 rewritten, 0 kept because edited by hand, 0 entries given "
                                 "more tests"])
    entry = json.loads((pins / "test_a.json").read_text())["checklists"][0]
    assert entry["generated"].startswith("sha256:")  # what was generated is recorded: an edit is detectable

    # a reviewer edits test_a's pin; a new test is added; the update run pins the new test only
    edited = _edit_first_question(pins / "test_a.json")
    untouched = (pins / "test_b.json").read_text()
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A.") + NEW_TEST)
    result = pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off",
                                "--bineval-report=report.json")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([
        "pin created: __bineval__/test_suite/test_c.json [[]fluency[]] 'Task C.'",
        "pin kept: __bineval__/test_suite/test_a.json [[]fluency[]] 'Task A.': edited by hand; "
        "--bineval-update-checklists=all rewrites it",
        "pins: 1 created, 0 rewritten, 1 kept because edited by hand, 0 entries given more tests",
    ])
    assert (pins / "test_a.json").read_text() == edited
    assert (pins / "test_b.json").read_text() == untouched
    (a,) = [r for r in report_of(pytester).evaluations if r.test.endswith("test_a")]
    assert a.verdicts[0].question == EDITED and a.checklist_status == "pinned"  # judged with the reviewed pin

    # the task of test_a changes: its pin is stale, but edited by hand, so it is kept (and said so)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A, in French.") + NEW_TEST)
    result = pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["unpinned checklists: 1, of which 1 stale since its task or question text changed *",
                                 "pin kept: __bineval__/test_suite/test_a.json [[]fluency[]] 'Task A.': stale (the "
                                 "task text changed), but edited by hand; --bineval-update-checklists=all rewrites "
                                 "it; test_a is judged with a checklist generated for it, not pinned"])
    assert (pins / "test_a.json").read_text() == edited

    # =all rewrites it
    result = pytester.runpytest("--bineval-update-checklists=all", "--bineval-cache=off")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["pin rewritten: __bineval__/test_suite/test_a.json [[]fluency[]] "
                                 "'Task A, in French.'"])
    (entry,) = json.loads((pins / "test_a.json").read_text())["checklists"]
    assert entry["task"] == "Task A, in French." and EDITED not in json.dumps(entry)
    pytester.runpytest("--bineval-strict").assert_outcomes(passed=3)


PARAMETRIZED = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.parametrize("case", {cases})
@pytest.mark.bineval(task="Task P.")
def test_p(case):
    assert_passes(f"output {{case}}", dimension="fluency")
'''


def test_the_pin_summary_counts_tests_added_to_entries_pinned_before(pytester: pytest.Pytester) -> None:
    """Bug: "pins: 1 created, ..., 1 with tests added" for one entry created for two parametrized cases (the
    second case's listing counted as a second entry), and a case added to an existing pin had no line at all."""
    make_project(pytester)
    pytester.makepyfile(test_p=PARAMETRIZED.format(cases="[1, 2]"))
    result = pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["pin created: __bineval__/test_p/test_p.json [[]fluency[]] 'Task P.'",
                                 "pins: 1 created, 0 rewritten, 0 kept because edited by hand, 0 entries given "
                                 "more tests"])
    assert "tests added to pin" not in result.stdout.str()
    pytester.makepyfile(test_p=PARAMETRIZED.format(cases="[1, 2, 3, 4]"))
    result = pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off",
                                "--bineval-report=report.json")
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([
        "tests added to pin: __bineval__/test_p/test_p.json [[]fluency[]] 'Task P.': test_p[[]3[]], test_p[[]4[]]",
        "pins: 0 created, 0 rewritten, 0 kept because edited by hand, 1 entry given more tests (2 tests added)",
    ])
    assert sorted(a.test for a in report_of(pytester).pins if a.action == "listed") == ["test_p[3]", "test_p[4]"]
    (entry,) = json.loads((pytester.path / "__bineval__" / "test_p" / "test_p.json").read_text())["checklists"]
    assert entry["tests"] == ["test_p[1]", "test_p[2]", "test_p[3]", "test_p[4]"]


@pytest.mark.parametrize("broken", ['{"format": 2, "checklists": [ {"task": ',
                                    '{"format": 2, "checklists": [{"task": "Task A.", "dimensions": {"fluency": "F."}, '
                                    '"questions": [{"id": "q", "dimension": "fluncy", "text": "Fluent?"}]}]}',
                                    '{"format": 2, "checklists": [{"task": "Task A.", "dimensions": {"fluency": "F."}, '
                                    '"questions": [{"id": "q", "dimension": "fluency", "text": "Fluent?"}, '
                                    '{"id": "q", "dimension": "fluency", "text": "Short?"}]}]}'],
                         ids=["not JSON", "unknown dimension", "a question id twice"])
def test_a_broken_pin_file_says_how_to_repair_it_and_an_update_run_leaves_it(pytester: pytest.Pytester,
                                                                             broken: str) -> None:
    """Bug: a hand-edited pin file broken by a typo said only what was wrong; a stranger then re-ran with
    --bineval-update-checklists=all, which errors the same way (it does not overwrite a file it cannot read)."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A."))
    pin = pytester.path / "__bineval__" / "test_suite" / "test_a.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(broken)
    repair = ("*Fix the file by hand (your version control shows what changed), or delete it and run pytest "
              "--bineval-update-checklists to pin its tests again: an update run does not overwrite a pin file it "
              "cannot read*")
    for args in ((), ("--bineval-update-checklists=all",)):
        result = pytester.runpytest("--bineval-cache=off", *args)
        result.assert_outcomes(passed=1, errors=1)
        result.stdout.fnmatch_lines([f"*PinError: pinned checklist file {pin}*{repair}"])
        assert pin.read_text() == broken
    pin.unlink()
    pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off").assert_outcomes(passed=2)
    pytester.runpytest("--bineval-strict").assert_outcomes(passed=2)


def test_the_summary_says_which_unpinned_checklists_are_stale_pins(pytester: pytest.Pytester) -> None:
    """Bug: after a task's text changed, a run without --bineval-strict said only "unpinned checklists: 1": a
    stranger who had pinned every test could not tell that the pin was stale, nor why."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A.") + NEW_TEST)
    pytester.runpytest("--bineval-update-checklists", "--bineval-cache=off").assert_outcomes(passed=3)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A, in French.") + NEW_TEST.replace("Task C.", "Task D."))
    (pytester.path / "__bineval__" / "test_suite" / "test_b.json").unlink()
    result = pytester.runpytest("--bineval-cache=off")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["unpinned checklists: 3, of which 2 stale since their task or question text changed "
                                 "(review and pin them with --bineval-update-checklists)"])


@pytest.mark.parametrize("args", [
    ["--bineval-update-checklists", "test_suite.py"],  # the natural spelling: an existing path is a path
    ["--bineval-update-checklists", "test_suite.py::test_a"],  # a node id in one
    ["test_suite.py", "--bineval-update-checklists"],
    ["--bineval-update-checklists=missing", "test_suite.py"],
], ids=["option-path", "option-node-id", "path-option", "option=mode-path"])
def test_a_path_after_the_bare_update_option_is_a_test_path(pytester: pytest.Pytester, args: list[str]) -> None:
    """The probe's `pytest --bineval-update-checklists tests/test_support.py` read the path as the mode (a usage
    error). A word after the bare option that is no mode and an existing path is a test path: the run pins it."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A."), test_other="def test_o():\n    pass\n")
    result = pytester.runpytest(*args, "--bineval-cache=off")
    check_pinned_path(result, args)


# Under -n 2 (the workers parse the same arguments): tests/plugin/test_xdist.py's project of every feature runs
# with `--bineval-update-checklists test_every.py`.


def check_pinned_path(result: pytest.RunResult, args: list[str]) -> None:
    result.assert_outcomes(passed=1 if "::" in " ".join(args) else 2)  # test_other.py is not run: only the path
    result.stdout.fnmatch_lines(["pin created: __bineval__/test_suite/test_a.json [[]fluency[]] 'Task A.'"])


def test_an_unknown_update_mode_is_a_usage_error_saying_how_to_write_a_path(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A."))
    result = pytester.runpytest("--bineval-update-checklists", "test_suit.py")  # a typo: no such path
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*invalid mode 'test_suit.py': missing (the default when the option is given "
                                 "bare*), all (*) or off. To pin the tests of a path, write the option bare and the "
                                 "path after it (--bineval-update-checklists tests/test_x.py, for a path that "
                                 "exists), or --bineval-update-checklists=missing tests/test_x.py*"])


@pytest.mark.parametrize("blocked", ["__bineval__", "__bineval__/test_suite"])
@pytest.mark.parametrize("update", [True, False], ids=["update", "strict"])
def test_a_file_where_a_pin_folder_belongs_is_a_test_error_naming_it(pytester: pytest.Pytester, blocked: str,
                                                                     update: bool) -> None:
    """The probe got a raw FileExistsError / NotADirectoryError, reported as a test failure."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A."))
    path = pytester.path / blocked
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder")
    options = ["--bineval-update-checklists"] if update else ["--bineval-strict"]
    result = pytester.runpytest(*options, "-k", "test_a", "--bineval-cache=off")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*PinError: {path} is a file, but pytest-bineval keeps pinned checklists in a "
                                 "folder there (__bineval__/<test module>/<test>.json): move or delete that file*"])
    assert "FileExistsError" not in result.stdout.str() and "NotADirectoryError" not in result.stdout.str()
    assert path.read_text() == "not a folder"


def test_a_huge_pinned_checklist_is_said_with_what_it_costs(pytester: pytest.Pytester) -> None:
    """A 100,000-question pin took 200-400 s and wrote 74 MB without a word: a checklist over 1,000 questions is
    used, and a PinSizeWarning names its size and cost (here 1,200 questions, answered by the scripted judge)."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A."))
    pytester.runpytest("--bineval-update-checklists", "-k", "test_a").assert_outcomes(passed=1)
    pin_file = pytester.path / "__bineval__" / "test_suite" / "test_a.json"
    data = json.loads(pin_file.read_text())
    data["checklists"][0]["questions"] = [{"id": f"fluency-{i}", "dimension": "fluency", "text": f"Is point {i} "
                                           "fluent?"} for i in range(1200)]
    pin_file.write_text(json.dumps(data))
    result = pytester.runpytest("--bineval-strict", "-k", "test_a", "--bineval-cache=off", "-W", "default")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*PinSizeWarning: pinned checklist file {pin_file}: checklists[[]0[]] has 1,200 "
                                 "questions (more than 1,000): every evaluation with it asks the judge 1,200 of them "
                                 "(1,200 requests per output not in the cache, each within --bineval-timeout) and "
                                 "adds about 1 MB to the JSON report*"])


LONG = "test_" + "a_very_long_and_descriptive_name_" * 7  # 236 characters: legal, yet too long with the temp suffix


def test_a_long_test_name_gets_a_short_deterministic_pin_name(pytester: pytest.Pytester) -> None:
    """Bug: the pin file name was the test name: past the file system's limit (255 bytes, less the atomic
    writer's temporary suffix), a raw OSError failed the test under --bineval-update-checklists and --bineval-strict."""
    make_project(pytester)
    pytester.makepyfile(test_long=f'''
        import pytest
        from pytest_bineval import assert_passes

        @pytest.mark.bineval(task="Task L.")
        def {LONG}():
            assert_passes("output", dimension="fluency")
    ''')
    pytester.runpytest("--bineval-update-checklists").assert_outcomes(passed=1)
    (written,) = (pytester.path / "__bineval__" / "test_long").iterdir()
    assert written == pin_path(pytester.path / "test_long.py", LONG)
    assert len(written.name.encode()) <= MAX_PIN_NAME + len(".json")
    assert written.name.startswith(LONG[:80]) and written.name != f"{LONG}.json"
    pytester.runpytest("--bineval-strict").assert_outcomes(passed=1)


def test_pin_names_are_shortened_deterministically_and_stay_unique() -> None:
    base = Path("/p/test_m.py")
    one, two = pin_path(base, LONG), pin_path(base, LONG + "x")
    assert one == pin_path(base, LONG) and one != two
    assert len(pin_path(base, "test_é" * 100).name.encode()) <= MAX_PIN_NAME + 5  # multi-byte: cut on a character
    assert pin_path(base, "test_short[case-1]").name == "test_short.json"  # short names are unchanged


@pytest.mark.parametrize("link", ["folder", "file"])
def test_a_symlinked_pin_folder_or_file_outside_the_rootdir_is_refused(pytester: pytest.Pytester,
                                                                       tmp_path_factory: pytest.TempPathFactory,
                                                                       link: str) -> None:
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE.format(task_a="Task A."))
    outside = tmp_path_factory.mktemp("outside")
    if link == "folder":
        (pytester.path / "__bineval__").symlink_to(outside, target_is_directory=True)
        where = pytester.path / "__bineval__"
    else:
        (pytester.path / "__bineval__" / "test_suite").mkdir(parents=True)
        where = pytester.path / "__bineval__" / "test_suite" / "test_a.json"
        where.symlink_to(outside / "stolen.json")
    result = pytester.runpytest("--bineval-update-checklists", "-k", "test_a")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([f"*PinError: {where} is a symbolic link to {outside.resolve()}*, outside the "
                                 "rootdir*does not write pinned checklists through it*"])
    assert list(outside.iterdir()) == []


# -- bineval eval/align --checklist PIN_FILE -------------------------------------------------------------------
def _checklist(task: str) -> Checklist:
    return Checklist(task=task, dimensions={"fluency": "Reads well."},
                     questions=[Question(id="fluency-1", dimension="fluency", text=f"Is it fluent ({task})?")])


def test_bineval_eval_accepts_a_pin_file_and_chooses_its_entry(fake: ScriptedModel, cache_dir: Path,
                                                               tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "__bineval__" / "test_m" / "test_x.json"
    pin(path, _checklist("Task one."), "test_x[1]")
    (tmp_path / "out.txt").write_text("An output.")
    common = ["eval", "--checklist", str(path), "--output", str(tmp_path / "out.txt"), "--model", fake.model,
              "--cache-dir", str(cache_dir)]
    assert main(common) == 0  # one entry: no choice to make
    assert json.loads(capsys.readouterr().out)["verdicts"][0]["question"] == "Is it fluent (Task one.)?"

    pin(path, _checklist("Task two."), "test_x[2]")
    assert main(common) == 2
    err = capsys.readouterr().err
    assert f"bineval: error: {path} is a pin file with 2 matching checklists: choose one with --entry N" in err
    assert "--entry 2: [fluency] 'Task two.'" in err
    assert main([*common, "--entry", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["verdicts"][0]["question"] == "Is it fluent (Task two.)?"
    assert main([*common, "--task", "Task one."]) == 0
    assert json.loads(capsys.readouterr().out)["verdicts"][0]["question"] == "Is it fluent (Task one.)?"
    assert main([*common, "--entry", "3"]) == 2
    assert "has 2 entries, no entry 3" in capsys.readouterr().err


def test_bineval_eval_names_what_is_wrong_with_a_checklist_file(fake: ScriptedModel, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Bug: a file that is not a checklist printed pydantic's raw validation dump."""
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"task": "T", "dimensions": {"fluency": "x"}}))
    (tmp_path / "out.txt").write_text("An output.")
    assert main(["eval", "--checklist", str(bad), "--output", str(tmp_path / "out.txt"), "--model", fake.model]) == 2
    err = capsys.readouterr().err
    assert f"bineval: error: {bad} is not a valid checklist (questions: Field required)" in err
    assert "pydantic" not in err and "errors.pydantic.dev" not in err


def test_questions_digest_detects_an_edit() -> None:
    c = _checklist("T.")
    edited = c.model_copy(update={"questions": [Question(id="fluency-1", dimension="fluency", text="Other?")]})
    assert questions_digest(c) == questions_digest(_checklist("T.")) != questions_digest(edited)


def test_a_pin_without_a_generated_digest_counts_as_reviewed(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": 2, "checklists": [{**_checklist("T.").model_dump(mode="json"),
                                                             "tests": ["test_x"]}]}))
    (entry,) = PinFile.read(path).entries
    assert entry.edited  # written by hand (or before digests were recorded): never rewritten without =all


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


def test_parametrized_pins_keep_every_tasks_checklist(pytester: pytest.Pytester) -> None:
    """Bug: pin_path dropped the parameter id and put() replaced any checklist of the same dimensions, so only
    the last case's checklist survived --bineval-update-checklists and --bineval-strict failed the others."""
    make_project(pytester)
    pytester.makepyfile(test_cases=CASES)
    result = pytester.runpytest("--bineval-update-checklists")
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
    result = pytester.runpytest("--bineval-strict", "--bineval-report=report.json")
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
