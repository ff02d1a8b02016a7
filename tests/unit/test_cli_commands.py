"""The ``bineval`` command's gates and messages: ``eval --threshold`` (the plugin's syntax; exit 1 below, 2 on a
judge error), ``eval --help`` without the options only criteria generation reads (``--qworld-*``), and
``report`` printing the file it wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_bineval.cli import build_parser, main
from pytest_bineval.models import Checklist, Question
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing import ScriptedModel

CHECKLIST = Checklist(
    task="Summarize the article.",
    dimensions={"consistency": "Only facts of the article.", "fluency": "Well written."},
    questions=[Question(id="consistency-1", dimension="consistency", text="Are the facts right?"),
               Question(id="consistency-2", dimension="consistency", text="Are the names right?"),
               Question(id="fluency-1", dimension="fluency", text="Is it grammatical?")],
)


@pytest.fixture
def files(tmp_path: Path) -> list[str]:
    (tmp_path / "checklist.json").write_text(CHECKLIST.model_dump_json(), encoding="utf-8")
    (tmp_path / "out.txt").write_text("A summary.", encoding="utf-8")
    return ["--checklist", str(tmp_path / "checklist.json"), "--output", str(tmp_path / "out.txt")]


def _eval(fake: ScriptedModel, cache_dir: Path, files: list[str], *extra: str) -> int:
    return main(["eval", *files, "--model", fake.model, "--cache-dir", str(cache_dir), *extra])


def test_eval_threshold_passes_with_exit_0(fake: ScriptedModel, cache_dir: Path, files: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    fake.answers = {"Are the names right?": "no"}
    assert _eval(fake, cache_dir, files, "--threshold", "0.5") == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["thresholds"] == {"consistency": 0.5, "fluency": 0.5}
    assert data["below_threshold"] == []
    assert "bineval eval: consistency: 0.50 (threshold 0.50) ok" in captured.err


def test_eval_below_threshold_exits_1(fake: ScriptedModel, cache_dir: Path, files: list[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    fake.answers = {"Are the names right?": "no"}
    # the plugin's syntax: a default for every dimension, one named
    assert _eval(fake, cache_dir, files, "--threshold", "0.4,consistency=0.9") == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["thresholds"] == {"consistency": 0.9, "fluency": 0.4}
    assert data["below_threshold"] == ["consistency"]
    assert "bineval eval: consistency: 0.50 (threshold 0.90) FAIL" in captured.err
    assert "bineval eval: fluency: 1.00 (threshold 0.40) ok" in captured.err


def test_eval_unnamed_dimensions_get_their_defaults(fake: ScriptedModel, cache_dir: Path, files: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    fake.answers = {"Is it grammatical?": "no"}
    assert _eval(fake, cache_dir, files, "--threshold", "consistency=1") == 1
    data = json.loads(capsys.readouterr().out)
    assert data["thresholds"] == {"consistency": 1.0, "fluency": 0.7}  # fluency's default
    assert data["below_threshold"] == ["fluency"]


def test_eval_without_threshold_has_no_gate(fake: ScriptedModel, cache_dir: Path, files: list[str],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    fake.answers = {"Are the facts right?": "no", "Are the names right?": "no", "Is it grammatical?": "no"}
    assert _eval(fake, cache_dir, files) == 0
    assert "thresholds" not in json.loads(capsys.readouterr().out)


def test_eval_judge_error_exits_2_even_with_a_threshold(fake: ScriptedModel, cache_dir: Path, files: list[str],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    fake.answers = {"Are the facts right?": "not json"}
    assert _eval(fake, cache_dir, files, "--threshold", "0", "--retries", "0") == 2
    captured = capsys.readouterr()
    assert json.loads(captured.out)["errors"] == 1
    assert "got no answer from the judge (judge errors; exit 2)" in captured.err
    assert "bineval eval: consistency: 1.00 (threshold 0.00) error" in captured.err


def test_eval_threshold_key_that_names_no_dimension(fake: ScriptedModel, cache_dir: Path, files: list[str],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert _eval(fake, cache_dir, files, "--threshold", "consistncy=0.9") == 2
    err = capsys.readouterr().err
    assert "names a dimension this assertion does not check" in err and "consistency" in err
    assert fake.requests == []  # refused before any request


def test_eval_bad_threshold_is_an_argparse_error(files: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["eval", *files, "--threshold", "1.5"])
    assert exc.value.code == 2
    assert "thresholds are shares of yes answers within [0, 1]" in capsys.readouterr().err


def _help(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    return str(sub.choices[command].format_help())  # type: ignore[attr-defined]


def test_eval_help_hides_the_qworld_options_and_lists_the_gate() -> None:
    text = _help("eval")
    assert "--qworld" not in text
    assert "--threshold" in text and "--model" in text
    assert "--qworld-widths" in _help("checklist")  # where they apply, they stay


def test_report_prints_the_path_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ReportDocument().write(tmp_path / "report.json")
    monkeypatch.chdir(tmp_path)
    assert main(["report", "report.json", "--html", "out/page.html"]) == 0
    out = capsys.readouterr().out
    written = tmp_path / "out" / "page.html"
    assert written.is_file()
    assert out.startswith(f"wrote {written}: 0 evaluations")
