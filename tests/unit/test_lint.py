"""``bineval lint`` (pytest_bineval.lint) on crafted pins and reports: a planted constant question, a duplicate, a
vague one and a dimension too small for the gate are each found with their reason; good questions are not; nothing
is changed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from labelled import document, record

from pytest_bineval.cli import main
from pytest_bineval.lint import constant_questions, lint, lint_questions, vague_reason
from pytest_bineval.models import Checklist, Question

GOOD = [
    ("consistency", "Is every number in the summary also in the article?"),
    ("consistency", "Does the summary name the city where the bridge opened?"),
    ("consistency", "Does the summary give the date the strike starts?"),
    ("fluency", "Does the response contain grammatical errors?"),
    ("fluency", "Is each sentence of the summary shorter than 30 words?"),
    ("relevance", "Does the summary say why the ferries stop?"),
]
VAGUE = [
    ("fluency", "Is the article on Fluency?"),
    ("fluency", "Is the summary fluent?"),
    ("relevance", "Is the response good?"),
    ("consistency", "Does the response meet the consistency criteria well?"),
    ("coherence", "Is the summary of high quality overall?"),
]


@pytest.mark.parametrize(("dimension", "text"), VAGUE)
def test_a_question_that_names_no_property_is_vague(dimension: str, text: str) -> None:
    why = vague_reason(text, dimension)
    assert why is not None and why.startswith("names no property to check: only ")


@pytest.mark.parametrize(("dimension", "text"), GOOD)
def test_a_question_that_names_a_property_is_not(dimension: str, text: str) -> None:
    assert vague_reason(text, dimension) is None


def test_the_vague_reason_names_the_words_it_found() -> None:
    assert vague_reason("Is the article on Fluency?", "fluency") == (
        "names no property to check: only its dimension's name (fluency) and generic words (article); ask about one "
        "thing an output can have or lack (a fact, a name, a number, an error of a kind)")


def questions(pairs: list[tuple[str, str]]) -> list[Question]:
    return [Question(id=f"{d}-{i}", dimension=d, text=t) for i, (d, t) in enumerate(pairs)]


def test_near_duplicates_are_found_and_a_shared_frame_is_not_one() -> None:
    qs = questions([("consistency", "Does the summary name the city where the bridge opened?"),
                    ("consistency", "Does the summary name the city in which the bridge opened?"),
                    ("consistency", "Are the names of people and places in the response the same as in the input?"),
                    ("consistency", "Are the numbers and dates in the response the same as in the input?")])
    found = [f for f in lint_questions(qs, "here") if f.kind == "duplicate"]
    assert [(f.question, f.other) for f in found] == [(qs[0].text, qs[1].text)]
    assert found[0].reason.startswith("similarity 0.9") and "content words shared" in found[0].reason


def test_a_question_answered_the_same_for_every_output_is_constant() -> None:
    constant, varied = "Is the article on Fluency?", "Does the summary name the city?"
    records = [record(f"t.py::test_s[{i}]", {constant: "no", varied: "yes" if i % 2 else "no"}, output=f"out {i}")
               for i in range(4)]
    (found,) = constant_questions(records, "run.json")
    assert (found.kind, found.question, found.dimension) == ("constant", constant, "consistency")
    assert found.where == "run.json: task 'Summarize the article.'"
    assert found.reason.startswith("answered no for all 4 outputs of the task (100% no)")
    assert constant_questions(records[:2], "run.json") == []  # too few outputs to tell
    same_output = [record(f"t.py::test_s[{i}]", {constant: "no"}, output="same") for i in range(4)]
    assert constant_questions(same_output, "run.json") == []  # one output judged 4 times says nothing
    errors = [record(f"t.py::test_e[{i}]", {constant: "error" if i else "yes"}, output=f"o{i}") for i in range(4)]
    assert constant_questions(errors, "run.json") == []  # judge errors are no answers


def pin_file(directory: Path, pairs: list[tuple[str, str]]) -> Path:
    checklist = Checklist(task="Summarize the article.", dimensions={d: f"{d} definition" for d, _ in pairs},
                          questions=questions(pairs))
    path = directory / "__bineval__" / "test_mod" / "test_fn.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": 2, "checklists": [{**checklist.model_dump(mode="json"), "tests": ["test_fn"]}]}
    path.write_text(json.dumps(body, indent=2))
    return path


def test_lint_finds_the_planted_bad_questions_and_changes_nothing(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    planted = [*GOOD,
               ("fluency", "Is the article on Fluency?"),  # vague, and constant in the report
               ("consistency", "Does the summary name the city in which the bridge opened?")]  # a duplicate
    pin = pin_file(tmp_path / "tests", planted)
    answers = {text: "yes" for _, text in planted}
    records = [record(f"tests/test_mod.py::test_fn[{i}]", {**answers, "Is the article on Fluency?": "no",
                                                             GOOD[0][1]: "yes" if i else "no"}, output=f"output {i}",
                      dimensions={text: d for d, text in planted}).model_copy(update={"questions": questions(planted)})
               for i in range(3)]  # judged with the pinned checklist
    part = [q for q in questions(planted) if q.dimension == "fluency"]  # a test checking only some dimensions
    records.append(record("tests/test_mod.py::test_fn[3]", {q.text: "no" for q in part}, output="output 3",
                          dimensions={q.text: q.dimension for q in part}).model_copy(update={"questions": part}))
    report = tmp_path / "run.json"
    document(records).write(report)
    before = hashlib.sha256(pin.read_bytes()).hexdigest(), hashlib.sha256(report.read_bytes()).hexdigest()
    out_json = tmp_path / "lint.json"
    assert main(["lint", str(tmp_path / "tests"), "--report", str(report), "--json", str(out_json)]) == 1
    out = capsys.readouterr().out
    assert f"{pin}, entry 1 [fluency] VAGUE: 'Is the article on Fluency?': names no property" in out
    assert (f"{pin}, entry 1 [consistency] DUPLICATE: 'Does the summary name the city where the bridge opened?' and "
            "'Does the summary name the city in which the bridge opened?': similarity") in out
    assert f"{report}: task 'Summarize the article.' [fluency] CONSTANT: 'Is the article on Fluency?': answered no" \
        in out
    assert f"{report}: task 'Summarize the article.' [consistency] CONSTANT: 'Does the summary name the city" in out
    assert "FEW QUESTIONS" not in out and "checklist of" not in out  # no per-evaluation size check (the gate pools)
    assert out.splitlines()[-1].startswith("bineval lint: ") and "nothing was changed" in out
    kinds = [f["kind"] for f in json.loads(out_json.read_text())["findings"]]
    assert kinds.count("vague") == 1 and kinds.count("duplicate") == 1 and "constant" in kinds
    after = hashlib.sha256(pin.read_bytes()).hexdigest(), hashlib.sha256(report.read_bytes()).hexdigest()
    assert after == before


def test_lint_of_good_pins_is_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pin_file(tmp_path, [(d, t) for d, t in GOOD if d == "consistency"] * 2)  # 6 consistency questions, no duplicate
    result = lint([str(tmp_path)])
    assert [f.kind for f in result.findings] == ["duplicate"] * 3  # the same three texts twice: found
    six = [*(t for d, t in GOOD if d == "consistency"), "Does the summary say who called the strike?",
           "Are the ferry operators named as the article names them?", "Is the cost of the bridge in euros?"]
    pin_file(tmp_path, [("consistency", t) for t in six])
    assert main(["lint", str(tmp_path)]) == 0
    assert "0 finding(s)" in capsys.readouterr().out


def test_lint_names_what_it_cannot_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", str(tmp_path / "nowhere")]) == 2
    assert "no such file or directory" in capsys.readouterr().err
    bad = tmp_path / "__bineval__" / "m" / "t.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    assert main(["lint", str(tmp_path)]) == 2
    assert "is unreadable" in capsys.readouterr().err
