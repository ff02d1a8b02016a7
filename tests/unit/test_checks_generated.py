"""The checklist generator may attach a check of the catalogue to a question it writes (issue 25, item 3b): a valid
one decides that question by code; anything else leaves it a judge question, said in a GeneratedCheckWarning."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import GeneratedCheckWarning
from pytest_bineval.api import evaluate, generate_checklist
from pytest_bineval.checklist import catalogue_summary, questions_schema
from pytest_bineval.checks import KINDS
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.scripted import Request

TASK = "Describe the new library for the town's newsletter."  # states no constraint: the extractor finds none


def _item(text: str, check: Any = None) -> dict[str, Any]:
    item: dict[str, Any] = {"requirement": "r", "question": text, "no_example": "n"}
    if check is not None:
        item["check"] = check
    return item


def _questions(req: Request) -> str:
    if req.dimension == "relevance":
        return json.dumps({"questions": [
            _item("Does the response describe the library?"),
            _item("Is the response at most 40 words long?", {"kind": "max_words", "value": 40}),
            _item("Does the response mention the opening date?", {"kind": "includes_keywords", "words": ["2027"]}),
            _item("Does the response read like a newsletter item?", {"kind": "newsletter_tone"}),  # unknown kind
            _item("Is the response under 40 words?", {"kind": "max_words", "value": 40}),  # the same check again
        ]})
    return json.dumps({"questions": [
        _item("Does the response avoid commas?", {"kind": "no_commas", "extra": 1}),  # parameters that do not fit
        _item("Is the response grammatical?", "max_words"),  # not an object
        _item("Is the response all lowercase?", {"kind": "letter_case", "case": "lower"}),
    ]})


def test_a_check_the_generator_attaches_decides_its_question(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules = {"questions": _questions}
    with pytest.warns(GeneratedCheckWarning) as caught:
        checklist = generate_checklist(TASK, ["relevance", "fluency"], model=fake.model, cache_dir=str(cache_dir))
    checks = {q.id: q.check for q in checklist.questions}
    assert checks == {
        "relevance-1": None,
        "relevance-2": {"kind": "max_words", "value": 40},
        "relevance-3": {"kind": "includes_keywords", "words": ["2027"]},
        "relevance-4": None,  # unknown kind: a judge question
        "relevance-5": None,  # the same check as relevance-2: asked once by code, this one by the judge
        "fluency-1": None,  # extra parameter
        "fluency-2": None,  # not an object
        "fluency-3": {"kind": "letter_case", "case": "lower"},
    }
    assert len(caught) == 1
    message = str(caught[0].message)
    assert message.startswith(f"checklist generation with {fake.model}: 3 check(s) the model attached are not "
                              "valid checks of the catalogue; those questions stay judge questions:")
    assert ("[relevance-4] Does the response read like a newsletter item?: unknown check kind 'newsletter_tone'"
            in message)
    assert "[fluency-1] Does the response avoid commas?: check 'no_commas': extra: Extra inputs" in message
    assert "[fluency-2] Is the response grammatical?: a check must be an object" in message

    fake.requests.clear()
    output = "The new library opens in 2027 with three floors and a garden."
    result = evaluate(output, checklist, model=fake.model, cache_dir=str(cache_dir))
    decided = {v.question_id: v.decided_by for v in result.verdicts}
    assert [k for k, by in decided.items() if by == "code"] == ["relevance-2", "relevance-3", "fluency-3"]
    assert fake.calls_of("verdict") == 5  # the judged questions only
    by_id = {v.question_id: v for v in result.verdicts}
    assert by_id["fluency-3"].answer == "no" and by_id["relevance-2"].answer == "yes"


def test_the_generator_is_offered_the_catalogue_and_the_check_in_its_schema(fake: ScriptedModel,
                                                                         cache_dir: Path) -> None:
    generate_checklist(TASK, ["fluency"], model=fake.model, cache_dir=str(cache_dir))
    request = next(r for r in fake.requests if r.kind == "questions")
    assert "- max_words: value" in request.messages[0]["content"]
    assert "- keyword_count: keyword, min, max" in request.messages[0]["content"]
    assert catalogue_summary().count("\n") + 1 == len(KINDS)
    item = questions_schema(True)["properties"]["questions"]["items"]
    assert item["properties"]["check"]["properties"]["kind"]["enum"] == sorted(KINDS)
    assert "check" not in item["required"]
    assert "check" not in questions_schema(False)["properties"]["questions"]["items"]["properties"]


def test_the_embedded_model_is_not_offered_the_catalogue(fake: ScriptedModel, cache_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The 135M model's checks would be noise and the list would lengthen every step-2 prompt; the extractor still
    finds the task's own checks for it."""
    from pytest_bineval import checklist as module

    monkeypatch.setattr(module, "is_embedded", lambda model: model == fake.model)
    checklist = generate_checklist("Describe the library in at most 40 words.", ["relevance"], model=fake.model,
                                   cache_dir=str(cache_dir))
    request = next(r for r in fake.requests if r.kind == "questions")
    assert 'Check catalogue (kind: parameters):\n(none: leave "check" out)\n' in request.messages[0]["content"]
    assert "- max_words: value" not in request.messages[0]["content"]
    assert "check" not in json.dumps(request.params.get("response_format", {}))
    assert [q.check for q in checklist.questions if q.check] == [{"kind": "max_words", "value": 40}]  # extracted


def test_a_hostile_pattern_the_generator_attaches_is_an_error_at_its_bound(fake: ScriptedModel,
                                                                           cache_dir: Path) -> None:
    """The checklist model may write any pattern: one that backtracks without end decides nothing, its question
    is an error verdict at the bound (never a pass), and the evaluation ends."""
    def questions(req: Request) -> str:
        return json.dumps({"questions": [
            _item("Does the response avoid eleven fields before a P?", {"kind": "regex", "pattern": "^(.*?,){11}P",
                                                                     "mode": "absent"}),
            _item("Does the response describe the library?"),
        ]})

    fake.rules = {"questions": questions}
    checklist = generate_checklist(TASK, ["relevance"], model=fake.model, cache_dir=str(cache_dir))
    assert checklist.questions[0].check == {"kind": "regex", "pattern": "^(.*?,){11}P", "mode": "absent"}
    result = evaluate("1," * 60 + "!", checklist, model=fake.model, cache_dir=str(cache_dir), timeout=0.5, retries=0)
    checked, judged = result.verdicts
    assert (checked.answer, checked.decided_by) == ("error", "code")
    assert "the regular expression /^(.*?,){11}P/ did not finish within 0.5 s" in (checked.error or "") or (
        "the check 'regex' did not finish within 0.5 s" in (checked.error or ""))
    assert judged.answer == "yes" and result.scores["relevance"] == 1.0  # scored on the answered question only
    assert result.errors == [checked]
