"""The labels file (pytest_bineval.labels): its lines, its errors, and which labels speak of which verdicts —
a stale label is said, never used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labelled import label, record

from pytest_bineval.errors import UsageError
from pytest_bineval.labels import (
    Label,
    LabelLine,
    append_labels,
    match_labels,
    parse_labels,
    question_digest,
    read_labels,
)

Q1, Q2 = "Is every claim supported by the article?", "Does the summary name the city?"


def lines(*labels: Label) -> list[LabelLine]:
    return parse_labels("".join(x.to_line() for x in labels), "labels.jsonl")


def test_a_label_is_one_json_line_that_round_trips() -> None:
    rec = record("t.py::test_a", {Q1: "yes"}, output="The out.")
    made = label(rec, Q1, "no", labeler="ana", note="the date | is wrong")
    line = made.to_line()
    assert line.endswith("\n") and line.count("\n") == 1
    data = json.loads(line)
    assert list(data)[:4] == ["test", "index", "dimension", "question"]
    assert data["question_digest"] == question_digest(Q1) and data["answer"] == "no" and data["judge"] == "yes"
    assert data["output_digest"] == rec.output_digest and data["labeler"] == "ana"
    assert parse_labels(line, "f")[0].label == made


def test_the_question_digest_ignores_whitespace_only() -> None:
    assert question_digest("Is it  short?\n") == question_digest("Is it short?")
    assert question_digest("Is it short?") != question_digest("is it short?")


def test_a_minimal_label_needs_test_question_and_answer() -> None:
    (only,) = parse_labels('{"test": "t.py::a", "question": "Q?", "answer": "yes", "future_key": 1}\n', "f")
    assert only.label.index == 0 and only.label.output_digest == "" and only.line == 1


@pytest.mark.parametrize(("text", "says"), [
    ('{"test": "t", "question": "Q?", "answer": "maybe"}', "line 2: not a label (answer"),
    ('{"test": "t", "answer": "yes"}', "line 2: not a label (question: Field required"),
    ('[1, 2]', "line 2: a label is a JSON object, not list"),
    ('{"test": "t", "question": "Q?", "answer": "yes"', "line 2: not JSON"),
])
def test_a_line_that_is_no_label_is_an_error_naming_the_line(text: str, says: str) -> None:
    good = '{"test": "t", "question": "Q?", "answer": "yes"}\n'
    with pytest.raises(UsageError, match="labels.jsonl, " + says.replace("(", r"\(")):
        parse_labels(good + text + "\n", "labels.jsonl")


def test_append_adds_lines_and_mends_a_missing_final_newline(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "labels.jsonl"
    rec = record("t.py::test_a", {Q1: "yes", Q2: "no"})
    append_labels(path, [label(rec, Q1, "yes")])
    path.write_text(path.read_text().rstrip("\n"))  # edited by hand, no final newline
    append_labels(path, [label(rec, Q2, "yes")])
    assert [x.label.question for x in read_labels(path)] == [Q1, Q2]
    assert read_labels(tmp_path / "none.jsonl", missing_ok=True) == []
    with pytest.raises(UsageError, match="cannot read the labels file"):
        read_labels(tmp_path / "none.jsonl")


def test_fresh_labels_are_matched_with_their_verdicts() -> None:
    rec = record("t.py::test_a", {Q1: "yes", Q2: "error"})
    m = match_labels(lines(label(rec, Q1, "no"), label(rec, Q2, "yes")), [rec])
    assert [(x.line, x.verdict.question) for x in m.matched] == [(1, Q1), (2, Q2)]
    assert [x.verdict.question for x in m.answered] == [Q1]
    assert [x.verdict.question for x in m.judge_errors] == [Q2]  # no answer to compare with
    assert m.labelled() == {("t.py::test_a", "q0"), ("t.py::test_a", "q1")} and not m.issues


def test_a_label_without_output_digest_speaks_of_any_output_of_its_test() -> None:
    rec = record("t.py::test_a", {Q1: "yes"}, output="new output")
    loose = Label(test="t.py::test_a", question=Q1, answer="yes")
    assert len(match_labels(lines(loose), [rec]).matched) == 1


def test_stale_labels_are_said_with_why_and_never_used() -> None:
    before = record("t.py::test_a", {Q1: "yes", Q2: "yes"}, output="old output")
    edited = label(before, Q1, "no").model_copy(update={"question": Q1 + " Really?"})  # digest no longer matches
    output_changed = label(before, Q2, "no")
    now = record("t.py::test_a", {"Is every claim in the summary supported by the article?": "yes", Q2: "yes"},
                 output="new output")
    gone = label(before, Q1, "no")  # the checklist was reworded since
    m = match_labels(lines(edited, output_changed, gone), [now])
    assert not m.matched
    why = {i.line: (i.kind, i.why) for i in m.issues}
    assert why[1] == ("stale", "its question text does not match its question_digest (the text was edited after "
                               "labelling)")
    assert why[2][0] == "stale" and why[2][1].startswith("the output changed since it was labelled")
    assert why[3][0] == "stale" and why[3][1].startswith("the evaluation no longer asks this question")
    assert "closest question now: 'Is every claim in the summary supported by the article?'" in why[3][1]


def test_labels_of_other_evaluations_and_superseded_lines_are_not_used() -> None:
    rec = record("t.py::test_a", {Q1: "yes"})
    second = record("t.py::test_a", {Q1: "no"}, index=1)
    first, again = label(rec, Q1, "no"), label(rec, Q1, "yes")
    other = Label(test="t.py::test_gone", question=Q1, answer="yes")
    m = match_labels(lines(first, other, again, label(second, Q1, "no")), [rec, second])
    assert [(x.line, x.label.answer, x.record.index) for x in m.matched] == [(3, "yes", 0), (4, "no", 1)]
    assert [(i.kind, i.line) for i in m.issues] == [("superseded", 1), ("not in report", 2)]
    assert m.of_kind("superseded")[0].why == "labelled again on line 3"


def test_a_question_asked_in_two_dimensions_is_matched_in_the_labelled_one() -> None:
    rec = record("t.py::test_a", {Q1: "yes"})
    twin = rec.verdicts[0].model_copy(update={"question_id": "r0", "dimension": "relevance", "answer": "no"})
    rec = rec.model_copy(update={"verdicts": [*rec.verdicts, twin]})
    for dimension, answer in (("relevance", "no"), ("consistency", "yes")):
        lab = Label(test="t.py::test_a", question=Q1, answer="yes", dimension=dimension)
        (m,) = match_labels(lines(lab), [rec]).matched
        assert (m.verdict.dimension, m.verdict.answer) == (dimension, answer)


def test_a_label_of_a_question_decided_by_code_is_not_the_judges() -> None:
    rec = record("t.py::test_a", {Q1: "yes", Q2: "no"})
    code = rec.verdicts[1].model_copy(update={"decided_by": "code"})
    rec = rec.model_copy(update={"verdicts": [rec.verdicts[0], code]})
    m = match_labels(lines(label(rec, Q1, "yes"), label(rec, Q2, "no")), [rec])
    assert [x.verdict.question for x in m.answered] == [Q1]
    assert [x.verdict.question for x in m.code_checks] == [Q2] and not m.judge_errors
    from pytest_bineval.labelling import candidates

    assert [v.question for _, v in candidates([rec], [])] == [Q1]  # bineval label does not ask about it
