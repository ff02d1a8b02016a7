"""--bineval-labels and --bineval-trust-kappa through pytester and the real terminal output, with a scripted fake
judge: the judge's agreement with the labels in the summary and the JSON report, stale labels said, and a regression
gate that acts only on the dimensions it trusts. In one process: the controller compares the merged records with
the labels (tests/plugin/test_xdist.py runs a project with labels under ``-n 2``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import ANSWERS_FILE_RULE

from pytest_bineval.cli import main
from pytest_bineval.labels import Label, append_labels
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

C1, C2 = "Does the response meet consistency check 1?", "Does the response meet consistency check 2?"
SUITE = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.parametrize("i", range(4))
@pytest.mark.bineval(task="Summarize the article.")
def test_summary(i):
    assert_passes(f"summary {i}", dimension=["consistency", "fluency"], threshold=0.0)
'''
# this run's judge: consistency check 1 is "no" for summaries 0 and 1, everything else "yes"
REGRESSED = {f"summary 0|{C1}": "no", f"summary 1|{C1}": "no"}


def project(pytester: pytest.Pytester, answers: dict[str, str]) -> None:
    scripted_project(pytester, provider="lfake", rule=ANSWERS_FILE_RULE, ini="bineval_cache = off")
    (pytester.path / "answers.json").write_text(json.dumps(answers))
    pytester.makepyfile(test_suite=SUITE)


def labels_of(report: ReportDocument, answer_of: dict[str, str]) -> list[Label]:
    """A label of every consistency verdict of ``report``: ``answer_of[question]`` when given, else the judge's."""
    return [Label.of(rec, v, answer_of.get(v.question, v.answer), labeler="ana")  # type: ignore[arg-type]
            for rec in report.evaluations for v in rec.verdicts if v.dimension == "consistency"]


def baseline_and_labels(pytester: pytest.Pytester, answer_of: dict[str, str]) -> None:
    """base.json (every answer yes), then this run's verdicts (REGRESSED) labelled into labels.jsonl."""
    project(pytester, {})
    assert pytester.runpytest("--bineval-report", "base.json").ret == 0
    (pytester.path / "answers.json").write_text(json.dumps(REGRESSED))
    assert pytester.runpytest("--bineval-report", "now.json").ret == 0
    append_labels(pytester.path / "labels.jsonl", labels_of(ReportDocument.load(pytester.path / "now.json"),
                                                            answer_of))


def test_the_summary_and_report_show_the_judges_agreement_with_the_labels(pytester: pytest.Pytester) -> None:
    baseline_and_labels(pytester, {C2: "no"})  # people say check 2 fails everywhere; the judge said yes
    stale = Label(test="test_suite.py::test_summary[0]", question=C1, answer="no", output_digest="0" * 16)
    gone = Label(test="test_suite.py::test_removed", question=C1, answer="yes")
    append_labels(pytester.path / "labels.jsonl", [stale, gone])
    result = pytester.runpytest("--bineval-labels", "labels.jsonl", "--bineval-report", "run.json")
    assert result.ret == 0
    result.stdout.re_match_lines([
        r"=+ bineval judge =+",
        r"judge vs labels of labels\.jsonl: 10 labels: 7 used, 1 stale, 1 not in this report, 1 superseded, "
        r"0 of judge errors",
        # used: C1 of summaries 1-3 labelled as judged (no, yes, yes; summary 0's label is superseded by the stale
        # one), C2 labelled no and judged yes 4 times: yes/yes 2, no/no 1, no/yes 4; p_e = (2 * 6 + 5 * 1) / 49
        r"    consistency: kappa 0\.12 \[.*\], agreement 0\.43 \[.*\] \(3/7\), TPR 1\.00 .* \(2/2\), TNR 0\.20 .* "
        r"\(1/5\), base rate 0\.29 \(2/7\)",
        r"    DISAGREES test_suite\.py::test_summary\[\d\] \[consistency\] Does the response meet consistency check "
        r"2\?: judge yes, label no",
    ], consecutive=False)
    result.stdout.fnmatch_lines(["*STALE label, line 9: test_suite.py::test_summary[[]0] *: the output changed since "
                                 "it was labelled*"])
    calibration = ReportDocument.load(pytester.path / "run.json").calibration
    assert calibration is not None and calibration.used == 7 and calibration.labels_file == "labels.jsonl"
    assert [d.dimension for d in calibration.dimensions] == ["consistency"]
    assert len(calibration.disagreements) == 4 and calibration.trust_kappa is None


def test_the_labels_are_read_before_any_test_runs(pytester: pytest.Pytester) -> None:
    project(pytester, {})
    result = pytester.runpytest("--bineval-labels", "nope.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bineval-labels nope.jsonl: there is no such file*bineval label REPORT.json*"])
    (pytester.path / "bad.jsonl").write_text('{"test": "t", "question": "Q?", "answer": "perhaps"}\n')
    result = pytester.runpytest("--bineval-labels", "bad.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bineval-labels: *bad.jsonl, line 1: not a label (answer*"])
    result = pytester.runpytest("--bineval-trust-kappa", "0.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bineval-trust-kappa needs --bineval-labels FILE*"])
    result = pytester.runpytest("--bineval-trust-kappa", "1.5")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*a kappa is within [[]-1, 1], not 1.5*"])


def test_the_gate_acts_on_a_trusted_dimension(pytester: pytest.Pytester) -> None:
    baseline_and_labels(pytester, {})  # people agree with every consistency verdict: kappa 1
    result = pytester.runpytest("--bineval-labels", "labels.jsonl", "--bineval-trust-kappa", "0.6",
                                "--bineval-baseline", "base.json", "--bineval-fail-on-regression=any")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines([
        "bineval: session failed: 2 regressions and 2 score drops beyond tolerance 0.00 vs baseline base.json "
        "(--bineval-fail-on-regression=any)",
        "gate: trusts only dimensions with kappa >= 0.60 (--bineval-trust-kappa); not trusted: fluency (no usable "
        "label)",
    ], consecutive=False)


def test_the_gate_does_not_act_on_a_dimension_it_does_not_trust(pytester: pytest.Pytester,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    baseline_and_labels(pytester, {C1: "yes"})  # people say the judge's two "no" are wrong: kappa 0
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(pytester.path / "summary.md"))
    result = pytester.runpytest("--bineval-labels", "labels.jsonl", "--bineval-trust-kappa", "0.6",
                                "--bineval-baseline", "base.json", "--bineval-fail-on-regression=any",
                                "--bineval-report", "r.json", "--bineval-pr-comment", "pr.md")
    assert result.ret == 0
    result.stdout.fnmatch_lines([
        "REGRESSION test_suite.py::test_summary[[]0] [[]consistency] *: yes -> no*",
        "gate: trusts only dimensions with kappa >= 0.60 (--bineval-trust-kappa); not trusted: consistency (kappa "
        "0.00 < 0.60 on 8 labels); fluency (no usable label)",
    ], consecutive=False)
    assert "session failed" not in result.stdout.str()
    document = ReportDocument.load(Path(pytester.path, "r.json"))
    assert document.regressions is not None and not document.regressions.failed
    assert set(document.regressions.untrusted) == {"consistency", "fluency"}
    assert document.totals.regressions == 2  # shown and counted, not gated
    # the PR comment and the job summary say how far the judge agrees with the labels, and what the gate left out
    for name in ("pr.md", "summary.md"):
        text = (pytester.path / name).read_text()
        assert "### The judge against your labels" in text, name
        assert "`labels.jsonl`: 8 labels: 8 used" in text, name
        assert "| consistency | 8 " in text, name
        assert ("**The gate trusts only dimensions with kappa >= 0.60** (`--bineval-trust-kappa`); not trusted, shown "
                "but never failing: consistency (kappa 0.00 < 0.60 on 8 labels); fluency (no usable label).") in text
    # the report's own trust decision holds when the report is gated again against the baseline
    assert main(["report", "r.json", "--baseline", "base.json", "--fail-on-regression=any"]) == 0
    assert main(["report", "now.json", "--baseline", "base.json", "--fail-on-regression=any"]) == 1
