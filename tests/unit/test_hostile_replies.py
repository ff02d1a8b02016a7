"""Hostile model replies (issue 20): replies built to make parsing slow are read in linear time or refused unread
past a documented size, and model-written lone surrogates are replaced where they enter, so the run's files are
written (reports, pinned checklists) instead of the session dying on a UnicodeEncodeError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import BinevalEncodingWarning, Checklist, Question, evaluate
from pytest_bineval.llm import parsing
from pytest_bineval.llm.parsing import MAX_JSON_DEPTH, MAX_REPLY_CHARS, clean_reply, parse_json_object, reply_parts
from pytest_bineval.testing import ScriptedModel

pytest_plugins = ["pytester"]


class CountingDecoder(json.JSONDecoder):
    """The parser's decoder, counting its decode attempts and the characters handed to them (a decode error counts
    its line and column from the start of the text it was given: a failed try costs the text's length up to it)."""

    def __init__(self) -> None:
        super().__init__(strict=False)
        self.calls = 0
        self.read = 0

    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        self.calls += 1
        self.read += len(s)
        return super().raw_decode(s, idx)


@pytest.fixture
def decoder(monkeypatch: pytest.MonkeyPatch) -> CountingDecoder:
    counting = CountingDecoder()
    monkeypatch.setattr(parsing, "_DECODER", counting)
    return counting


def _deep_failing(depth: int, width: int) -> str:
    """Objects nested ``depth`` deep, each holding a long array, broken at the innermost point: every ``{`` of it
    is a candidate whose decoding runs to the break."""
    return '{"a": [' + ("0, " * width) + ('{"a": [' + "0, " * width) * (depth - 1) + "x" + "]}" * depth


# Replies under the size limit that took a quadratic parser many times their length to read.
ADVERSARIAL = {
    "nested objects broken deep inside": _deep_failing(45, 600),
    "nested braces past the depth limit": '{"a":' * 16_000 + "1" + "}" * 16_000,
    "unclosed braces": "{" * 90_000,
    "unclosed objects": '{"a": "b", ' * 9_000,
    "braces in prose": "use {name} and {{x}} here " * 3_000,
    "strings full of braces": '{"a": "{{{{{{{{{{", ' * 4_500 + "}",
}


@pytest.mark.parametrize("reply", ADVERSARIAL.values(), ids=ADVERSARIAL.keys())
def test_parsing_reads_each_character_a_bounded_number_of_times(reply: str, decoder: CountingDecoder) -> None:
    assert len(reply) <= MAX_REPLY_CHARS
    with pytest.raises(ValueError):
        parse_json_object(reply)
    assert decoder.read <= 2 * len(reply) + 16  # one try per quote parity at most reads a character


def test_json_nested_past_the_depth_limit_is_no_object_and_says_why(decoder: CountingDecoder) -> None:
    deep = '{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(ValueError, match=f"JSON nested deeper than {MAX_JSON_DEPTH} levels"):
        parse_json_object(deep)
    assert decoder.calls == 0
    shallow = "".join(f'{{"k{i}":' for i in range(5)) + "1" + "}" * 5
    assert parse_json_object(shallow) == json.loads(shallow)


@pytest.mark.parametrize("size", [1 << 20, 20 << 20])
@pytest.mark.parametrize("shape", ["{", '{"a":', "x"])
def test_a_reply_past_the_size_limit_is_refused_unread(size: int, shape: str, decoder: CountingDecoder) -> None:
    reply = (shape * (size // len(shape) + 1))[:size]
    with pytest.raises(ValueError, match=rf"is {size:,} characters long, more than the limit of "
                                          rf"{MAX_REPLY_CHARS:,} characters"):
        parse_json_object(reply)
    with pytest.raises(ValueError, match=f"more than the limit of {MAX_REPLY_CHARS:,}"):
        reply_parts({"choices": [{"message": {"content": reply}, "finish_reason": "stop"}]})
    assert decoder.calls == 0


def test_one_object_in_a_long_reply_is_still_read(decoder: CountingDecoder) -> None:
    prose = "blah {x} " * 5_000
    assert parse_json_object(prose + json.dumps({"answer": "no"}) + prose) == {"answer": "no"}
    assert decoder.read <= 2 * len(prose) * 2 + 100


def test_a_key_with_quotes_outside_the_object_is_still_ambiguous() -> None:
    obj = json.dumps({"it's": "yes"})
    with pytest.raises(ValueError, match="another \"it's\" outside"):
        parse_json_object(f"""They said "it's" -- {obj}""")
    assert parse_json_object(f"They said nothing -- {obj}") == {"it's": "yes"}


def _checklist() -> Checklist:
    return Checklist(task="T", dimensions={"consistency": "D"},
                     questions=[Question(id="consistency-1", dimension="consistency", text="Is check 1 met?")])


@pytest.mark.parametrize("explain", ["failing", "all", "none"])
@pytest.mark.parametrize("reply", ['{"answer": "yes", "answer": "no", "explanation": "x"}',
                                   '{"answer": "no", "answer": "yes", "explanation": "x"}'])
def test_an_answer_given_twice_is_an_error_in_every_explain_mode(fake: ScriptedModel, cache_dir: Path, reply: str,
                                                                 explain: str) -> None:
    """Which of two answers counts would be a guess: the reply is ambiguous, retried, then an error verdict (the
    probe saw a pass under failing and none, a failure under all)."""
    fake.rules["verdict"] = lambda req: reply
    checklist = Checklist(task="t", dimensions={"fluency": "d"},
                          questions=[Question(id="fluency-1", dimension="fluency", text="Is it fluent?")])
    result = evaluate("out", checklist, model=fake.model, cache_dir=str(cache_dir), explain=explain, retries=1)
    (verdict,) = result.verdicts
    assert verdict.answer == "error"
    assert "ambiguous reply: key 'answer' given twice" in (verdict.error or "")
    assert fake.calls_of("verdict") == 2 == result.usage.failed_requests  # asked, retried, both counted


def test_an_oversized_reply_is_an_error_verdict_naming_size_and_limit(fake: ScriptedModel, cache_dir: Path) -> None:
    reply = '{"answer": "yes", "explanation": "' + "{" * (2 << 20) + '"}'
    fake.answers = {"Is check 1 met?": reply}
    result = evaluate("output", _checklist(), model=fake.model, cache_dir=str(cache_dir), retries=0)
    verdict = result.verdicts[0]
    assert verdict.answer == "error"
    assert f"the reply is {len(reply):,} characters long" in (verdict.error or "")
    assert f"limit of {MAX_REPLY_CHARS:,} characters" in (verdict.error or "")


# -- lone surrogates ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "cleaned", "count"), [
    ("a\udc80b", "a\ufffdb", 1),
    (r'{"q": "a\udc80b"}', r'{"q": "a\ufffdb"}', 1),
    (r'{"q": "\ud83d\ude00 \uD800"}', r'{"q": "\ud83d\ude00 \ufffd"}', 1),  # a pair is kept, a lone high is not
    (r'{"q": "\\udc80"}', r'{"q": "\\udc80"}', 0),  # an escaped backslash, then the text "udc80"
    (r'{"q": "\ude00\ud83d"}', r'{"q": "\ufffd\ufffd"}', 2),  # low then high: no pair
    ("plain", "plain", 0),
])
def test_lone_surrogates_are_replaced_raw_or_escaped(text: str, cleaned: str, count: int) -> None:
    assert clean_reply(text) == (cleaned, count)
    decoded = json.loads(cleaned) if cleaned.startswith("{") else cleaned
    json.dumps(decoded, ensure_ascii=False).encode("utf-8")  # writable as UTF-8


def test_a_surrogate_in_a_generated_question_is_replaced_and_said(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules["questions"] = lambda req: json.dumps(
        {"questions": [{"requirement": "r\\udc80", "question": "Does it \\udc80 hold?", "no_example": ""}]}
    ).replace("\\\\udc80", "\\udc80")
    from pytest_bineval import generate_checklist

    with pytest.warns(BinevalEncodingWarning, match=f"lone surrogate character.*in the reply of {fake.model}"):
        checklist = generate_checklist("Summarize.", dimensions=["fluency"], model=fake.model,
                                       cache_dir=str(cache_dir))
    assert [q.text for q in checklist.questions] == ["Does it \ufffd hold?"]
    assert checklist.model_dump_json().encode("utf-8")
    again = generate_checklist("Summarize.", dimensions=["fluency"], model=fake.model, cache_dir=str(cache_dir))
    assert again.questions == checklist.questions  # the cache holds the cleaned checklist


SURROGATE_CONFTEST = r'''
import json
from pytest_bineval.testing import ScriptedModel

def questions(req):
    reply = json.dumps({"questions": [{"requirement": "r", "question": "Does it SURR hold?", "no_example": ""}]})
    return reply.replace("SURR", "\\udc80")  # the JSON escape of a lone surrogate, as a model may write it

FAKE = ScriptedModel(provider="surrogatefake", rules={"questions": questions}).register()
'''

SURROGATE_TEST = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize.")
def test_summary():
    assert_passes("A summary.", dimension="fluency")
'''


@pytest.mark.parametrize("mode", ["report", "update-checklists"])
def test_a_surrogate_in_a_question_reply_leaves_every_file_written(pytester: pytest.Pytester, mode: str) -> None:
    pytester.makeconftest(SURROGATE_CONFTEST)
    pytester.makeini("[pytest]\nbineval_model = surrogatefake/judge\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_hostile=SURROGATE_TEST)
    args = ["--bineval-report=report.json", "--bineval-html=report.html", "--bineval-cache=off",
            "-p", "no:cacheprovider"]
    if mode == "update-checklists":
        args.append("--bineval-update-checklists")
    result = pytester.runpytest_subprocess(*args)
    assert "UnicodeEncodeError" not in result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1, warnings=1)
    result.stdout.fnmatch_lines(["*BinevalEncodingWarning: 1 lone surrogate character(s)*in the reply of "
                                 "surrogatefake/judge were replaced by U+FFFD*"])
    assert result.ret == 0
    report = json.loads((pytester.path / "report.json").read_text(encoding="utf-8"))
    assert "Does it \ufffd hold?" in json.dumps(report, ensure_ascii=False)
    assert "Does it \ufffd hold?" in (pytester.path / "report.html").read_text(encoding="utf-8")
    pins = list((pytester.path / "__bineval__").rglob("*.json"))
    if mode == "report":
        result.stdout.fnmatch_lines(["unpinned checklists: 1 *"])
        return
    result.stdout.fnmatch_lines(["pinned checklists written: 1"])
    assert len(pins) == 1
    assert "Does it \ufffd hold?" in pins[0].read_text(encoding="utf-8")
