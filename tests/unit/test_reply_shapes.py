"""Each structured reply is defined once (issue 19, item 7): a pydantic model gives both the JSON schema sent to the
provider and the validator of the reply; the bench's UniEval method asks for the judge's answer-only reply."""

from __future__ import annotations

import pytest

from pytest_bineval.bench import methods
from pytest_bineval.judge import ANSWER_SCHEMA, EXPLANATION_MAX, EXPLANATION_SCHEMA, _answer_field, _explanation_field


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
