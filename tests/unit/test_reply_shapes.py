"""Each structured reply is defined once (issue 19, item 7): a pydantic model gives both the JSON schema sent to the
provider and the validator of the reply; the bench's UniEval method asks for the judge's answer-only reply. And the
check behind issue 20.12: which questions of a checklist are about the input (asked without one, they are judged
about nothing)."""

from __future__ import annotations

import pytest

from pytest_bineval import MissingSourceWarning, Question
from pytest_bineval.bench import methods
from pytest_bineval.judge import (
    ANSWER_SCHEMA,
    EXPLANATION_MAX,
    EXPLANATION_SCHEMA,
    _answer_field,
    _explanation_field,
    missing_source_message,
    questions_need_source,
    questions_needing_source,
)


def test_schemas_sent_are_unchanged_by_deriving_them() -> None:
    """The schemas are part of every request's cache key: deriving them from the models keeps them as they were."""
    assert ANSWER_SCHEMA == {"type": "object", "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
                             "required": ["answer"], "additionalProperties": False}
    assert EXPLANATION_SCHEMA == {"type": "object",
                                  "properties": {"explanation": {"type": "string", "maxLength": EXPLANATION_MAX}},
                                  "required": ["explanation"], "additionalProperties": False}


def test_unieval_asks_for_and_reads_the_judges_answer_reply() -> None:
    assert not hasattr(methods, "UNIEVAL_SCHEMA")
    assert methods.ANSWER_SCHEMA is ANSWER_SCHEMA
    assert methods._yes_no({"answer": "Yes."}) is True
    assert methods._yes_no({"answer": "no"}) is False
    with pytest.raises(ValueError, match="\"answer\": Input should be 'yes' or 'no' \\(got 'maybe'\\)"):
        methods._yes_no({"answer": "maybe"})


@pytest.mark.parametrize(("reply", "read"), [
    ({"answer": " YES."}, ("yes", "")),
    ({"answer": "'no'", "explanation": " volunteered "}, ("no", "volunteered")),
    ({"answer": "no", "explanation": 3, "other": 1}, ("no", "")),  # extra keys and a non-string explanation: ignored
])
def test_the_answer_reply_forgives_spelling(reply: dict[str, object], read: tuple[str, str]) -> None:
    assert _answer_field(reply) == read


@pytest.mark.parametrize(("reply", "message"), [
    ({"answer": "maybe"}, "\"answer\": Input should be 'yes' or 'no' (got 'maybe')"),
    ({}, '"answer": Field required'),
    ({"answer": True}, "\"answer\": Input should be 'yes' or 'no' (got True)"),
])
def test_a_bad_answer_reply_names_the_field(reply: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError) as info:
        _answer_field(reply)
    assert str(info.value) == message


def test_the_explanation_reply() -> None:
    assert _explanation_field({"explanation": " Because. "}) == "Because."
    with pytest.raises(ValueError, match='"explanation": Input should be a valid string'):
        _explanation_field({"explanation": None})


# -- issue 20.12: questions about the input, asked without one -----------------------------------------------
def _q(text: str, n: int = 1) -> Question:
    return Question(id=f"consistency-{n}", dimension="consistency", text=text)


@pytest.mark.parametrize(("text", "needs"), [
    ("Does the response state only facts found in the input?", True),
    ("Is every number in the response also in the source text?", True),
    ("Does the summary name the city mentioned in the article?", True),
    ("Does the response contradict the provided document?", True),
    ("Is THE INPUT's main claim kept?", True),
    ("Is the response written in plain English?", False),
    ("Does the response avoid input/output jargon?", False),
    ("Is the response's tone consistent throughout?", False),
])
def test_questions_need_source(text: str, needs: bool) -> None:
    assert questions_need_source([_q(text)]) is needs
    assert questions_need_source([_q("Is it fluent?"), _q(text, 2)]) is needs
    assert questions_need_source([]) is False


def test_missing_source_message_names_the_test_and_says_to_pass_source() -> None:
    questions = [_q("Is it fluent?"), _q("Does the response keep the input's facts?", 2)]
    assert questions_needing_source(questions) == [questions[1]]
    message = missing_source_message("tests/test_x.py::test_summary", questions)
    assert message.startswith("tests/test_x.py::test_summary: 1 question(s) of dimension 'consistency' are about "
                              "the input")
    assert "\"Does the response keep the input's facts?\"" in message and "source=" in message
    assert issubclass(MissingSourceWarning, UserWarning)
