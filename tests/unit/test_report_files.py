"""Hostile report and baseline files (issue 20): what is not a report, or not a valid one, is a usage error naming the
file and the place (``evaluations[3].dimensions[0].score``), never an INTERNALERROR, an OverflowError or an empty
baseline that lets ``--bineval-fail-on-regression`` pass whatever happens."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import PASS_AND_FAIL, Q, make_project, report_of

from pytest_bineval.cli import main
from pytest_bineval.errors import BinevalError, UsageError
from pytest_bineval.report.document import REPORT_KIND, ReportDocument

pytest_plugins = ["pytester"]


def record(test: str = "t.py::test_a", index: int = 0, score: Any = 0.5) -> dict[str, Any]:
    return {"test": test, "index": index, "task": "T", "model": "m", "checklist_status": "pinned",
            "outcome": "failed", "overall": 0.5,
            "dimensions": [{"name": "fluency", "score": score, "threshold": 0.8, "outcome": "failed"}],
            "verdicts": [{"question_id": "fluency-1", "dimension": "fluency", "question": "Fluent?", "answer": "no"}]}


def report(*records: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"format": 2, "kind": REPORT_KIND, "generator": "g", "settings": {}, "totals": {},
            "evaluations": list(records), **more}


DEEP = "[" * 100_000 + "]" * 100_000

# (file content, what the message must say: the place and what is wrong there)
BAD: dict[str, tuple[str, str]] = {
    "format-1 entry not an object": (json.dumps({"format": 1, "evaluations": [{"test": "t"}, 7]}),
                                     "evaluations[1] is a number, not an object"),
    "format-1 verdict not an object": (json.dumps({"format": 1, "evaluations": [{"test": "t", "verdicts": ["x"]}]}),
                                       "evaluations[0].verdicts[0]: Input should be a valid dictionary"),
    "format-1 evaluations not an array": (json.dumps({"format": 1, "evaluations": {"a": 1}}),
                                          "evaluations is an object, not an array"),
    "format-1 thresholds not numbers": (json.dumps({"format": 1, "evaluations": [{"test": "t", "thresholds":
                                                    {"fluency": "high"}}]}),
                                        "evaluations[0].thresholds.fluency is a string, not a number"),
    "nested 100,000 deep": (DEEP, "nested too deeply"),
    "nested 100,000 deep in an object": ('{"format": 2, "x": ' + DEEP + "}", "nested too deeply"),
    "Infinity score": (json.dumps(report(record(), record("t.py::test_b", score=float("inf")))),
                       "evaluations[1].dimensions[0].score is Infinity; a report holds finite numbers only"),
    "NaN score": (json.dumps(report(record(score=float("nan")))), "evaluations[0].dimensions[0].score is NaN"),
    "score too large for a float": (json.dumps(report(record())).replace('"score": 0.5', '"score": 1e999'),
                                    "evaluations[0].dimensions[0].score is Infinity"),
    "score outside [0, 1]": (json.dumps(report(record(score=1e308))),
                             "evaluations[0].dimensions[0].score is 1e+308, outside [0, 1]"),
    "a pinned-checklist file": (json.dumps({"format": 2, "checklists": []}),
                                "it looks like a pinned-checklist file"),
    "any object with format 2": (json.dumps({"format": 2}), "it has no \"kind\": 'bineval-report'"),
    "another kind": (json.dumps({**report(), "kind": "bineval-pins"}), "its \"kind\" is 'bineval-pins'"),
    "a duplicate evaluation": (json.dumps(report(record(), record("t.py::test_b"), record())),
                               "evaluations[2] repeats evaluations[0] (test 't.py::test_a', evaluation index 0)"),
    "a wrong field": (json.dumps(report({**record(), "outcome": "maybe"})), "evaluations[0].outcome: Input should"),
}


@pytest.mark.parametrize(("content", "message"), BAD.values(), ids=BAD.keys())
def test_a_bad_report_file_is_a_usage_error_naming_file_and_place(tmp_path: Path, content: str,
                                                                  message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        ReportDocument.load(path)
    assert str(path) in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize(("content", "message"), [BAD["Infinity score"], BAD["NaN score"],
                                                  BAD["nested 100,000 deep"], BAD["a duplicate evaluation"]],
                         ids=["Infinity", "NaN", "deep", "duplicate"])
def test_bineval_report_says_what_is_wrong(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                                           message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    assert main(["report", str(path), "--html", str(tmp_path / "out.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bineval: error: ") and str(path) in err and message in err
    assert not (tmp_path / "out.html").exists()
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report(record())), encoding="utf-8")
    assert main(["report", str(good), "--baseline", str(path), "--html", str(tmp_path / "out.html")]) == 2
    assert message in capsys.readouterr().err


def test_a_report_without_the_marker_is_read_when_it_has_a_reports_keys(tmp_path: Path) -> None:
    old = report(record())
    del old["kind"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    assert [r.test for r in ReportDocument.load(path).evaluations] == ["t.py::test_a"]
    two = report(record(), record(index=1))  # two evaluations of one test are two entries, not a duplicate
    path.write_text(json.dumps(two), encoding="utf-8")
    assert len(ReportDocument.load(path).evaluations) == 2


def test_a_written_report_says_what_it_is(pytester: pytest.Pytester) -> None:
    make_project(pytester)
    pytester.makepyfile(PASS_AND_FAIL)
    pytester.runpytest("--bineval-report=report.json", "-p", "no:cacheprovider")
    data = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert data["kind"] == REPORT_KIND and data["format"] == 2
    assert ReportDocument.load(pytester.path / "report.json").evaluations


@pytest.mark.parametrize("baseline", ["pin", "duplicate", "format-1 entry"])
def test_a_bad_baseline_is_a_usage_error_not_an_empty_baseline(pytester: pytest.Pytester, baseline: str) -> None:
    """A pinned-checklist file given as the baseline once passed --bineval-fail-on-regression whatever regressed."""
    make_project(pytester, no=(Q.format("consistency", 2),))
    pytester.makepyfile(PASS_AND_FAIL)
    content = {"pin": BAD["a pinned-checklist file"], "duplicate": BAD["a duplicate evaluation"],
               "format-1 entry": BAD["format-1 entry not an object"]}[baseline]
    (pytester.path / "baseline.json").write_text(content[0], encoding="utf-8")
    result = pytester.runpytest("--bineval-baseline=baseline.json", "--bineval-fail-on-regression",
                                "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    err = result.stderr.str()
    assert "INTERNALERROR" not in err + result.stdout.str()
    assert "baseline.json" in err and content[1] in err


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
