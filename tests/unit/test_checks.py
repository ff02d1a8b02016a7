"""The check catalogue: every kind against hand-made outputs, with the edge cases that break naive counters."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from pytest_bineval.checks import KINDS, CheckError, CheckTimeout, parse_check, run_check
from pytest_bineval.checks import catalogue as cat
from pytest_bineval.conversation import Conversation
from pytest_bineval.errors import MissingExtraError

AGENT_RUN = Conversation([
    {"role": "user", "content": "Where is A1?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": '{"id": "A1"}'}},
        {"id": "c2", "type": "function", "function": {"name": "refund", "arguments": "{}"}}]},
])

CASES: list[tuple[dict[str, Any], str | Conversation, bool, str]] = [
    # sentences: abbreviations, times and initials do not end a sentence (pysbd)
    ({"kind": "max_sentences", "value": 3}, "Dr. Smith met Mr. J. R. Ewing at 3 p.m. in Washington D.C. today.",
     True, "1 sentence; the limit is 3"),
    ({"kind": "max_sentences", "value": 3}, "One. Two! Three? Four. Five.", False, "5 sentences; the limit is 3"),
    ({"kind": "sentences_between", "min": 2, "max": 3}, "It rained. We stayed in, e.g. to read.", True,
     "2 sentences; 2 to 3 required"),
    ({"kind": "min_sentences", "value": 2}, "The value is 3.14 and rising.", False, "1 sentence; at least 2 required"),
    ({"kind": "exact_sentences", "value": 3}, "Intro line\n\n- first item\n- second item", True,
     "3 sentences; exactly 3 required"),
    # words: unicode letters are word characters
    ({"kind": "max_words", "value": 4}, "Ça coûte déjà trop — über straße!", False, "6 words; the limit is 4"),
    ({"kind": "words_between", "min": 3, "max": 3}, "日本語 naïve café", True, "3 words; 3 to 3 required"),
    ({"kind": "min_words", "value": 1}, "", False, "0 words; at least 1 required"),
    ({"kind": "max_characters", "value": 5}, "  hello  ", True, "5 characters; the limit is 5"),
    ({"kind": "exact_paragraphs", "value": 2}, "First para.\nstill first.\n\n  \nSecond.", True,
     "2 paragraphs; exactly 2 required"),
    ({"kind": "exact_paragraphs", "value": 2, "separator": "***"}, "One\n***\nTwo", True,
     "2 paragraphs; exactly 2 required"),
    ({"kind": "exact_paragraphs", "value": 2, "separator": "***"}, "One\n***\n***\nTwo", False,
     "0 paragraphs; exactly 2 required"),
    ({"kind": "exact_bullets", "value": 2}, "* a\n* b\n**bold** line\n  - c", False,
     "3 bullet points; exactly 2 required"),
    ({"kind": "min_sections", "value": 2, "marker": "SECTION"}, "SECTION 1\nhi\nSECTION 2\nthere", True,
     "2 sections; at least 2 required"),
    ({"kind": "max_sections", "value": 1}, "# Title\ntext\n## Part\nmore", False, "2 sections; the limit is 1"),
    ({"kind": "min_placeholders", "value": 2}, "Dear [name], see you at [address].", True,
     "2 placeholders in square brackets; at least 2 required"),
    ({"kind": "min_highlights", "value": 2}, "*one* and **two** but not ** **", True,
     "2 highlighted sections; at least 2 required"),
    ({"kind": "exact_numbers", "value": 2}, "It costs 3.50 in 2024.", True, "2 numbers; exactly 2 required"),
    ({"kind": "min_unique_words", "value": 3}, "The the THE cat", False, "2 distinct words; at least 3 required"),
    ({"kind": "max_capital_words", "value": 1}, "NASA and the ESA met", False,
     "2 words in capital letters; the limit is 1"),
    # keywords
    ({"kind": "includes_keywords", "words": ["Paris", "rain"]}, "In paris it rained.", True,
     "all of 'Paris', 'rain' present"),
    ({"kind": "includes_keywords", "words": ["Paris", "snow"]}, "In Paris it rained.", False, "missing: 'snow'"),
    ({"kind": "forbidden_words", "words": ["bad"]}, "A badge is fine.", True, "none of 'bad' used"),
    ({"kind": "forbidden_words", "words": ["bad"]}, "That was BAD.", False, "uses 'bad'"),
    ({"kind": "keyword_count", "keyword": "whisper", "min": 3, "max": 3}, "Whisper, whisper, whispers.", True,
     "'whisper' appears 3 time(s); exactly 3 required"),
    ({"kind": "keyword_count", "keyword": "echo", "max": 1}, "echo echo", False,
     "'echo' appears 2 time(s); at most 1 required"),
    ({"kind": "letter_count", "keyword": "z", "min": 2}, "Zebra zone", True,
     "letter 'z' appears 2 time(s); at least 2 required"),
    # start, end, wrapping
    ({"kind": "starts_with", "text": "Dear Sir"}, "  dear sir, hello", True, "starts with 'dear sir, hello'"),
    ({"kind": "ends_with", "text": "Any other questions?"}, "Done. Any other questions?\n", True,
     "ends with 'Done. Any other questions?'"),
    ({"kind": "ends_with", "text": "Bye."}, "Bye. P.S. more", False, "ends with 'Bye. P.S. more', not 'Bye.'"),
    ({"kind": "quoted"}, ' "All of it." ', True, "wrapped in double quotes"),
    ({"kind": "quoted"}, '"Half" of it', False, "not wrapped in double quotes: '\"Half\" of it'"),
    ({"kind": "title"}, "<<A Poem>>\nRoses...", True, "title <<A Poem>>"),
    ({"kind": "title"}, "<< >> nothing", False, "no title in <<double angular brackets>>"),
    ({"kind": "postscript"}, "Body.\n\nP.S. I love you.", True, "a postscript starting with 'P.S.'"),
    ({"kind": "postscript", "marker": "P.P.S"}, "Body.\nP.S. only", False, "no postscript starting with 'P.P.S'"),
    ({"kind": "one_of", "options": ["My answer is yes.", "My answer is no."]}, "My answer is no.", True,
     "answers 'My answer is no.'"),
    ({"kind": "two_responses"}, "First take.\n******\nSecond take.", True,
     "two different responses separated by ******"),
    ({"kind": "two_responses"}, "Same.\n******\nSame.", False, "the two responses are the same"),
    ({"kind": "two_responses"}, "Only one.", False, "1 response(s) separated by ******; 2 required"),
    ({"kind": "nth_paragraph_first_word", "paragraphs": 2, "n": 2, "word": "then"}, "First.\n\nThen, more.", True,
     "paragraph 2 starts with 'Then,'"),
    # punctuation, case
    ({"kind": "no_commas"}, "No commas here.", True, "no commas"),
    ({"kind": "no_commas"}, "One, two, three", False, "2 comma(s); none allowed"),
    ({"kind": "letter_case", "case": "lower"}, "all lower, même ça 123", True, "all lowercase"),
    ({"kind": "letter_case", "case": "lower"}, "not Lower", False, "1 word(s) with capitals, e.g. 'Lower'"),
    ({"kind": "letter_case", "case": "upper"}, "ALL CAPS 42!", True, "all capitals"),
    ({"kind": "letter_case", "case": "title"}, "The Quick Brown Fox", True, "title case"),
    ({"kind": "letter_case", "case": "title"}, "The quick Brown", False, "1 word(s) not capitalized, e.g. 'quick'"),
    # JSON: fences are allowed, trailing text is not
    ({"kind": "json"}, '```json\n{"a": [1, 2]}\n```', True, "valid JSON (dict)"),
    ({"kind": "json"}, '{"a": 1}\nHope this helps!', False,
     "valid JSON up to character 9, then extra text 'Hope this helps!'"),
    ({"kind": "json"}, "{'a': 1}", False,
     "not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2"),
    ({"kind": "json", "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
     '{"n": "three"}', False, "JSON does not match the schema at n: 'three' is not of type 'integer'"),
    ({"kind": "json", "schema": {"type": "object", "required": ["n"]}}, '{"n": 3}', True,
     "valid JSON matching the schema"),
    # regex
    ({"kind": "regex", "pattern": r"\d{4}-\d{2}-\d{2}"}, "Due 2025-01-31.", True,
     "/\\d{4}-\\d{2}-\\d{2}/ found: '2025-01-31'"),
    ({"kind": "regex", "pattern": r"\s", "mode": "absent"}, "no-space", True, "/\\s/ not found"),
    ({"kind": "regex", "pattern": r"[A-Z]+", "mode": "fullmatch"}, "ABC d", False,
     "the response does not match /[A-Z]+/ as a whole"),
    # language (langdetect)
    ({"kind": "language", "language": "fr"}, "Bonjour à tous, je suis très heureux de vous voir aujourd'hui.", True,
     "detected language 'fr'"),
    ({"kind": "language", "language": "de"}, "This is plainly written in the English language, isn't it?", False,
     "detected language 'en', not 'de'"),
    # tool calls of a conversation (checks/tools.py; tests/unit/test_conversation.py has the rest)
    ({"kind": "tool_called", "name": "lookup"}, AGENT_RUN, True, 'called \'lookup\' in turn 2 with {"id": "A1"}'),
    ({"kind": "tool_not_called", "name": "refund"}, AGENT_RUN, False, "called 'refund' in turn 2 with {}"),
    ({"kind": "tool_order", "names": ["refund", "lookup"]}, AGENT_RUN, False,
     "'lookup' was called in turn 2, before 'refund' (turn 2), and not after it"),
    ({"kind": "tool_arguments_schema", "name": "lookup", "schema": {"type": "object"}}, AGENT_RUN, True,
     "the arguments of 1 call(s) of 'lookup' match the schema"),
]


@pytest.mark.parametrize(("spec", "output", "passed", "explanation"), CASES,
                         ids=[f"{c[0]['kind']}-{i}" for i, c in enumerate(CASES)])
def test_check_kind(spec: dict[str, Any], output: str | Conversation, passed: bool, explanation: str) -> None:
    result = run_check(spec, output)
    assert (result.passed, result.explanation) == (passed, explanation)


def test_every_kind_is_exercised() -> None:
    """Each kind family has a hand-made case above (count kinds of a unit share one verifier)."""
    tested = {c[0]["kind"] for c in CASES}
    families = {k.split("_", 1)[1] if k.startswith(("max_", "min_", "exact_")) else k.removesuffix("_between")
                for k in tested}
    for name in KINDS:
        family = name.split("_", 1)[1] if name.startswith(("max_", "min_", "exact_")) else name.removesuffix("_between")
        assert family in families, name


def test_unknown_kind_lists_the_catalogue() -> None:
    with pytest.raises(CheckError, match=r"unknown check kind 'max_sentence'; the catalogue has: .*max_sentences"):
        parse_check({"kind": "max_sentence", "value": 3})


@pytest.mark.parametrize(("spec", "message"), [
    ({"kind": "max_words", "value": -1}, "check 'max_words': value: Input should be greater than or equal to 0"),
    ({"kind": "max_words", "value": 3, "limit": 4}, "limit: Extra inputs are not permitted"),
    ({"kind": "words_between", "min": 5, "max": 2}, "min (5) is larger than max (2)"),
    ({"kind": "keyword_count", "keyword": "x"}, "give min, max or both"),
    ({"kind": "regex", "pattern": "("}, "is not a regular expression"),
    ({"kind": "max_words", "value": 3, "separator": "***"}, "separator: Extra inputs are not permitted"),
    # a count is a number: true (which Python counts as 1) and "3" are refused, naming the field
    ({"kind": "max_words", "value": True}, "value: Value error, a whole number is meant here, not True"),
    ({"kind": "max_sentences", "value": "3"}, "value: Value error, a whole number is meant here, not '3'"),
    ({"kind": "words_between", "min": False, "max": 3}, "min: Value error, a whole number is meant here, not False"),
    ({"kind": "keyword_count", "keyword": "x", "max": True}, "max: Value error, a whole number is meant here"),
    ({"kind": "nth_paragraph_first_word", "paragraphs": 2, "n": True, "word": "a"}, "n: Value error, a whole number"),
])
def test_bad_parameters_say_which(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(CheckError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_check(spec)


def test_spec_round_trips_and_has_a_question() -> None:
    check = parse_check({"kind": "max_sentences", "value": 3})
    assert check.spec() == {"kind": "max_sentences", "value": 3}
    assert check.question == "Does the response have at most 3 sentences?"
    assert parse_check({"kind": "json", "schema": {"type": "object"}}).spec() == {"kind": "json",
                                                                                  "schema": {"type": "object"}}


@pytest.mark.parametrize(("spec", "library"), [({"kind": "max_sentences", "value": 2}, "pysbd"),
                                               ({"kind": "language", "language": "en"}, "langdetect")])
def test_missing_library_is_a_missing_extra(monkeypatch: pytest.MonkeyPatch, spec: dict[str, Any],
                                            library: str) -> None:
    real_import = builtins.__import__

    def no_library(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == library:
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    cat._segmenter.cache_clear()
    cat._langdetect.cache_clear()
    monkeypatch.setattr(builtins, "__import__", no_library)
    try:
        with pytest.raises(MissingExtraError,
                           match=rf'need[s]? {library}: pip install -e "\.\[checks\]" \(in a clone of pytest-bineval'):
            run_check(spec, "Some text here.")
    finally:
        cat._segmenter.cache_clear()
        cat._langdetect.cache_clear()


# -- a check is bounded like a judge request --------------------------------------------------------------------
# A pattern the `regex` engine backtracks on without end: C(n, 11) ways to split "1," * n + "!" (n = 60: 3e11).
HOSTILE = {"kind": "regex", "pattern": r"^(.*?,){11}P"}


@pytest.mark.parametrize("mode", ["search", "fullmatch", "absent"])
def test_a_pattern_that_backtracks_without_end_stops_at_its_bound_saying_it(mode: str) -> None:
    with pytest.raises(CheckTimeout) as info:
        run_check({**HOSTILE, "mode": mode}, "1," * 60 + "!", 0.2)
    message = str(info.value)
    assert message.startswith("the regular expression /^(.*?,){11}P/ did not finish within 0.2 s on the response "
                              "(121 characters)")
    assert "nested repetition" in message


def test_the_probes_pattern_is_no_hang_with_the_regex_engine() -> None:
    """The issue's ``^(\\w+\\s?)+$`` took 30 s with ``re`` on 26 letters and a dot (doubling with each more);
    the regex engine answers it at once, whatever the length, within the default bound."""
    for n in (26, 40, 2000):
        assert run_check({"kind": "regex", "pattern": r"^(\w+\s?)+$"}, "a" * n + ".") == (
            False, r"/^(\w+\s?)+$/ not found")


def test_a_pattern_is_read_as_before_by_the_regex_engine() -> None:
    assert run_check({"kind": "regex", "pattern": r"\bfoo\d{2}\b"}, "x foo42 y").passed
    assert run_check({"kind": "regex", "pattern": r"(?i)^HELLO", "mode": "search"}, "hello\nworld").passed
    assert run_check({"kind": "regex", "pattern": r"^world$"}, "hello\nworld").passed  # MULTILINE, as before
    assert run_check({"kind": "regex", "pattern": r"a.b", "mode": "fullmatch"}, "a\nb").passed  # DOTALL
    assert not run_check({"kind": "regex", "pattern": r"secret", "mode": "absent"}, "the secret").passed


def test_a_check_that_overruns_its_bound_is_left_behind_with_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any check, not only a pattern: the evaluation waits no longer than the bound and the grace (the check's
    thread is left to finish on its own)."""
    import asyncio
    import threading

    from pytest_bineval.checks import running

    release = threading.Event()

    def stuck(p: Any, out: str) -> cat.CheckResult:
        release.wait(30)
        return cat.CheckResult(True, "never seen")

    check = cat.Check(cat.Kind("stuck", cat.NoParams, stuck, lambda p: "?"), cat.NoParams())
    monkeypatch.setattr(running, "GRACE_SECONDS", 0.05)
    try:
        with pytest.raises(CheckTimeout, match=r"the check 'stuck' did not finish within 0.05 s on the response "
                                               r"\(3 characters\)"):
            asyncio.run(running.arun_check(check, "abc", 0.05))
    finally:
        release.set()
    assert asyncio.run(running.arun_check({"kind": "max_words", "value": 2}, "one two", 5.0)) == (
        True, "2 words; the limit is 2")
