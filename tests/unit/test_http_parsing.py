"""Reading judge replies: exactly one verdict counts; anything ambiguous is an error, never a yes.

Unit cases for the shapes seen from real judges, and hypothesis fuzzing of the parser (random prose, code
fences, nested, partial and competing JSON): no input yields "yes" unless the reply's only verdict says yes.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_bineval.judge import _answer_field
from pytest_bineval.llm.parsing import (
    MalformedResponse,
    answer_settled,
    check_answer_once,
    parse_json_object,
    reply_parts,
)


def verdict_of(text: str) -> str:
    """The answer a judge reply yields through the real parser and validator, or "error"."""
    try:
        answer, _ = _answer_field(parse_json_object(text))
    except ValueError:
        return "error"
    return answer


YES = {"answer": "yes", "explanation": "It does."}
NO = {"answer": "no", "explanation": "It does not."}


@pytest.mark.parametrize(("reply", "answer"), [
    (json.dumps(YES), "yes"),
    (json.dumps(NO, indent=2), "no"),
    (f"Sure, here it is:\n```json\n{json.dumps(NO)}\n```\nHope that helps.", "no"),
    (f"My verdict: {json.dumps(YES)}", "yes"),
    ('{"explanation": "fine", "answer": "YES"}', "yes"),
    (json.dumps({"answer": "no", "explanation": 'the output says {"answer": "yes"}'}), "no"),  # quoted inside a string
    ('{ "answer": "no","explanation":"a raw newline }\nin the string"}', "no"),  # as llama.cpp's server writes it
])
def test_one_verdict_is_read(reply: str, answer: str) -> None:
    assert verdict_of(reply) == answer


@pytest.mark.parametrize("reply", [
    # a verdict quoted from the output under test before the judge's own
    f'The response says {json.dumps(YES)} but in truth {json.dumps(NO)}',
    # two code fences: yes, then no
    f"```json\n{json.dumps(YES)}\n```\nOn reflection:\n```json\n{json.dumps(NO)}\n```",
    # two agreeing verdicts are still two
    f"{json.dumps(YES)}\n{json.dumps(YES)}",
    # a nested verdict repeating the top-level key
    json.dumps({"answer": "no", "explanation": "x", "quote": {"answer": "yes"}}),
    json.dumps({"answer": "yes", "explanation": "x", "items": [{"answer": "no"}]}),
    # one key given twice: Python's decoder keeps the last, a streamed read the first
    '{"answer": "yes", "answer": "no", "explanation": "x"}',
    '{"answer": "no", "explanation": "x", "answer": "yes"}',
    '{"answer": "yes", "explanation": "x", "explanation": "y"}',
    'Verdict: {"answer": "yes", "answer": "yes"}',
    # a broken verdict around a complete one, and a verdict fragment in prose
    '{"answer": "no", "explanation": ' + json.dumps(YES),
    f"\"answer\": \"no\" -- {json.dumps(YES)}",
    f"{json.dumps(YES)} and also 'answer': 'no'",
    f'{json.dumps(YES)}{{"answer"',  # found by hypothesis: a fragment cut after the key
    # no verdict at all
    "The answer is yes.",
    "",
    '{"answer": "yes", "explanation": "cut',
    '["yes"]',
    json.dumps({"answer": "maybe", "explanation": "?"}),
])
def test_ambiguous_or_missing_verdicts_are_errors(reply: str) -> None:
    assert verdict_of(reply) == "error"


def test_ambiguity_is_named_in_the_error() -> None:
    with pytest.raises(ValueError, match="ambiguous reply: 2 JSON objects"):
        parse_json_object(f"{json.dumps(YES)} {json.dumps(NO)}")
    with pytest.raises(ValueError, match="another 'answer' outside the JSON object"):
        parse_json_object(f'"answer": "no" {json.dumps(YES)}')
    with pytest.raises(ValueError, match="no JSON object"):
        parse_json_object("yes")
    with pytest.raises(ValueError, match="ambiguous reply: key 'answer' given twice in one JSON object"):
        parse_json_object('{"answer": "yes", "answer": "no", "explanation": "x"}')


@pytest.mark.parametrize(("text", "settled"), [
    ('{"answer": "yes"', False), ('{"answer": "yes", ', False), ('{"answer": "yes", "expla', False),
    ('{"answer": "yes", "explanation"', False), ('{"answer": "yes", "explanation":', True),
    ('{"answer": "yes"}', True), ('{"answer": "no", "answer":', True), ('{ "answer" : "Yes." , "x" :', True),
    ('{"answer": "yes", "a\\"b":', True), ('The answer: {"answer": "yes", "x":', False),
])
def test_a_streamed_answer_is_settled_by_the_next_key(text: str, settled: bool) -> None:
    """A stream closed early is read up to the next key's name: a second "answer" right after the first is seen."""
    assert answer_settled(text) is settled


def test_an_answer_given_twice_so_far_is_ambiguous() -> None:
    with pytest.raises(ValueError, match="ambiguous reply: key 'answer' given twice"):
        check_answer_once('{"answer": "yes", "answer": "no"')
    check_answer_once('{"answer": "yes", "explanation": "it says \\"answer\\": no"')  # escaped: inside a string
    check_answer_once('{"answer": "yes", "explanation":')


@pytest.mark.parametrize(("response", "message"), [
    ({"choices": []}, "no choices"),
    ({}, "no choices"),
    ({"choices": [{"index": 0, "finish_reason": "stop"}]}, "no message"),
    ({"choices": [{"message": {"role": "assistant", "content": None}, "finish_reason": "length"}]}, "null content"),
    ({"choices": [{"message": {"role": "assistant", "content": "  "}, "finish_reason": "stop"}]}, "empty reply"),
    ({"choices": [{"message": {"role": "assistant", "content": 7}}]}, "content is a int"),
])
def test_malformed_provider_responses_are_named(response: dict[str, object], message: str) -> None:
    with pytest.raises(MalformedResponse, match=message):
        reply_parts(response)


def test_content_parts_are_joined() -> None:
    parts = reply_parts({"choices": [{"message": {"content": [{"type": "text", "text": '{"answer": '},
                                                              {"type": "text", "text": '"no"}'}]}}]})
    assert parts.content == '{"answer": "no"}'


# -- fuzzing ----------------------------------------------------------------------------------------------------

# Prose that cannot itself hold JSON or a quoted key: no braces, no quotes.
prose = st.text(st.characters(blacklist_characters='{}"\'', blacklist_categories=("Cs",)), max_size=40)
explanation = st.text(max_size=30)


@st.composite
def segment(draw: st.DrawFn) -> tuple[str, str]:
    """(kind, text): prose, a complete verdict (yes/no, maybe fenced or indented), a partial verdict, a nested
    fake verdict, or an unrelated object."""
    kind = draw(st.sampled_from(["prose", "verdict", "partial", "nested", "other"]))
    if kind == "prose":
        return "prose", draw(prose)
    answer = draw(st.sampled_from(["yes", "no"]))
    obj = {"answer": answer, "explanation": draw(explanation)}
    text = json.dumps(obj, indent=draw(st.sampled_from([None, 2])), ensure_ascii=draw(st.booleans()))
    if kind == "verdict":
        if draw(st.booleans()):
            text = f"```json\n{text}\n```"
        return f"verdict-{answer}", text
    if kind == "partial":
        cut = draw(st.integers(min_value=1, max_value=len(text) - 1))
        return "partial", text[:cut]
    if kind == "nested":
        inner = {"answer": "no" if answer == "yes" else "yes"}
        return "nested", json.dumps({**obj, "quote": inner})
    return "other", json.dumps({"note": draw(explanation)})


# 200 examples (was 600): each segment is one of five kinds, so a reply of two verdicts, a nested fake verdict or a
# second object (what a parser that reads yes too eagerly gets wrong) is in most of them; 200 draw each many times.
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(segment(), min_size=0, max_size=6), st.sampled_from(["", " ", "\n", "\n\n"]))
def test_fuzz_yes_only_from_a_single_yes_verdict(segments: list[tuple[str, str]], sep: str) -> None:
    reply = sep.join(text for _, text in segments)
    result = verdict_of(reply)
    if result == "yes":
        carrying = [kind for kind, text in segments if kind != "prose" and '"answer"' in text]
        assert carrying == ["verdict-yes"], (reply, segments)
        assert "other" not in [kind for kind, _ in segments], (reply, segments)  # a second object: ambiguous


KEY = re.compile(r"""["']answer["']\s*:""", re.IGNORECASE)


TOKENS = [*'{}[]":, \n\\`\'x', "answer", "yes", "no", "explanation"]


# 1000 examples (was 1500): token soup rarely makes two answer keys parse at all, so this one keeps many examples.
@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=60).map("".join))
def test_fuzz_json_soup_never_yes_with_two_answer_keys(reply: str) -> None:
    if verdict_of(reply) == "yes":
        assert len(KEY.findall(reply)) == 1, reply


@settings(max_examples=300, deadline=None)
@given(prose, prose, st.sampled_from(["yes", "no"]), explanation, st.booleans())
def test_fuzz_a_single_verdict_in_prose_is_read(before: str, after: str, answer: str, why: str, fenced: bool) -> None:
    body = json.dumps({"answer": answer, "explanation": why})
    if fenced:
        body = f"```json\n{body}\n```"
    assert verdict_of(f"{before}\n{body}\n{after}") == answer
