"""Know your judge on the real embedded judge: a run of a small project (a pinned hand-written checklist, three
summaries, one of them wrong), labels given in the terminal (``bineval label`` with piped answers: what a person
knows of each summary), ``bineval calibrate``, a run with ``--bineval-labels``, and ``bineval lint`` on the run.
What the 135M judge answers is not asserted (it is close to a coin flip); that its answers are compared with the
labels, counted and shown is."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from support import REAL_CHECKLIST

from pytest_bineval.cli import main
from pytest_bineval.labels import read_labels
from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]

ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."
SUMMARIES = {
    "right": "Lyon opened a 40 million euro bridge on Monday.",
    "wrong_number": "Lyon opened a 90 million euro bridge on Monday.",
    "no_city": "A bridge costing 40 million euros opened on Monday.",
}
# what a person answers to each question of REAL_CHECKLIST about each summary
TRUTH = {
    "right": ["yes", "yes", "yes"],
    "wrong_number": ["yes", "no", "yes"],
    "no_city": ["no", "yes", "yes"],
}
SUITE = f'''
import pytest
from pytest_bineval import assert_passes

SUMMARIES = {SUMMARIES!r}

@pytest.mark.parametrize("name", sorted(SUMMARIES))
@pytest.mark.bineval(task={REAL_CHECKLIST["task"]!r},
                     dimensions=[{{"consistency": "The summary states only facts from the article."}}])
def test_summary(name):
    assert_passes(SUMMARIES[name], source={ARTICLE!r}, threshold=0.0)
'''


@pytest.mark.local_model
def test_label_calibrate_and_a_labelled_run_on_the_embedded_judge(pytester: pytest.Pytester, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    pin = pytester.path / "__bineval__" / "test_real" / "test_summary.json"
    pin.parent.mkdir(parents=True)
    pin.write_text(json.dumps({"format": 1, "checklists": [REAL_CHECKLIST]}))
    pytester.makepyfile(test_real=SUITE)
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    cache = f"--bineval-cache-dir={tmp_path / 'cache'}"
    first = pytester.runpytest_inprocess("--bineval-strict", "--bineval-report=run.json", cache)
    first.assert_outcomes(passed=3)
    report = ReportDocument.load(pytester.path / "run.json")
    assert {r.model for r in report.evaluations} == {"bineval/smollm2-135m-instruct"}

    # the person's answers, in the order bineval label asks (its seeded order), from what they know
    labels = pytester.path / "labels.jsonl"
    from pytest_bineval.labelling import candidates

    todo = candidates(report.evaluations, [], per_output=3, limit=9)
    assert len(todo) == 9
    questions = [q["text"] for q in REAL_CHECKLIST["questions"]]
    answers = [TRUTH[rec.test.split("[")[1].rstrip("]")][questions.index(v.question)] for rec, v in todo]
    monkeypatch.chdir(pytester.path)
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(f"{a[0]}\n" for a in answers)))
    assert main(["label", "run.json", "--labels", str(labels), "--per-output", "3", "--labeler", "test"]) == 0
    assert "9 labels written" in capsys.readouterr().out
    assert [x.label.answer for x in read_labels(labels)] == answers

    assert main(["calibrate", "run.json", "--labels", str(labels)]) == 0
    out = capsys.readouterr().out
    assert "9 labels: 9 used, 0 stale" in out and "| consistency " in out
    judged = [v.answer for _, v in todo]
    agreed = sum(a == j for a, j in zip(answers, judged, strict=True))
    assert f"({agreed}/9)" in next(line for line in out.splitlines() if line.startswith("| consistency "))
    failing = main(["calibrate", "run.json", "--labels", str(labels), "--min-kappa", "1"])
    assert failing == (0 if agreed == 9 else 1)  # only a perfect judge clears a bar of 1

    second = pytester.runpytest_inprocess("--bineval-labels=labels.jsonl", "--bineval-report=labelled.json",
                                          "--bineval-pr-comment=pr.md", cache)
    second.assert_outcomes(passed=3)
    second.stdout.fnmatch_lines(["*= bineval judge =*", "judge vs labels of labels.jsonl: 9 labels: 9 used, 0 stale*",
                                 f"    consistency: kappa *, agreement * ({agreed}/9), *"])
    calibration = ReportDocument.load(pytester.path / "labelled.json").calibration
    assert calibration is not None and calibration.used == 9 and len(calibration.disagreements) == 9 - agreed
    comment = (pytester.path / "pr.md").read_text()  # the PR comment carries the same figures
    assert "### The judge against your labels" in comment and "`labels.jsonl`: 9 labels: 9 used" in comment
    assert "| consistency | 9 " in comment

    # lint over the pin and the run's report on the real judge: it changes nothing, and fails exactly when it finds
    code = main(["lint", "__bineval__", "--report", "run.json", "--json", "lint.json"])
    findings = json.loads((pytester.path / "lint.json").read_text())["findings"]
    assert code == (1 if findings else 0), findings
    assert "nothing was changed" in capsys.readouterr().out
