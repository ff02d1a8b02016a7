"""The check catalogue: constraints that code verifies exactly (counts, keywords, formats, case, language).

A check is a JSON object ``{"kind": "<kind>", <parameters>}``, e.g. ``{"kind": "max_sentences", "value": 3}``.
Each kind has a validated parameter model and a function ``output -> CheckResult(passed, explanation)``; the
explanation says what was measured ("5 sentences; the limit is 3"). The kinds follow IFEval's 25 verifiable
instructions (Zhou et al., 2023) and their common variants; counting rules follow IFEval's verifier where it has
one (words are ``\\w+`` runs, so unicode words count; paragraphs are separated by blank lines or a divider).

A ``regex`` check's pattern is matched by the ``regex`` package (a dependency), with a time limit: a pattern that
backtracks catastrophically on some text (``^(.*?,){11}P`` on ``"1," * 60 + "!"``; ``re`` also on
``^(\\w+\\s?)+$``, which ``regex`` answers at once) ends at its bound with a :class:`CheckTimeout` naming it,
never runs on. The bound is :data:`CHECK_SECONDS`, or what :meth:`Check.run` is
given (in an evaluation: ``--bineval-timeout``, within the evaluation's deadline).

Two kinds need the optional extra ``checks`` (``pip install -e ".[checks]"`` from a clone): sentence counts
(``pysbd``, a rule-based sentence boundary detector that knows abbreviations) and ``language`` (``langdetect``,
Google's language-detection port); both are imported only when such a check runs, and a missing one is a
:class:`~pytest_bineval.errors.MissingExtraError`. ``json`` with a ``schema`` uses ``jsonschema`` (same extra).
"""

from __future__ import annotations

import json
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, model_validator

from ..errors import CheckError, CheckTimeout, MissingExtraError, install_hint

if TYPE_CHECKING:
    from ..conversation import Conversation

EXTRA_HINT = install_hint("checks")

# Seconds a check may take when no bound is given (outside an evaluation: bineval bench, run_check).
CHECK_SECONDS = 10.0


class CheckResult(NamedTuple):
    """What a check found: whether the output passed, and what was measured."""

    passed: bool
    explanation: str


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _whole_number(value: Any) -> Any:
    """A count is written as a number: ``true`` (which Python counts as 1) or ``"3"`` is refused."""
    if isinstance(value, (bool, str)):
        raise ValueError(f"a whole number is meant here, not {value!r}")
    return value


Number = Annotated[int, BeforeValidator(_whole_number)]


class Count(_Params):
    value: Number = Field(ge=0)


class Between(_Params):
    min: Number = Field(ge=0)
    max: Number = Field(ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> Between:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class _Paragraphs(_Params):
    separator: Literal["blank_line", "***"] = Field(
        default="blank_line", description="what separates paragraphs: blank lines or the markdown divider ***")


class _Sections(_Params):
    marker: str | None = Field(default=None, description='the word that starts each section ("SECTION" for '
                                                         '"SECTION 1"); None: markdown headings')


class ParagraphCount(Count, _Paragraphs):
    pass


class ParagraphsBetween(Between, _Paragraphs):
    pass


class SectionCount(Count, _Sections):
    pass


class SectionsBetween(Between, _Sections):
    pass


PARAMS: dict[str, tuple[type[_Params], type[_Params]]] = {
    "paragraphs": (ParagraphCount, ParagraphsBetween), "sections": (SectionCount, SectionsBetween)}


class Words(_Params):
    words: list[str] = Field(min_length=1)


class KeywordCount(_Params):
    keyword: str = Field(min_length=1)
    min: Number | None = Field(default=None, ge=0)
    max: Number | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _bounded(self) -> KeywordCount:
        if self.min is None and self.max is None:
            raise ValueError("give min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"min ({self.min}) is larger than max ({self.max})")
        return self


class LetterCount(KeywordCount):
    keyword: str = Field(min_length=1, max_length=1, description="the letter")


class Text(_Params):
    text: str = Field(min_length=1)


class NoParams(_Params):
    pass


class Case(_Params):
    case: Literal["lower", "upper", "title"]


class Language(_Params):
    language: str = Field(min_length=2, max_length=8, description="ISO 639-1 code (en, fr, de, ...), as langdetect")


class JsonParams(_Params):
    json_schema: dict[str, Any] | None = Field(default=None, alias="schema")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Regex(_Params):
    pattern: str = Field(min_length=1)
    mode: Literal["search", "fullmatch", "absent"] = "search"

    @model_validator(mode="after")
    def _compiles(self) -> Regex:
        engine = _regex_engine()
        try:
            engine.compile(self.pattern)
        except engine.error as exc:
            raise ValueError(f"pattern {self.pattern!r} is not a regular expression: {exc}") from None
        return self


@cache
def _regex_engine() -> Any:
    """The ``regex`` package: ``re``'s syntax, and a ``timeout`` that ends a match that backtracks without end."""
    import regex

    return regex


class Options(_Params):
    options: list[str] = Field(min_length=2)


class Marker(_Params):
    marker: str = Field(default="P.S.", min_length=1)


class NthParagraph(_Params):
    paragraphs: Number = Field(ge=1)
    n: Number = Field(ge=1)
    word: str = Field(min_length=1)


@dataclass(frozen=True)
class Kind:
    """One kind of check: its parameters, its verifier and the yes/no question it answers."""

    name: str
    params: type[_Params]
    run: Callable[[Any, Any], CheckResult]  # (parameters, the reply's text; a Conversation for `conversation` kinds)
    question: Callable[[Any], str]
    needs: str | None = None  # the module of the optional extra `checks` it imports (None: none)
    # a verifier whose time depends on its parameters (a pattern): given the seconds it may take
    bounded: Callable[[Any, str, float], CheckResult] | None = None
    # reads a conversation (its tool calls: checks/tools.py), not the text of a reply
    conversation: bool = False


# ---------------------------------------------------------------------------------------------------------------
# counting units


def _words(text: str, p: Any = None) -> list[str]:
    return re.findall(r"\w+", text)


@cache
def _segmenter() -> Any:
    try:
        import pysbd
    except ImportError:
        raise MissingExtraError(f"sentence checks need pysbd: {EXTRA_HINT}") from None
    return pysbd.Segmenter(language="en", clean=False)


def sentences(text: str, p: Any = None) -> list[str]:
    """The sentences of ``text`` (pysbd: "Dr. Smith arrived at 3 p.m." is one sentence); lines of their own
    (list items, headings) are split too."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[*+-]|\d+[.)]|#+)\s)", text):
        if block.strip():
            out.extend(s for s in _segmenter().segment(block) if re.search(r"\w", s))
    return out


def _paragraphs(text: str, p: Any) -> list[str]:
    if p.separator == "***":  # IFEval's rule: every part between dividers must be non-empty
        parts = re.split(r"\s?\*\*\*\s?", text)
        inner = parts[1:-1]
        return [] if any(not x.strip() for x in inner) else [x for x in parts if x.strip()]
    return [x for x in re.split(r"\n\s*\n", text) if x.strip()]


def _bullets(text: str, p: Any) -> list[str]:
    return re.findall(r"^\s*(?:\*[^*\n]|-\s|\+\s)[^\n]*$", text, flags=re.MULTILINE)


def _highlights(text: str, p: Any) -> list[str]:
    found = [h for h in re.findall(r"\*[^\n*]*\*", text) if h.strip("* ")]
    found += [h for h in re.findall(r"\*\*[^\n*]*\*\*", text) if h.strip("* ")]
    return found


def _sections(text: str, p: Any) -> list[str]:
    if p.marker:  # IFEval's rule: "<marker> <number>" anywhere starts a section
        return re.split(r"\s?" + re.escape(p.marker) + r"\s?\d+\s?", text)[1:]
    return re.findall(r"^\s{0,3}#{1,6}\s+\S[^\n]*$", text, flags=re.MULTILINE)


def _numbers(text: str, p: Any) -> list[str]:
    return re.findall(r"\d+", text.translate(str.maketrans("", "", string.punctuation)))


def _unique_words(text: str, p: Any) -> list[str]:
    return sorted({w.lower() for w in _words(text)})


def _capital_words(text: str, p: Any) -> list[str]:
    return [w for w in _words(text) if w.isupper()]


UNITS: dict[str, tuple[Callable[[str, Any], list[str]], str, str]] = {
    # unit -> (how to find its items, singular, plural)
    "sentences": (sentences, "sentence", "sentences"),
    "words": (_words, "word", "words"),
    "characters": (lambda t, p: list(t.strip()), "character", "characters"),
    "paragraphs": (_paragraphs, "paragraph", "paragraphs"),
    "bullets": (_bullets, "bullet point", "bullet points"),
    "sections": (_sections, "section", "sections"),
    "placeholders": (lambda t, p: re.findall(r"\[[^\[\]\n]+\]", t), "placeholder in square brackets",
                     "placeholders in square brackets"),
    "highlights": (_highlights, "highlighted section", "highlighted sections"),
    "numbers": (_numbers, "number", "numbers"),
    "unique_words": (_unique_words, "distinct word", "distinct words"),
    "capital_words": (_capital_words, "word in capital letters", "words in capital letters"),
}


def _n(count: int, unit: str) -> str:
    _, one, many = UNITS[unit]
    return f"{count} {one if count == 1 else many}"


def _count_kinds(unit: str) -> list[Kind]:
    find = UNITS[unit][0]
    extra = "pysbd" if unit == "sentences" else None

    count, between_ = PARAMS.get(unit, (Count, Between))

    def measured(p: Any, out: str) -> int:
        return len(find(out, p))

    def at_most(p: Count, out: str) -> CheckResult:
        n = measured(p, out)
        return CheckResult(n <= p.value, f"{_n(n, unit)}; the limit is {p.value}")

    def at_least(p: Count, out: str) -> CheckResult:
        n = measured(p, out)
        return CheckResult(n >= p.value, f"{_n(n, unit)}; at least {p.value} required")

    def exactly(p: Count, out: str) -> CheckResult:
        n = measured(p, out)
        return CheckResult(n == p.value, f"{_n(n, unit)}; exactly {p.value} required")

    def between(p: Between, out: str) -> CheckResult:
        n = measured(p, out)
        return CheckResult(p.min <= n <= p.max, f"{_n(n, unit)}; {p.min} to {p.max} required")

    return [
        Kind(f"max_{unit}", count, at_most, lambda p: f"Does the response have at most {_n(p.value, unit)}?", extra),
        Kind(f"min_{unit}", count, at_least, lambda p: f"Does the response have at least {_n(p.value, unit)}?",
             extra),
        Kind(f"exact_{unit}", count, exactly, lambda p: f"Does the response have exactly {_n(p.value, unit)}?",
             extra),
        Kind(f"{unit}_between", between_, between,
             lambda p: f"Does the response have between {p.min} and {_n(p.max, unit)}?", extra),
    ]


# ---------------------------------------------------------------------------------------------------------------
# keywords, start and end, wrapping


def _occurrences(keyword: str, text: str) -> int:
    return len(re.findall(re.escape(keyword), text, flags=re.IGNORECASE))


def _includes(p: Words, out: str) -> CheckResult:
    missing = [w for w in p.words if not _occurrences(w, out)]
    if missing:
        return CheckResult(False, f"missing: {', '.join(map(repr, missing))}")
    return CheckResult(True, f"all of {', '.join(map(repr, p.words))} present")


def _forbidden(p: Words, out: str) -> CheckResult:
    found = [w for w in p.words if re.search(r"\b" + re.escape(w) + r"\b", out, flags=re.IGNORECASE)]
    if found:
        return CheckResult(False, f"uses {', '.join(map(repr, found))}")
    return CheckResult(True, f"none of {', '.join(map(repr, p.words))} used")


def _bounds_text(p: KeywordCount) -> str:
    if p.min is not None and p.max is not None:
        return f"exactly {p.min}" if p.min == p.max else f"{p.min} to {p.max}"
    return f"at least {p.min}" if p.min is not None else f"at most {p.max}"


def _within(n: int, p: KeywordCount) -> bool:
    return (p.min is None or n >= p.min) and (p.max is None or n <= p.max)


def _keyword_count(p: KeywordCount, out: str) -> CheckResult:
    n = _occurrences(p.keyword, out)
    return CheckResult(_within(n, p), f"{p.keyword!r} appears {n} time(s); {_bounds_text(p)} required")


def _letter_count(p: LetterCount, out: str) -> CheckResult:
    n = out.lower().count(p.keyword.lower())
    return CheckResult(_within(n, p), f"letter {p.keyword!r} appears {n} time(s); {_bounds_text(p)} required")


def _clip(text: str, n: int = 40) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def _starts_with(p: Text, out: str) -> CheckResult:
    ok = out.strip().lower().startswith(p.text.strip().lower())
    return CheckResult(ok, f"starts with {_clip(out.strip())}" + ("" if ok else f", not {_clip(p.text)}"))


def _ends_with(p: Text, out: str) -> CheckResult:
    ok = out.strip().lower().endswith(p.text.strip().lower())
    tail = out.strip()[-40:]
    return CheckResult(ok, f"ends with {_clip(tail)}" + ("" if ok else f", not {_clip(p.text)}"))


def _quoted(p: NoParams, out: str) -> CheckResult:
    s = out.strip()
    ok = len(s) > 1 and s[0] == '"' and s[-1] == '"'
    return CheckResult(ok, "wrapped in double quotes" if ok else f"not wrapped in double quotes: {_clip(s, 20)}")


def _title(p: NoParams, out: str) -> CheckResult:
    found = [t for t in re.findall(r"<<[^\n]+?>>", out) if t[2:-2].strip()]
    return CheckResult(bool(found), f"title {found[0]}" if found else "no title in <<double angular brackets>>")


def _postscript(p: Marker, out: str) -> CheckResult:
    pattern = r"\s*p\.\s?s\..*$" if p.marker.upper() == "P.S." else r"\s*" + re.escape(p.marker) + r".*$"
    ok = bool(re.findall(pattern, out.lower() if p.marker.upper() == "P.S." else out, flags=re.MULTILINE))
    return CheckResult(ok, f"a postscript starting with {p.marker!r}" if ok else f"no postscript starting with "
                                                                                 f"{p.marker!r}")


def _one_of(p: Options, out: str) -> CheckResult:
    found = [o for o in p.options if o in out]
    return CheckResult(bool(found), f"answers {found[0]!r}" if found else
                       f"none of {', '.join(map(repr, p.options))} in the response")


def _two_responses(p: NoParams, out: str) -> CheckResult:
    parts = out.split("******")
    inner_empty = any(not x.strip() for x in parts[1:-1])
    filled = [x.strip() for x in parts if x.strip()]
    if inner_empty or len(filled) != 2:
        return CheckResult(False, f"{len(filled)} response(s) separated by ******; 2 required")
    ok = filled[0] != filled[1]
    return CheckResult(ok, "two different responses separated by ******" if ok else "the two responses are the same")


def _nth_paragraph(p: NthParagraph, out: str) -> CheckResult:
    parts = [x for x in re.split(r"\n\s*\n", out) if x.strip()]
    if len(parts) != p.paragraphs:
        return CheckResult(False, f"{len(parts)} paragraph(s); exactly {p.paragraphs} required")
    if p.n > len(parts):
        return CheckResult(False, f"no paragraph {p.n}")
    first = parts[p.n - 1].strip().split()[0] if parts[p.n - 1].strip() else ""
    word = re.sub(r"[^\w]", "", first).lower()
    ok = word == p.word.lower()
    return CheckResult(ok, f"paragraph {p.n} starts with {first!r}" + ("" if ok else f", not {p.word!r}"))


# ---------------------------------------------------------------------------------------------------------------
# punctuation, case, language, JSON, regex


def _no_commas(p: NoParams, out: str) -> CheckResult:
    n = out.count(",") + out.count("\uff0c")  # the fullwidth comma too
    return CheckResult(n == 0, "no commas" if n == 0 else f"{n} comma(s); none allowed")


def _title_case_ok(word: str) -> bool:
    if len(word) == 1:
        return not word.islower()
    return not (word[0].islower() and (word[1:].islower() or word[1:].isupper()))


def _case(p: Case, out: str) -> CheckResult:
    if p.case == "lower":
        bad = [w for w in _words(out) if w != w.lower()]
        return CheckResult(not bad, "all lowercase" if not bad else f"{len(bad)} word(s) with capitals, e.g. "
                                                                   f"{bad[0]!r}")
    if p.case == "upper":
        bad = [w for w in _words(out) if w != w.upper()]
        return CheckResult(not bad, "all capitals" if not bad else f"{len(bad)} word(s) not in capitals, e.g. "
                                                                   f"{bad[0]!r}")
    bad = [w for w in re.findall(r"[^\W\d_][\w'-]*", out) if not _title_case_ok(w)]
    return CheckResult(not bad, "title case" if not bad else f"{len(bad)} word(s) not capitalized, e.g. {bad[0]!r}")


@cache
def _langdetect() -> Any:
    try:
        import langdetect
    except ImportError:
        raise MissingExtraError(f"the language check needs langdetect: {EXTRA_HINT}") from None
    langdetect.DetectorFactory.seed = 0  # deterministic
    return langdetect


def _language(p: Language, out: str) -> CheckResult:
    detector = _langdetect()
    try:
        found = str(detector.detect(out))
    except detector.LangDetectException:
        return CheckResult(True, "no language detectable (no letters); passes, as IFEval's verifier")
    ok = found.split("-")[0] == p.language.lower().split("-")[0]
    return CheckResult(ok, f"detected language {found!r}" + ("" if ok else f", not {p.language!r}"))


_FENCE = re.compile(r"^```[\w-]*\s*\n?(.*?)\n?```$", re.DOTALL)


def _json(p: JsonParams, out: str) -> CheckResult:
    text = out.strip()
    fence = _FENCE.match(text)
    if fence:
        text = fence.group(1).strip()
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data":
            return CheckResult(False, f"valid JSON up to character {exc.pos}, then extra text "
                                      f"{_clip(text[exc.pos:], 20)}")
        return CheckResult(False, f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}")
    if p.json_schema is None:
        return CheckResult(True, f"valid JSON ({type(value).__name__})")
    try:
        import jsonschema
    except ImportError:
        raise MissingExtraError(f"JSON schema checks need jsonschema: {EXTRA_HINT}") from None
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(p.json_schema).iter_errors(value))
    if error is None:
        return CheckResult(True, "valid JSON matching the schema")
    where = "/".join(map(str, error.absolute_path)) or "(root)"
    return CheckResult(False, f"JSON does not match the schema at {where}: {error.message}")


def _regex(p: Regex, out: str, seconds: float = CHECK_SECONDS) -> CheckResult:
    """The pattern matched by the ``regex`` package within ``seconds`` (:class:`CheckTimeout` beyond); the GIL is
    released while it matches (``concurrent``: the text is a ``str``, which cannot change under it)."""
    engine = _regex_engine()
    try:
        if p.mode == "fullmatch":
            ok = engine.fullmatch(p.pattern, out.strip(), flags=engine.DOTALL, timeout=seconds,
                                  concurrent=True) is not None
            return CheckResult(ok, f"the response {'matches' if ok else 'does not match'} /{p.pattern}/ as a whole")
        found = engine.search(p.pattern, out, flags=engine.MULTILINE, timeout=seconds, concurrent=True)
    except TimeoutError:
        shown = p.pattern if len(p.pattern) <= 60 else p.pattern[:59] + "…"
        raise CheckTimeout(f"the regular expression /{shown}/ did not finish within "
                           f"{seconds:g} s on the response ({len(out):,} characters): a pattern with nested "
                           "repetition, such as (\\w+\\s?)+, backtracks without end on some texts; rewrite it "
                           "without one") from None
    if p.mode == "absent":
        return CheckResult(found is None, f"/{p.pattern}/ not found" if found is None else
                           f"/{p.pattern}/ found: {found.group(0)[:20]!r}")
    return CheckResult(found is not None, f"/{p.pattern}/ found: {found.group(0)[:20]!r}" if found else
                       f"/{p.pattern}/ not found")


def _words_list(words: list[str]) -> str:
    return ", ".join(map(repr, words))


KINDS: dict[str, Kind] = {k.name: k for unit in UNITS for k in _count_kinds(unit)}
KINDS.update({k.name: k for k in (
    Kind("includes_keywords", Words, _includes,
         lambda p: f"Does the response include {_words_list(p.words)}?"),
    Kind("forbidden_words", Words, _forbidden,
         lambda p: f"Does the response avoid the words {_words_list(p.words)}?"),
    Kind("keyword_count", KeywordCount, _keyword_count,
         lambda p: f"Does {p.keyword!r} appear {_bounds_text(p)} times in the response?"),
    Kind("letter_count", LetterCount, _letter_count,
         lambda p: f"Does the letter {p.keyword!r} appear {_bounds_text(p)} times in the response?"),
    Kind("starts_with", Text, _starts_with, lambda p: f"Does the response start with {_clip(p.text)}?"),
    Kind("ends_with", Text, _ends_with, lambda p: f"Does the response end with {_clip(p.text)}?"),
    Kind("quoted", NoParams, _quoted, lambda p: "Is the whole response wrapped in double quotation marks?"),
    Kind("title", NoParams, _title, lambda p: "Does the response have a title in <<double angular brackets>>?"),
    Kind("postscript", Marker, _postscript, lambda p: f"Does the response end with a postscript starting with "
                                                      f"{p.marker!r}?"),
    Kind("one_of", Options, _one_of, lambda p: f"Does the response answer with one of {_words_list(p.options)}?"),
    Kind("two_responses", NoParams, _two_responses,
         lambda p: "Does the response give two different responses separated by ******?"),
    Kind("nth_paragraph_first_word", NthParagraph, _nth_paragraph,
         lambda p: f"Does the response have {p.paragraphs} paragraphs, paragraph {p.n} starting with {p.word!r}?"),
    Kind("no_commas", NoParams, _no_commas, lambda p: "Does the response avoid commas?"),
    Kind("letter_case", Case, _case, lambda p: {"lower": "Is the response all in lowercase letters?",
                                                "upper": "Is the response all in capital letters?",
                                                "title": "Is the response in title case?"}[p.case]),
    Kind("language", Language, _language, lambda p: f"Is the response written in language {p.language!r}?",
         "langdetect"),
    Kind("json", JsonParams, _json, lambda p: "Is the response valid JSON" + (
        " matching the given schema?" if p.json_schema is not None else "?")),
    Kind("regex", Regex, _regex, lambda p: {"search": f"Does the response contain a match of /{p.pattern}/?",
                                            "fullmatch": f"Does the whole response match /{p.pattern}/?",
                                            "absent": f"Does the response avoid /{p.pattern}/?"}[p.mode],
         bounded=_regex),
)})


# ---------------------------------------------------------------------------------------------------------------
# the API


@dataclass(frozen=True)
class Check:
    """A validated check: its kind and parameters."""

    kind: Kind
    params: _Params

    def run(self, output: str | Conversation, seconds: float = CHECK_SECONDS) -> CheckResult:
        """Verify ``output``; a check whose time depends on its parameters (a ``regex``) ends within ``seconds``
        (:class:`CheckTimeout` beyond: an error of the question, never a verdict). A check of the text reads a
        conversation's last assistant reply; a check of tool calls reads a text as a reply that calls none."""
        from ..conversation import Conversation, as_conversation

        if self.kind.conversation:
            return self.kind.run(self.params, as_conversation(output))
        if isinstance(output, Conversation):
            output = output.final_reply()
        if self.kind.bounded is not None:
            return self.kind.bounded(self.params, output, seconds)
        return self.kind.run(self.params, output)

    @property
    def available(self) -> bool:
        """Whether the library this check needs is installed (the optional extra ``checks``)."""
        import importlib.util

        needs = "jsonschema" if self.kind.name == "json" and self.spec().get("schema") is not None else self.kind.needs
        return needs is None or importlib.util.find_spec(needs) is not None

    @property
    def question(self) -> str:
        """The yes/no question this check answers."""
        return self.kind.question(self.params)

    def spec(self) -> dict[str, Any]:
        """The JSON form: ``{"kind": ..., <parameters>}``."""
        return {"kind": self.kind.name, **self.params.model_dump(mode="json", by_alias=True, exclude_none=True)}


def parse_check(spec: Mapping[str, Any] | Check) -> Check:
    """A validated :class:`Check` of ``{"kind": ..., <parameters>}``; anything else is a :class:`CheckError`
    saying what is wrong (an unknown kind lists the catalogue's)."""
    if isinstance(spec, Check):
        return spec
    if not isinstance(spec, Mapping):
        raise CheckError(f"a check must be an object like {{\"kind\": \"max_sentences\", \"value\": 3}}, "
                         f"not {type(spec).__name__}")
    name = spec.get("kind")
    if not isinstance(name, str) or name not in KINDS:
        raise CheckError(f"unknown check kind {name!r}; the catalogue has: {', '.join(sorted(KINDS))}")
    kind = KINDS[name]
    try:
        params = kind.params.model_validate({k: v for k, v in spec.items() if k != "kind"})
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(parameters)'}: {e['msg']}" for e in exc.errors())
        raise CheckError(f"check {name!r}: {problems}") from None
    return Check(kind, params)


def run_check(spec: Mapping[str, Any] | Check, output: str | Conversation,
              seconds: float = CHECK_SECONDS) -> CheckResult:
    """Verify ``output`` against the check ``spec`` (within ``seconds``, see :meth:`Check.run`)."""
    return parse_check(spec).run(output, seconds)
