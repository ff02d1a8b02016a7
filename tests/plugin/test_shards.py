"""``bineval report merge``: the reports of the shards of one suite become the report of one run (the ledger merge
pytest-xdist uses), and ``bineval report`` renders and gates the merged report as a single run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import make_project, report_of

from pytest_bineval.cli import main
from pytest_bineval.models import Evaluation, Question, Usage, Verdict
from pytest_bineval.report.document import ReportDocument, ReportSettings, Totals
from pytest_bineval.report.record import Asked, EvaluationRecord, JudgedBy

# Two tasks (no checklist shared by the shards: each shard generates its own), a failing evaluation, a parametrized
# test split across the shards by -k, and a test that errors before any evaluation (unscored).
SUITE = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.parametrize("i", range(3))
@pytest.mark.bineval(task="Summarize the alpha article.")
def test_alpha(i):
    assert_passes(f"alpha summary {i}", dimension="fluency", source="An article.")

@pytest.mark.parametrize("i", range(2))
@pytest.mark.bineval(task="Summarize the beta article.")
def test_beta(i):
    assert_passes(f"beta summary {i}", dimension=["consistency", "fluency"], source="An article.")

def test_no_task():
    assert_passes("an output with no task anywhere", dimension="fluency")
'''


def _run(pytester: pytest.Pytester, report: str, *args: str) -> None:
    pytester.runpytest(f"--bineval-report={report}", f"--bineval-cache-dir=cache-{report}", *args)


def _comparable(document: ReportDocument) -> tuple[list[dict[str, Any]], dict[str, Any], list[str], list[str]]:
    """What a merged report must share with the unsplit run's: records (by key; request seconds vary), totals,
    unscored and failed tests."""
    records = []
    for rec in sorted(document.evaluations, key=lambda r: r.key):
        data = rec.model_dump(mode="json")
        data["usage"]["seconds"] = 0.0
        records.append(data)
    return (records, document.totals.model_dump(mode="json"), sorted(u.test for u in document.unscored),
            document.failed_tests)


def test_merged_shards_are_the_unsplit_run(pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str]) -> None:
    make_project(pytester, no=("Does the response meet consistency check 1?",))
    pytester.makepyfile(test_suite=SUITE)
    _run(pytester, "all.json")
    _run(pytester, "a.json", "-k", "alpha")
    _run(pytester, "b.json", "-k", "not alpha")
    whole, a, b = (report_of(pytester, n) for n in ("all.json", "a.json", "b.json"))
    assert (len(a.evaluations), len(b.evaluations)) == (3, 2)  # the split is a real one
    assert main(["report", "merge", str(pytester.path / "a.json"), str(pytester.path / "b.json"),
                 "-o", str(pytester.path / "merged.json")]) == 0
    printed = capsys.readouterr().out
    assert "2 shard reports, 5 evaluations (3 passed, 2 below threshold, 0 judge error)" in printed
    merged = report_of(pytester, "merged.json")
    assert _comparable(merged) == _comparable(whole)
    assert merged.totals.llm_calls == a.totals.llm_calls + b.totals.llm_calls > 0
    assert merged.checklists.generated == whole.checklists.generated == 2
    assert merged.checklists.usage.model_copy(update={"seconds": 0.0}) == whole.checklists.usage.model_copy(
        update={"seconds": 0.0})
    assert not merged.partial and merged.judge().prompt_version == whole.judge().prompt_version != ""
    # the merged report renders as the single run's does
    assert main(["report", str(pytester.path / "merged.json"), "--html", str(pytester.path / "merged.html")]) == 0
    assert "5 evaluations (3 passed, 2 below threshold, 0 judge error), 1 test not scored" in capsys.readouterr().out


def test_bineval_report_of_a_subset_run_calls_the_others_not_run(pytester: pytest.Pytester,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Bug: ``bineval report SUBSET.json --baseline BASE.json`` called every baseline test a ``-k`` subset did not
    run "removed" (the report did not keep which tests ran), where the run's own --bineval-baseline said "not run";
    a test deleted from a collected file is still removed."""
    make_project(pytester)
    pytester.makepyfile(test_suite=SUITE)
    _run(pytester, "base.json")
    _run(pytester, "sub.json", "-k", "alpha")
    sub = report_of(pytester, "sub.json")
    assert sub.ran_tests is not None and len(sub.ran_tests) == 3 and len(sub.collected_tests or ()) == 6
    comment = pytester.path / "comment.md"
    assert main(["report", str(pytester.path / "sub.json"), "--baseline", str(pytester.path / "base.json"),
                 "--pr-comment", str(comment), "--github", "off"]) == 0
    assert "3 evaluations compared, 0 added, 0 removed, 2 not run." in comment.read_text(encoding="utf-8")
    pytester.makepyfile(test_suite=SUITE.replace('range(2)', 'range(1)'))  # test_beta[1] deleted
    _run(pytester, "less.json")
    assert main(["report", str(pytester.path / "less.json"), "--baseline", str(pytester.path / "base.json"),
                 "--pr-comment", str(comment), "--github", "off"]) == 0
    assert "4 evaluations compared, 0 added, 1 removed, 0 not run." in comment.read_text(encoding="utf-8")
    capsys.readouterr()


def test_pytest_split_groups_one_under_xdist_merge_to_the_unsplit_run(pytester: pytest.Pytester) -> None:
    """The sharded example workflow's split: pytest-split groups (without durations: equal counts, in order), a
    group run with -n 2 (its workers' ledgers merged first), then the groups' reports merged."""
    make_project(pytester, no=("Does the response meet consistency check 1?",))
    pytester.makepyfile(test_suite=SUITE)
    _run(pytester, "all.json")
    pytester.runpytest("-p", "xdist", "-n", "2", "--splits", "2", "--group", "1", "--bineval-report=g1.json",
                       "--bineval-cache-dir=cache-g1")
    _run(pytester, "g2.json", "--splits", "2", "--group", "2")
    g1, g2 = report_of(pytester, "g1.json"), report_of(pytester, "g2.json")
    assert [len(g.evaluations) for g in (g1, g2)] == [3, 2]
    assert main(["report", "merge", str(pytester.path / "g1.json"), str(pytester.path / "g2.json"),
                 "-o", str(pytester.path / "merged.json"), "--expect", "2"]) == 0
    merged, whole = _comparable(report_of(pytester, "merged.json")), _comparable(report_of(pytester, "all.json"))
    spent = ("llm_calls", "cache_hits", "prompt_tokens", "completion_tokens", "unpriced_requests", "cost_usd")
    for totals in (merged[1], whole[1]):  # what group 1's two workers spend on its checklist varies (cache hits)
        for name in spent:
            del totals[name]
    assert merged == whole


# -- hand-made shard reports ---------------------------------------------------------------------------------------

def _record(test: str, answer: str = "yes") -> EvaluationRecord:
    q = Question(id="fluency-1", dimension="fluency", text="Is it fluent?")
    verdict = Verdict(question_id=q.id, dimension="fluency", question=q.text, answer=answer,  # type: ignore[arg-type]
                      explanation=f"scripted {answer}")
    ev = Evaluation(task="T", model="m", dimensions=["fluency"], verdicts=[verdict])
    return EvaluationRecord.build(Asked(), ev, [q], thresholds={"fluency": 0.5}, status="pinned", test=test)


def _shard(path: Path, *records: EvaluationRecord, model: str = "m", prompt_version: str = "7", stream: str = "auto",
           **fields: Any) -> str:
    usage = Usage(llm_calls=len(records), prompt_tokens=10 * len(records))
    ReportDocument(settings=ReportSettings(model=model),
                   judged_by=JudgedBy(model=model, prompt_version=prompt_version, stream=stream),
                   totals=Totals.of(records, usage), evaluations=list(records), **fields).write(path)
    return str(path)


def test_a_test_in_two_shards_is_an_error_naming_both_files(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    a = _shard(tmp_path / "a.json", _record("t.py::test_x"), _record("t.py::test_y"))
    b = _shard(tmp_path / "b.json", _record("t.py::test_y"))
    assert main(["report", "merge", a, b, "-o", str(tmp_path / "merged.json")]) == 2
    err = capsys.readouterr().err
    assert f"the test 't.py::test_y' is in two shard reports, {a} and {b}" in err
    assert not (tmp_path / "merged.json").exists()


def test_a_shard_report_given_twice_is_an_error_not_a_double_count(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """``bineval report merge a.json a.json`` once wrote a report with every evaluation of a.json twice."""
    a = _shard(tmp_path / "a.json", _record("t.py::test_x"))
    b = _shard(tmp_path / "b.json", _record("t.py::test_y"))
    assert main(["report", "merge", a, b, a, "-o", str(tmp_path / "merged.json")]) == 2
    err = capsys.readouterr().err
    assert f"{a} is given twice (shard reports 1 and 3): give each shard's report once" in err
    assert not (tmp_path / "merged.json").exists()


@pytest.mark.parametrize("target", ["same", "relative", "link"])
def test_the_output_may_not_be_one_of_the_shards(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch, target: str) -> None:
    """``bineval report merge a.json b.json -o a.json`` exited 0 and overwrote a shard (``cache merge`` refuses
    the same): a usage error naming it, nothing written, whether -o is the same path, another spelling of it, or a
    link to it."""
    a = _shard(tmp_path / "a.json", _record("t.py::test_x"))
    b = _shard(tmp_path / "b.json", _record("t.py::test_y"))
    before = Path(a).read_bytes()
    out = a
    if target == "relative":
        monkeypatch.chdir(tmp_path)
        out = "./sub/../a.json"
        (tmp_path / "sub").mkdir()
    elif target == "link":
        (tmp_path / "link.json").symlink_to(a)
        out = str(tmp_path / "link.json")
    assert main(["report", "merge", a, b, "-o", out]) == 2
    err = capsys.readouterr().err
    assert f"bineval: error: {a} is both a shard report and the output (-o): the merge would overwrite a shard" in err
    assert Path(a).read_bytes() == before


@pytest.mark.parametrize(("change", "said"), [
    ({"model": "other/judge"}, "has judge model (--bineval-model) 'm', {b} has 'other/judge'"),
    ({"prompt_version": "8"}, "has packaged prompt version '7', {b} has '8'"),
    ({"stream": "off"}, "has --bineval-stream auto, {b} has --bineval-stream off"),
])
def test_shards_judged_differently_are_an_error_naming_both(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            change: dict[str, str], said: str) -> None:
    a = _shard(tmp_path / "a.json", _record("t.py::test_x"))
    b = _shard(tmp_path / "b.json", _record("t.py::test_y"), **change)
    assert main(["report", "merge", a, b, "-o", str(tmp_path / "merged.json")]) == 2
    err = capsys.readouterr().err
    assert f"the shard reports were not judged alike: {a} " in err and said.format(b=b) in err
    assert not (tmp_path / "merged.json").exists()


def test_a_partial_or_missing_shard_makes_the_merged_report_partial(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    a = _shard(tmp_path / "a.json", _record("t.py::test_x"))
    b = _shard(tmp_path / "b.json", _record("t.py::test_y"), partial=True, partial_reason="stopping after 1 failures")
    out = tmp_path / "merged.json"
    assert main(["report", "merge", a, b, "-o", str(out), "--expect", "3"]) == 0
    merged = ReportDocument.load(out)
    assert merged.partial
    assert merged.partial_reason == f"1 of 3 shard reports missing; shard {b}: stopping after 1 failures"
    assert "the merged report is partial (1 of 3 shard reports missing" in capsys.readouterr().err
    assert main(["report", "merge", a, "-o", str(out)]) == 0
    assert "1 shard report, 1 evaluation (1 passed" in capsys.readouterr().out
    assert not ReportDocument.load(out).partial  # a complete shard, nothing expected: complete
    assert main(["report", "merge", a, b, "-o", str(out), "--expect", "1"]) == 2
    assert "2 shard reports given, but --expect says the suite has 1 shards" in capsys.readouterr().err


def test_merged_report_gates_and_writes_the_summary_and_the_pr_comment(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    base = _shard(tmp_path / "base.json", _record("t.py::test_x"), _record("t.py::test_y"))
    a = _shard(tmp_path / "a.json", _record("t.py::test_x"))
    b = _shard(tmp_path / "b.json", _record("t.py::test_y", "no"), failed_tests=["t.py::test_y"])
    merged = str(tmp_path / "merged.json")
    assert main(["report", "merge", a, b, "-o", merged]) == 0
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    capsys.readouterr()
    comment = tmp_path / "comment.md"
    assert main(["report", merged, "--baseline", base, "--fail-on-regression=any", "--pr-comment", str(comment),
                 "--html", str(tmp_path / "merged.html")]) == 1
    out, err = capsys.readouterr()
    assert f"compared with {base}: 1 regressed question(s) (yes -> no)" in out
    gate = "1 regression and 1 score drop beyond tolerance 0.00 vs baseline"
    named = f"{gate} {base} (bineval report --fail-on-regression=any)"  # the gate named as the user gave it
    assert f"::error title=bineval%3A regressions against the baseline::{named}\n" in out
    assert "::error title=bineval%3A t.py%3A%3Atest_y below threshold::fluency 0.00 < 0.50" in out
    assert f"bineval report: failed: {named}" in err
    assert "(bineval report --fail-on-regression=any)" in summary.read_text(encoding="utf-8").split(
        "**Session failed**")[1]
    body = comment.read_text(encoding="utf-8")
    assert body.startswith("## bineval: no confirmed regression (1 flip of the judge's noise) · ")  # the outcome
    assert f"**The gate failed**: {gate} " in body  # and what =any fails on
    # the same comparison without the gate: exit 0; and a gate with nothing to compare with is a usage error
    assert main(["report", merged, "--baseline", base, "--github", "off"]) == 0
    # the bare gate acts on confirmed regressions: a flip of the same output is the judge's noise
    assert main(["report", merged, "--baseline", base, "--fail-on-regression", "--github", "off"]) == 0
    with pytest.raises(SystemExit) as exit_:
        main(["report", merged, "--baseline", base, "--fail-on-regression", "--alpha", "2"])
    assert exit_.value.code == 2 and "alpha is a significance level within (0, 1], not 2.0" in capsys.readouterr().err
    assert main(["report", a, "--baseline", a, "--fail-on-regression", "--github", "off"]) == 0
    capsys.readouterr()
    assert main(["report", merged, "--fail-on-regression", "--github", "off"]) == 2
    assert "--fail-on-regression needs a comparison: give --baseline BASE.json" in capsys.readouterr().err


def test_the_gate_of_bineval_report_names_its_own_option_not_the_pytest_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A report whose run compared with a baseline, gated again by ``bineval report --fail-on-regression``: every
    output (annotation, stderr) names that option, not the run's --bineval-fail-on-regression."""
    from pytest_bineval.report.comparison import diff_runs

    before, after = _record("t.py::test_x"), _record("t.py::test_x", "no")
    run = tmp_path / "run.json"
    ReportDocument(settings=ReportSettings(model="m"), evaluations=[after],
                   regressions=diff_runs([before], [after], baseline="base.json")).write(run)
    html = tmp_path / "run.html"
    assert main(["report", str(run), "--fail-on-regression=any", "--github", "on", "--html", str(html)]) == 1
    out, err = capsys.readouterr()
    named = "1 regression and 1 score drop beyond tolerance 0.00 vs baseline base.json (bineval report " \
            "--fail-on-regression=any)"
    assert f"regressions against the baseline::{named}" in out
    assert f"bineval report: failed: {named}" in err
    assert "--bineval-fail-on-regression" not in out + err
    # the run's own gate (--bineval-fail-on-regression failed it): shown, but rendering is not gating (exit 0)
    failed = ReportDocument.load(run)
    assert failed.regressions is not None
    failed.regressions.fail_on, failed.regressions.failed = "any", True
    failed.write(run)
    assert main(["report", str(run), "--github", "off", "--html", str(html)]) == 0
    assert ("bineval report: the run failed its gate: 1 regression and 1 score drop beyond tolerance 0.00 vs "
            "baseline base.json (--bineval-fail-on-regression=any); bineval report gates (exit 1) only with "
            "--fail-on-regression") in capsys.readouterr().err


@pytest.mark.parametrize(("option", "example"), [("--html", "bineval-report.html"),
                                                 ("--pr-comment", "bineval-comment.md")])
def test_bineval_report_refuses_a_directory_as_its_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               option: str, example: str) -> None:
    """Bug: ``bineval report R.json --html out/`` said only "bineval: error: [Errno 21] Is a directory:
    '/.tmp.909.d148a9f3.tmp' -> 'out'", naming neither the option nor the fix."""
    run = _shard(tmp_path / "run.json", _record("t.py::test_x"))
    out = tmp_path / "out"
    out.mkdir()
    assert main(["report", run, option, str(out), "--github", "off"]) == 2
    assert (f"bineval: error: {option} {out} is a directory; give the path of the file to write in it, e.g. "
            f"{option} {out / example}") in capsys.readouterr().err


def test_shards_own_baseline_comparisons_are_left_out_with_a_note(tmp_path: Path) -> None:
    from pytest_bineval.report.comparison import diff_runs

    rec = _record("t.py::test_x")
    a = tmp_path / "a.json"
    ReportDocument(settings=ReportSettings(model="m"), evaluations=[rec],
                   regressions=diff_runs([rec], [rec], baseline="base.json")).write(a)
    out = tmp_path / "merged.json"
    assert main(["report", "merge", str(a), "-o", str(out)]) == 0
    merged = json.loads(out.read_text(encoding="utf-8"))
    assert merged["regressions"] is None
    assert any("comparisons with a baseline" in n and "bineval report MERGED.json --baseline" in n
               for n in merged["notes"])
