"""The judge against labels (pytest_bineval.calibrate) and the commands ``bineval calibrate`` and ``bineval
label``: figures per dimension and per question on a crafted report whose tables are known, exit codes of
--min-kappa, several judges side by side, terminal labelling from piped input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from labelled import document, label, record

from pytest_bineval.agreement import Agreement, Table
from pytest_bineval.calibrate import calibrate, calibration_text, side_by_side, summary_lines
from pytest_bineval.cli import main
from pytest_bineval.labels import Label, append_labels, parse_labels, read_labels
from pytest_bineval.report.record import EvaluationRecord

QUESTIONS = [f"Does the summary keep fact {i}?" for i in range(4)]
FLUENT = "Is the summary free of grammar errors?"
# (label, judge) of the 20 consistency verdicts: the table of test_agreement.HAND (kappa 0.694)
PAIRS = [("yes", "yes")] * 7 + [("yes", "no")] + [("no", "yes")] * 2 + [("no", "no")] * 10


def crafted(judge: str = "judge/a", flip_all_yes: bool = False) -> tuple[list[EvaluationRecord], list[Label]]:
    """5 evaluations x 4 consistency questions labelled as PAIRS, and one fluency question each, labelled yes and
    judged yes (kappa undefined); ``flip_all_yes``: a judge that answers yes to everything, same labels."""
    records, labels = [], []
    for e in range(5):
        pairs = PAIRS[e * 4:(e + 1) * 4]
        answers = {q: ("yes" if flip_all_yes else judged) for q, (_, judged) in zip(QUESTIONS, pairs, strict=True)}
        answers[FLUENT] = "yes"
        rec = record(f"tests/test_s.py::test_summary[{e}]", answers, output=f"summary {e}", model=judge,
                     dimensions={FLUENT: "fluency"}, explanations={QUESTIONS[0]: f"judge's reason {e}"})
        records.append(rec)
        labels += [label(rec, q, lab, labeler="ana") for q, (lab, _) in zip(QUESTIONS, pairs, strict=True)]
        labels.append(label(rec, FLUENT, "yes"))
    return records, labels


def lines_of(labels: list[Label]) -> list:  # type: ignore[type-arg]
    return parse_labels("".join(x.to_line() for x in labels), "labels.jsonl")


def test_per_dimension_figures_are_those_of_the_hand_computed_table() -> None:
    records, labels = crafted()
    cal = calibrate(records, lines_of(labels), "labels.jsonl")
    assert [d.dimension for d in cal.dimensions] == ["consistency", "fluency"]
    consistency = cal.dimension("consistency")
    assert consistency is not None
    assert consistency.stats == Agreement.of(Table(7, 1, 2, 10))
    assert consistency.stats.kappa == pytest.approx(0.34 / 0.49)
    fluency = cal.dimension("fluency")
    assert fluency is not None and fluency.stats.labels == 5 and fluency.stats.kappa is None
    assert cal.overall.labels == 25 and cal.used == 25 and cal.labels == 25 and not cal.issues
    assert cal.judge == ["judge/a"]


def test_per_question_figures_group_the_same_question_over_every_output() -> None:
    records, labels = crafted()
    cal = calibrate(records, lines_of(labels), "labels.jsonl")
    consistency = cal.dimension("consistency")
    assert consistency is not None
    assert sorted(q.question for q in consistency.questions) == sorted(QUESTIONS)
    assert all(q.stats.labels == 5 for q in consistency.questions)
    values = [q.stats.agreement.value for q in consistency.questions]
    assert values == sorted(values)  # lowest agreement first
    by_text = {q.question: q.stats for q in consistency.questions}
    expected = Table.of([PAIRS[e * 4 + 1] for e in range(5)])  # question 1 over the 5 outputs
    assert by_text[QUESTIONS[1]] == Agreement.of(expected)


def test_disagreements_carry_the_judges_explanation_and_the_labels_note() -> None:
    records, labels = crafted()
    labels[0] = labels[0].model_copy(update={"answer": "no", "note": "fact 0 is wrong"})  # now a disagreement
    cal = calibrate(records, lines_of(labels), "labels.jsonl")
    assert len(cal.disagreements) == 4
    first = cal.disagreements[0]
    assert (first.key, first.judge, first.label, first.line) == ("tests/test_s.py::test_summary[0]", "yes", "no", 1)
    assert first.explanation == "judge's reason 0" and first.note == "fact 0 is wrong" and first.labeler == "ana"
    text = "\n".join(calibration_text(cal, title="run.json"))
    assert "judge's reason 0" in text and "fact 0 is wrong" in text and "disagreements (4):" in text


def test_the_bar_fails_dimensions_below_it_and_undefined_kappas() -> None:
    records, labels = crafted()
    cal = calibrate(records, lines_of(labels), "labels.jsonl")
    assert cal.below(0.6) == ["fluency: kappa undefined on 5 labels (one answer only), so not >= 0.60"]
    assert cal.below(0.7)[0] == "consistency: kappa 0.69 < 0.70 on 20 labels"


def test_stale_labels_are_listed_in_the_text_and_left_out_of_the_figures() -> None:
    records, labels = crafted()
    moved = labels[0].model_copy(update={"output_digest": "0" * 16})
    cal = calibrate(records, lines_of([moved, *labels[1:]]), "labels.jsonl")
    assert cal.used == 24 and cal.count("stale") == 1
    text = "\n".join(calibration_text(cal))
    assert "STALE label, line 1: tests/test_s.py::test_summary[0]" in text and "the output changed" in text
    assert "25 labels: 24 used, 1 stale, 0 not in this report, 0 superseded, 0 of judge errors" in text
    assert any("STALE label, line 1" in t for t, _ in summary_lines(cal))


def test_the_text_is_a_markdown_table_per_dimension_and_per_question() -> None:
    records, labels = crafted()
    text = calibration_text(calibrate(records, lines_of(labels), "labels.jsonl"), title="run.json")
    assert text[0].startswith("run.json (judge/a) against labels.jsonl: 25 labels: 25 used")
    head = next(line for line in text if line.startswith("| dimension "))
    assert "| kappa " in head and "| TPR (judge yes / label yes) " in head and head.count("|") == 8
    row = next(line for line in text if line.startswith("| consistency "))
    assert "0.85 [0.64, 0.95] (17/20)" in row and "0.69 [" in row and "0.88 [0.53, 0.98] (7/8)" in row
    assert "0.83 [0.55, 0.95] (10/12)" in row and "0.40 (8/20)" in row
    assert any(line.startswith("| all ") for line in text) and "per question (lowest agreement first):" in text


def test_several_judges_side_by_side() -> None:
    records, labels = crafted()
    yes_men, _ = crafted(judge="judge/b", flip_all_yes=True)
    lines = lines_of(labels)
    table = side_by_side([("a.json", calibrate(records, lines, "l")), ("b.json", calibrate(yes_men, lines, "l"))])
    assert "a.json (judge/a)" in table[0] and "b.json (judge/b)" in table[0]
    row = next(line for line in table if line.startswith("| consistency "))
    assert "kappa 0.69 [" in row and "TPR 1.00, TNR 0.00 (n=20)" in row


# -- the commands --------------------------------------------------------------------------------------------------


def write(tmp_path: Path, records: list[EvaluationRecord], labels: list[Label],
          name: str = "run.json") -> tuple[str, str]:
    report = tmp_path / name
    document(records).write(report)
    labels_file = tmp_path / "labels.jsonl"
    if not labels_file.exists():
        append_labels(labels_file, labels)
    return str(report), str(labels_file)


def test_calibrate_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records, labels = crafted()
    consistency_only = [x for x in labels if x.question != FLUENT]
    report, labels_file = write(tmp_path, records, consistency_only)
    assert main(["calibrate", report, "--labels", labels_file]) == 0
    out = capsys.readouterr().out
    assert "| consistency " in out and "per question" in out
    assert main(["calibrate", report, "--labels", labels_file, "--min-kappa", "0.6"]) == 0
    capsys.readouterr()
    assert main(["calibrate", report, "--labels", labels_file, "--min-kappa", "0.7", "--no-questions"]) == 1
    captured = capsys.readouterr()
    assert "below the bar: " + report + ": consistency: kappa 0.69 < 0.70 on 20 labels" in captured.err
    assert "per question" not in captured.out
    assert main(["calibrate", report, "--labels", str(tmp_path / "missing.jsonl")]) == 2
    assert "cannot read the labels file" in capsys.readouterr().err


def test_calibrate_fails_the_bar_when_no_label_is_usable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records, labels = crafted()
    others = [x.model_copy(update={"test": "tests/test_other.py::test_x"}) for x in labels[:3]]
    report, labels_file = write(tmp_path, records, others)
    assert main(["calibrate", report, "--labels", labels_file]) == 0
    assert "no label of" in capsys.readouterr().err
    assert main(["calibrate", report, "--labels", labels_file, "--min-kappa", "0"]) == 1
    assert "no usable label" in capsys.readouterr().err


def test_calibrate_puts_reports_side_by_side_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                             ) -> None:
    records, labels = crafted()
    a, labels_file = write(tmp_path, records, labels, "a.json")
    b, _ = write(tmp_path, crafted(judge="judge/b", flip_all_yes=True)[0], labels, "b.json")
    out_json = tmp_path / "cal.json"
    assert main(["calibrate", a, b, "--labels", labels_file, "--json", str(out_json), "--min-kappa", "0.5"]) == 1
    captured = capsys.readouterr()
    assert "side by side:" in captured.out and f"{b} (judge/b)" in captured.out
    assert f"{b}: consistency: kappa 0.00 < 0.50 on 20 labels" in captured.err
    body = json.loads(out_json.read_text())
    assert [r["report"] for r in body["reports"]] == [a, b]
    assert body["reports"][0]["calibration"]["dimensions"][0]["stats"]["labels"] == 20


def test_calibrate_rejects_a_bad_bar(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["calibrate", "r.json", "--labels", "l", "--min-kappa", "2"])
    assert "a kappa is within [-1, 1], not 2.0" in capsys.readouterr().err


def test_label_command_reads_piped_answers_and_appends_each_label(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "Fine.\x1b[2J\x1b[31mRED\u202e"
    rec = record("tests/test_s.py::test_a", {QUESTIONS[0]: "yes", QUESTIONS[1]: "no", QUESTIONS[2]: "yes",
                                             QUESTIONS[3]: "error"}, output=hostile)
    report, labels_file = write(tmp_path, [rec], [])
    monkeypatch.setattr("sys.stdin", io.StringIO("a\nwhat\nd   the date is wrong\ns\n"))
    assert main(["label", report, "--labels", labels_file, "--labeler", "ana"]) == 0
    out = capsys.readouterr().out
    assert "\\x1b[2J\\x1b[31mRED<U+202E>" in out and "\x1b" not in out  # the output cannot drive the terminal
    assert "a = agree with the judge" in out  # "what" is no answer: the help, and the question again
    assert "[3/3]" in out and "2 labels written" in out and "1 skipped" in out
    written = [x.label for x in read_labels(labels_file)]
    assert [(x.question, x.answer, x.judge, x.note, x.labeler) for x in written] == [
        (QUESTIONS[0], "yes", "yes", "", "ana"), (QUESTIONS[1], "yes", "no", "the date is wrong", "ana")]
    assert written[0].output_digest == rec.output_digest
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))  # the labelled ones are not asked again
    assert main(["label", report, "--labels", labels_file]) == 0
    assert "[1/1] [consistency] " + QUESTIONS[2] in capsys.readouterr().out
    assert [x.label.answer for x in read_labels(labels_file)][-1] == "no"
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["label", report, "--labels", labels_file]) == 0
    assert "nothing to label" in capsys.readouterr().out


def test_label_command_quits_and_keeps_what_was_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    records, _ = crafted()
    report, labels_file = write(tmp_path, records, [])
    monkeypatch.setattr("sys.stdin", io.StringIO("y\nn\nq\ny\n"))
    assert main(["label", report, "--labels", labels_file, "--limit", "8", "--per-output", "2", "--seed", "3"]) == 0
    assert "[1/8]" in capsys.readouterr().out
    assert [x.label.answer for x in read_labels(labels_file)] == ["yes", "no"]


def test_label_candidates_spread_over_outputs() -> None:
    from pytest_bineval.labelling import candidates

    records, _ = crafted()
    picked = candidates(records, [], seed=1, per_output=2, limit=8)
    assert len(picked) == 8 and len({r.key for r, _ in picked}) == 4
    assert candidates(records, [], seed=1, per_output=2, limit=8) == picked  # the seed decides
    assert {v.dimension for _, v in candidates(records, [], dimension="fluency")} == {"fluency"}


def test_report_merge_calibrates_the_merged_shards_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """A shard's calibration speaks of its own tests (kappa is not additive): the merged report's is computed again
    from the labels file over every shard's verdicts, with the shards' trust bar, so the merged gate trusts what the
    whole suite shows; a labels file not found where the merge runs leaves no calibration and says so."""
    from pytest_bineval.trust import RunLabels

    records, labels = crafted()
    monkeypatch.chdir(tmp_path)
    append_labels(tmp_path / "labels.jsonl", labels)
    run = RunLabels("labels.jsonl", read_labels(tmp_path / "labels.jsonl"), 0.8)
    shards = []
    for name, part in (("a.json", records[:2]), ("b.json", records[2:])):
        cal, _ = run.judge(part, None, gating=False)
        document(part).model_copy(update={"calibration": cal}).write(tmp_path / name)
        shards.append(name)
    assert main(["report", "merge", *shards, "-o", "merged.json"]) == 0
    merged = json.loads((tmp_path / "merged.json").read_text())["calibration"]
    whole, _ = run.judge(records, None, gating=False)
    assert merged == json.loads(whole.model_dump_json())
    consistency = next(d for d in merged["dimensions"] if d["dimension"] == "consistency")
    assert consistency["stats"]["kappa"] == pytest.approx(0.34 / 0.49)  # the hand table over all 5 evaluations
    assert merged["trust_kappa"] == 0.8 and sorted(merged["untrusted"]) == ["consistency", "fluency"]

    (tmp_path / "labels.jsonl").unlink()
    capsys.readouterr()
    assert main(["report", "merge", *shards, "-o", "merged2.json"]) == 0
    assert json.loads((tmp_path / "merged2.json").read_text())["calibration"] is None
    assert "the shards' labels file labels.jsonl cannot be read here" in capsys.readouterr().err
