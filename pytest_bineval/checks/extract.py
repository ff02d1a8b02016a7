"""The deterministic extractor: the verifiable constraints a task text states, as checks of the catalogue.

``extract_checks("Summarize it in 2-3 sentences, as JSON, without commas.")`` gives ``sentences_between`` 2-3,
``json`` and ``no_commas``. It reads English phrasings of the constraints ("under 100 words", "at least 3 bullet
points", "in French", "do not use the words ...", "wrap your entire response in double quotation marks", ...) with
regular expressions: no model, so it works the same with every judge. What it misses stays a judge question;
what it finds is measured on IFEval's prompts (``bineval bench checks``, docs/checks.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .catalogue import Check, parse_check

_NUMBER_WORDS = {w: i for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"))}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "a single": 1, "single": 1, "a": 1, "an": 1})
_ORDINALS = {w: i + 1 for i, w in enumerate(
    ["first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth"])}
NUM = r"(?P<n>\d+|zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|" \
      r"sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty)"

LANGUAGES = {
    "english": "en", "french": "fr", "german": "de", "spanish": "es", "italian": "it", "portuguese": "pt",
    "russian": "ru", "japanese": "ja", "korean": "ko", "arabic": "ar", "hindi": "hi", "bengali": "bn",
    "bangla": "bn", "tamil": "ta", "telugu": "te", "kannada": "kn", "marathi": "mr", "gujarati": "gu",
    "punjabi": "pa", "urdu": "ur", "nepali": "ne", "persian": "fa", "farsi": "fa", "swahili": "sw", "thai": "th",
    "vietnamese": "vi", "finnish": "fi", "bulgarian": "bg", "hebrew": "he", "turkish": "tr", "polish": "pl",
    "dutch": "nl", "greek": "el", "indonesian": "id", "swedish": "sv", "ukrainian": "uk", "czech": "cs",
    "romanian": "ro", "hungarian": "hu", "danish": "da", "norwegian": "no", "malayalam": "ml",
}
_LANG = r"(?P<lang>" + "|".join(LANGUAGES) + r")"

# quantifiers -> (bound, offset): "less than 5" is at most 4
_AT_MOST = {"less than": -1, "fewer than": -1, "under": -1, "below": -1, "at most": 0, "no more than": 0,
            "not more than": 0, "a maximum of": 0, "maximum of": 0, "max": 0, "up to": 0, "no longer than": 0,
            "not exceeding": 0, "within": 0, "longer than": 0}
_AT_LEAST = {"at least": 0, "a minimum of": 0, "minimum of": 0, "more than": 1, "over": 1, "no less than": 0,
             "no fewer than": 0, "not less than": 0}
_QUANT = r"(?P<q>" + "|".join(sorted([*_AT_MOST, *_AT_LEAST, "exactly", "only"], key=len, reverse=True)) + r")"

_UNITS = {  # a phrasing of the unit -> the catalogue's unit
    r"sentences?": "sentences", r"words?": "words", r"characters?": "characters", r"paragraphs?": "paragraphs",
    r"bullet(?:[ -]points?|s)?": "bullets", r"placeholders?": "placeholders",
}
_UNIT = r"(?P<unit>" + "|".join(_UNITS) + r")\b"


def _number(text: str) -> int:
    text = text.lower().strip()
    return int(text) if text.isdigit() else _NUMBER_WORDS[text]


def _unit(text: str) -> str:
    return next(unit for pattern, unit in _UNITS.items() if re.fullmatch(pattern, text.lower()))


def _bounded(unit: str, q: str, n: int) -> dict[str, Any] | None:
    q = q.lower()
    if q in _AT_MOST:
        return {"kind": f"max_{unit}", "value": n + _AT_MOST[q]} if n + _AT_MOST[q] >= 0 else None
    if q in _AT_LEAST:
        return {"kind": f"min_{unit}", "value": n + _AT_LEAST[q]}
    return {"kind": f"exact_{unit}", "value": n}


def _quoted_words(text: str) -> list[str]:
    return [a or b for a, b in re.findall(r"[\"“”]([^\"“”]+)[\"“”]|(?<![A-Za-z])'([^']+)'(?![A-Za-z])", text)]


def _word_list(text: str) -> list[str]:
    """``"a", "b" and "c"`` or ``a, b and c`` (up to the end of the phrase)."""
    quoted = _quoted_words(text)
    cut = re.split(r"\b(?:in (?:the|your|a|an|each|every|this)|to|into|throughout|within|anywhere|somewhere|when|"
                   r"while|from|at|for|as|so|and also|but)\b|[.;:!?()\n]|,\s*(?:but|and then|then)\b",
                   text, maxsplit=1)[0]
    inside = _quoted_words(cut)
    if inside or quoted:
        return [q.strip() for q in (inside or quoted[:1]) if q.strip()]
    text = cut
    words = [w.strip(" '\"*") for w in re.split(r",|\band\b|\bor\b|\bnor\b", text)]
    return [w for w in words if w and len(w.split()) <= 2 and w.lower() not in {"the", "any", "a", "words"}]


def _sentences_of(task: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])|\n+", task) if s.strip()]


def _counts(task: str) -> Iterator[dict[str, Any]]:
    """Counts of sentences, words, characters, paragraphs, bullets and placeholders."""
    gap = r"(?:\s+(?!and\b|or\b)[\w-]+){0,2}?"  # "at least 3 *short* sentences", "100 *English* words"
    for m in re.finditer(r"\b(?P<a>\d+)\s*(?:-|\u2013|to)\s*(?P<b>\d+)" + gap + r"\s+" + _UNIT, task, re.I):
        if _counted(task, m):
            yield _spec(task, {"kind": f"{_unit(m['unit'])}_between", "min": int(m["a"]), "max": int(m["b"])})
    for m in re.finditer(r"\bbetween\s+(?P<a>\d+)\s+and\s+(?P<b>\d+)" + gap + r"\s+" + _UNIT, task, re.I):
        if _counted(task, m):
            yield _spec(task, {"kind": f"{_unit(m['unit'])}_between", "min": int(m["a"]), "max": int(m["b"])})
    for m in re.finditer(r"\b" + _QUANT + r"\s+(?:a total of\s+)?" + NUM + gap + r"\s+" + _UNIT, task, re.I):
        if m["q"].lower() == "only" and _unit(m["unit"]) not in ("sentences", "paragraphs", "bullets"):
            continue
        spec = _bounded(_unit(m["unit"]), m["q"], _number(m["n"]))
        if spec and _counted(task, m):
            yield _spec(task, spec)
    for m in re.finditer(r"\b" + NUM + r"\s+(?:(?P<unit>" + "|".join(_UNITS) + r")\s+)?or\s+(?P<d>less|fewer|more)"
                         r"(?:\s+(?P<unit2>" + "|".join(_UNITS) + r"))?\b", task, re.I):
        unit_text = m["unit"] or m["unit2"]
        if unit_text and _counted(task, m):
            unit = _unit(unit_text)
            yield _spec(task, {"kind": f"{'min' if m['d'].lower() == 'more' else 'max'}_{unit}",
                               "value": _number(m["n"])})
    for m in re.finditer(r"\b" + NUM + r"(?:\s+|-)" + r"(?P<unit>sentences?|paragraphs?|bullet[ -]points?)\b"
                         r"(?!\s+or\b)", task, re.I):
        before = task[max(0, m.start() - 30):m.start()].lower()
        if re.search(r"(?:less than|fewer than|under|below|at most|more than|least|maximum of|minimum of|up to|"
                     r"exactly|only|between|\d\s*(?:-|\u2013|to|or)|and)\s*$", before):
            continue
        if m["n"].lower() in ("a", "an", "single"):
            continue
        unit = _unit(m["unit"])
        if re.match(r"\s+(?:long|or so)", task[m.end():]) is None and not re.search(
                r"\b(?:in|of|with|write|into|contain|contains|have|has|give|use|provide|be|make|as|exactly)\s+"
                r"(?:a\s+|the\s+|your\s+)?$", before):
            continue
        if _counted(task, m):
            yield _spec(task, {"kind": f"exact_{unit}", "value": _number(m["n"])})


_DIVIDER = re.compile(r"(?<!\*)\*\*\*(?!\*)")


def _spec(task: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Paragraph counts of a task that shows the divider *** count the parts between dividers."""
    if "paragraphs" in spec["kind"] and _DIVIDER.search(task):
        return {**spec, "separator": "***"}
    return spec


def _counted(task: str, m: re.Match[str]) -> bool:
    """Whether a count found is the response's: not "each line should contain one sentence", not "10 words in
    all capital letters" (a count of capital words)."""
    before = task[max(0, m.start() - 40):m.start()].lower()
    after = task[m.end():m.end() + 40].lower()
    if re.search(r"\beach\s+(?:\w+\s+){1,4}$|\bper\s+\w+\s+$", before) or re.match(r"\s*(?:each|per)\b", after):
        return False
    unit = (m.groupdict().get("unit") or m.groupdict().get("unit2") or "").lower()
    return not (unit.startswith("word") and re.match(r"\s*(?:or phrases\s+)?(?:\w+\s+){0,4}?(?:in|with|be in|using)\s+"
                                                     r"(?:all\s+)?(?:capital|caps|upper)", after))


def _keywords(task: str) -> Iterator[dict[str, Any]]:
    # "the word X should appear at least 3 times", "use the word X at least twice", "the letter q ... 5 times"
    times = (r"(?:(?P<q>" + "|".join(sorted([*_AT_MOST, *_AT_LEAST, "exactly", "only"], key=len, reverse=True))
             + r")\s+)?(?:for\s+)?(?:(?P<a>\d+)\s*(?:-|\u2013|to|or)\s*)?(?P<times>" + NUM
             + r"\s+times?|once|twice|thrice)"
             r"(?:\s+or\s+(?P<ol>less|fewer|more))?")
    for m in re.finditer(r"\b(?P<what>(?:key)?words?|terms?|names?|letters?)\s+[\"'“]?(?P<w>[\w-]+)[\"'”]?"
                         r"(?P<mid>[^.;\n]{0,60}?)\b" + times, task, re.I):
        if re.search(r"\b(?:letters?|words?|terms?|names?)\b", m["mid"], re.I):
            continue  # another keyword between: its own match
        n = {"once": 1, "twice": 2, "thrice": 3}.get(m["times"].lower()) or _number(m["times"].split()[0])
        q = (m["q"] or ("at most" if m["ol"] else "exactly")).lower()
        if m["ol"] and m["ol"].lower() == "more":
            q = "at least"
        kind = "letter_count" if m["what"].lower().startswith("letter") else "keyword_count"
        if kind == "letter_count" and len(m["w"]) != 1:
            continue
        if m["a"]:
            yield {"kind": kind, "keyword": m["w"], "min": int(m["a"]), "max": n}
        elif q in _AT_MOST and n + _AT_MOST[q] >= 0:
            yield {"kind": kind, "keyword": m["w"], "max": n + _AT_MOST[q]}
        elif q in _AT_LEAST:
            yield {"kind": kind, "keyword": m["w"], "min": n + _AT_LEAST[q]}
        elif q in ("exactly", "only"):
            yield {"kind": kind, "keyword": m["w"], "min": n, "max": n}
    # without the letter e
    for m in re.finditer(r"\b(?:do not|don't|not|never|without|avoid|no)\s+(?:\w+\s+){0,3}?(?:the\s+)?letter\s+"
                         r"[\"'“]?(?P<l>\w)[\"'”]?(?!\s+(?:more|at|over))", task, re.I):
        yield {"kind": "letter_count", "keyword": m["l"], "max": 0}
    for m in re.finditer(r"\bavoid\s+(?:using\s+)?the\s+letter\s+[\"'“]?(?P<l>\w)[\"'”]?\s+more\s+than\s+"
                         r"(?P<times>" + NUM + r"\s+times|once|twice)", task, re.I):
        n = {"once": 1, "twice": 2}.get(m["times"].lower()) or _number(m["times"].split()[0])
        yield {"kind": "letter_count", "keyword": m["l"], "max": n}
    # "the word "rock" should not appear", "do not use "heute""
    quoted_list = r"(?P<rest>(?:[\"“'][^\"”'\n]+[\"”']\s*(?:,|and|or)?\s*)+)"
    for m in re.finditer(r"\b(?:key)?words?\s+" + quoted_list + r"\s*(?:should|must|may|can)\s*(?:not|n't|never)\s+"
                         r"(?:appear|be used|be included|be mentioned|occur)", task, re.I):
        yield {"kind": "forbidden_words", "words": _quoted_words(m["rest"])}
    for m in re.finditer(r"\b(?:do not|don't|never|avoid)\s+(?:use|using|include|including|say|saying|mention|"
                         r"mentioning|write)\s+(?P<rest>(?:[\"“'][^\"”'\n]+[\"”']\s*(?:,|and|or)?\s*)+)", task, re.I):
        yield {"kind": "forbidden_words", "words": _quoted_words(m["rest"])}
    # include the keywords X and Y
    for m in re.finditer(r"\b(?:include|includes|including|contain|contains|containing|use|using|mention|with|has|"
                         r"have)\s+"
                         r"(?:the\s+)?(?:following\s+)?(?:key\s?words?|keyphrases?|key phrases?|words?)\s*:?\s*"
                         r"(?P<rest>[^.\n]*)", task, re.I):
        before = task[max(0, m.start() - 40):m.start()].lower()
        if re.search(r"(?:not|n't|never|without|avoid|refrain from|no)\s+(?:\w+\s+){0,2}$|"
                     r"(?:start|begin|end)s?\s+$|(?:starting|beginning|ending)\s+$", before):
            continue
        if re.match(r"\s*(?:in all capital|with all capital|that|which)", m["rest"], re.I):
            continue
        words = _word_list(m["rest"])
        if words and not re.search(r"\b(?:times?|once|twice|thrice)\b", m["rest"][:60]):
            yield {"kind": "includes_keywords", "words": words}
    # do not include the words X, Y
    for m in re.finditer(r"\b(?:do not|don't|dont|not|never|without|avoid|refrain from|must not|should not|"
                         r"cannot|can't)\s+(?:\w+\s+){0,3}?(?:the\s+)?(?:following\s+)?(?:key\s?words?|words?|terms?)"
                         r"\s*:?\s*(?P<rest>[^.\n]*)", task, re.I):
        words = _word_list(m["rest"])
        if words:
            yield {"kind": "forbidden_words", "words": words}


def _freq(word: str, q: str | None, times: str) -> dict[str, Any]:
    times = times.lower()
    n = {"once": 1, "twice": 2, "thrice": 3}.get(times) or _number(times.split()[0])
    q = (q or "exactly").lower()
    if q in _AT_MOST:
        return {"kind": "keyword_count", "keyword": word, "max": n + _AT_MOST[q]}
    if q in _AT_LEAST:
        return {"kind": "keyword_count", "keyword": word, "min": n + _AT_LEAST[q]}
    return {"kind": "keyword_count", "keyword": word, "min": n, "max": n}


def _form(task: str) -> Iterator[dict[str, Any]]:
    low = task.lower()
    if re.search(r"(?<![.\w/-])json\b(?!\.?[\w/-])", low):  # not a file name (report.json)
        yield {"kind": "json"}
    if re.search(r"(?:\bno|without|not|n't|avoid|refrain from|zero)\s+(?:\w+\s+){0,4}?commas?\b|"
                 r"commas?\s+(?:are|is)\s+not\s+"
                 r"(?:allowed|permitted)|\bcomma-free\b|\bno\s+commas?\b", low):
        yield {"kind": "no_commas"}
    if re.search(r"double quot|quotation marks", low) and re.search(
            r"(?:wrap|enclose|around|inside|within|surround|put|place|in)\b[^.]{0,120}(?:double quot|quotation marks)"
            r"|(?:double quot|quotation marks)[^.]{0,40}(?:around|wrap)", low):
        yield {"kind": "quoted"}
    if "<<" in task and ">>" in task:
        yield {"kind": "title"}
    if re.search(r"\bpostscript\b|\bP\.P?\.S\b", task, re.I):
        marker = re.search(r"\bP\.P\.S\.?|\bP\.S\.?", task)
        yield {"kind": "postscript", "marker": marker.group(0) if marker else "P.S."}
    options = re.findall(r"My answer is [\w ]+?\.", task)
    if len(set(options)) >= 2:
        yield {"kind": "one_of", "options": list(dict.fromkeys(options))}
    if re.search(r"\*{6}|\b(?:6|six) asterisk", low) and re.search(r"\b(?:two|2|both|them)\b", low):
        yield {"kind": "two_responses"}
    # letter case: "no lowercase letters" asks for capitals, "without capital letters" for lowercase
    case = _case(task)
    if case:
        yield {"kind": "letter_case", "case": case}
    for m in re.finditer(r"(?:capital|caps|upper)[^.]{0,80}?(?:appear|used|occur|include|contain|use)?\s*" + _QUANT +
                         r"\s+" + NUM + r"\s+times", task, re.I):
        spec = _bounded("capital_words", m["q"], _number(m["n"]))
        if spec:
            yield spec
    for m in re.finditer(r"\b" + _QUANT + r"\s+" + NUM + r"\s+(?:\w+\s+){0,2}?(?:words?|phrases?)\b[^.\n]{0,40}?"
                         r"(?:capital|caps|upper)", task, re.I):
        spec = _bounded("capital_words", m["q"], _number(m["n"]))
        if spec:
            yield spec


_NEGATED = r"(?:\bno|\bnot|n't|\bwithout|\bnever|\bavoid|\bzero)\s+(?:\w+\s+){0,6}?"
_LOWER = r"(?:lower\s?case|lowercased?|lower-case|small letters)"
_UPPER = r"(?:capital letters|capitals|caps|upper\s?case|uppercase|capitali[sz]ed|capital)"
_CAPITAL_WORDS = (r"(?:words?|phrases?)\s+(?:or phrases\s+)?(?:\w+\s+){0,4}?(?:in|with|using|written in|be in)\s+"
                  r"(?:all\s+)?(?:capital|caps|upper)|capitali[sz]ed words|stress words|(?:all-caps|capital) words")


def _case(task: str) -> str | None:
    low = task.lower()
    if re.search(_NEGATED + _LOWER, low):
        return "upper"
    if re.search(_NEGATED + _UPPER, low):
        return "lower"
    if re.search(r"\b(?:all|only|entirely|in|use|using|with)\s+(?:\w+\s+){0,3}?" + _LOWER, low):
        return "lower"
    if re.search(_CAPITAL_WORDS, low):
        return None  # a count of capital words, not the case of the response
    if re.search(r"\b(?:all|only|entirely|entire|in|use|using|with)\s+(?:\w+\s+){0,3}?" + _UPPER +
                 r"|\bcapitali[sz]e (?:all|every|each)|capital letters only", low):
        return "upper"
    return None


def _language(task: str) -> Iterator[dict[str, Any]]:
    pats = [
        r"\b(?:in|into)\s+(?:the\s+)?" + _LANG + r"\b(?:\s+language)?[^.\n]{0,30}?(?:only|no other language|"
        r"entirely|exclusively)",
        r"\b(?:only|entirely|exclusively|solely|fully|wholly|completely)\s+(?:be\s+)?(?:written\s+)?(?:in\s+)?"
        r"(?:the\s+)?" + _LANG + r"\b",
        r"\b(?:response|answer|reply|output|text|essay|poem|letter|story|it|everything)\s+(?:should|must|has to|needs"
        r" to|is to)\s+be\s+(?:written\s+)?(?:entirely\s+|only\s+|all\s+|fully\s+|completely\s+)?in\s+(?:the\s+)?"
        + _LANG + r"\b",
        r"\b(?:respond|reply|answer|write|use|using|written)\s+(?:\w+\s+){0,2}?(?:only\s+)?in\s+(?:the\s+)?" + _LANG
        + r"(?:\s+language)?\b[^.\n]{0,40}?(?:no other|only|entire)",
        r"\b(?:please\s+)?(?:respond|reply|answer)\s+(?:only\s+)?in\s+" + _LANG + r"\b",
        r"\b(?:entire|whole)\s+(?:\w+\s+){0,3}?in\s+(?:the\s+)?" + _LANG + r"\b",
        r"\b" + _LANG + r"\s+(?:language\s+)?only\b",
        r"\bin\s+" + _LANG + r"\s+language\b",
        r"\busing\s+(?:only\s+)?(?:the\s+)?" + _LANG + r"\s+language\b",
    ]
    for p in pats:
        m = re.search(p, task, re.I)
        if m:
            yield {"kind": "language", "language": LANGUAGES[m["lang"].lower()]}
            return


def _structure(task: str) -> Iterator[dict[str, Any]]:
    # sections marked "SECTION X" / "Day X" / "Audience 1"
    marker = re.search(r"\b(?P<w>[A-Z][A-Za-z]*)\s+(?:X|\d)\b(?:[\"'].{0,20}?(?P=w)\s+\d|[^.\n]{0,3}$|[\"'\s,.])",
                       task)
    if marker and re.search(r"\b(?:mark|marked|label|labeled|labelled|begin|beginning|start|starting|with|include|"
                            r"using|as)\b[^.\n]{0,80}?" + re.escape(marker["w"]) + r"\s+(?:X|\d)", task, re.I):
        n = re.search(NUM + r"\s+(?:sections|parts|paragraphs|days|chapters|" + re.escape(marker["w"].lower())
                      + r"s?)\b", task, re.I)
        numbered = set(re.findall(re.escape(marker["w"]) + r"\s+(\d+)", task))
        value = _number(n["n"]) if n else len(numbered) or 1
        x_marker = re.search(re.escape(marker["w"]) + r"\s+X\b", task) is not None
        if (x_marker or len(numbered) > 1) and (marker["w"].upper() not in ("PART", "STEP", "P", "Q") or n):
            yield {"kind": "min_sections", "value": value, "marker": marker["w"]}
    # highlights
    m = re.search(r"\b(?:highlight|italici[sz]e|bold|emphasi[sz]e)\w*\s+" + _QUANT + r"?\s*(?:" + NUM + r"\s+)?"
                  r"(?:\w+\s+){0,2}?(?:sections?|parts?|words?|phrases?|key points?|points?)", task, re.I)
    m2 = re.search(_QUANT + r"\s+" + NUM + r"\s+(?:\w+\s+){0,2}?(?:sections?|parts?|phrases?|words?)\s+(?:should|must|"
                   r"to|need to)\s+be\s+(?:highlighted|italici[sz]ed|emphasi[sz]ed)", task, re.I) or re.search(
                   r"\b" + _QUANT + r"?\s*" + NUM + r"\s+(?:italic|highlighted|bold|emphasi[sz]ed)\w*\s+(?:text\s+)?"
                   r"(?:sections?|phrases?|parts?|words?)",
                   task, re.I)
    if m2 and "*" in task:
        yield {"kind": "min_highlights", "value": _number(m2["n"])}
    elif m and ("*" in task or "markdown" in task.lower()):
        yield {"kind": "min_highlights", "value": _number(m["n"]) if m["n"] else 1}
    # paragraphs separated by the divider ***
    if _DIVIDER.search(task) and re.search(r"paragraph|section|part|separat|divider", task, re.I):
        n = re.search(r"\b(?:exactly\s+|only\s+)?" + NUM + r"(?:\s+|-)(?:\w+\s+)?(?:paragraphs?|sections|parts)", task,
                      re.I)
        if n:
            yield {"kind": "exact_paragraphs", "value": _number(n["n"]), "separator": "***"}
    # paragraph K must start with word W
    m = re.search(r"\b(?P<ord>first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|\d+(?:st|nd|rd|th))"
                  r"\s+paragraph\s+(?:must|should|has to|needs to|to|will)?\s*(?:start|begin)s?\s+with\s+(?:the\s+)?"
                  r"(?:word\s+)?[\"'“]?(?P<w>[\w-]+)", task, re.I) or \
        re.search(r"\b(?:start|begin)\s+(?:the\s+)?(?P<ord>first|second|third|fourth|fifth|\d+(?:st|nd|rd|th))\s+"
                  r"paragraph\s+with\s+(?:the\s+)?(?:word\s+)?[\"'“]?(?P<w>[\w-]+)", task, re.I) or \
        re.search(r"\bparagraph\s+(?P<ord>\d+)\s+(?:must|should|has to|needs to)\s+(?:start|begin)\s+with\s+(?:the\s+)?"
                  r"(?:word\s+)?[\"'“]?(?P<w>[\w-]+)", task, re.I)
    if m:
        n = re.search(r"\b" + NUM + r"(?:\s+|-)(?:\w+\s+)?paragraphs?\b", task, re.I)
        order = m["ord"].lower()
        k = _ORDINALS.get(order) or int(re.sub(r"\D", "", order))
        if n:
            yield {"kind": "nth_paragraph_first_word", "paragraphs": _number(n["n"]), "n": k, "word": m["w"]}


def _start_end(task: str) -> Iterator[dict[str, Any]]:
    phrase = (r"(?:[\"“](?P<p>[^\"”\n]{2,}?)(?:[\"”]|$)|'(?P<p2>[^'\n]{2,}?)'(?=\W|$)|"
              r":\s*\n*\s*(?P<p3>[^\"\n]*\w[^\"\n]*))")
    m = re.search(r"(?<!starting and )\b(?:end|finish|conclude|close)(?:s|es|ed)?\s+(?:\w+\s+){0,4}?with\s+"
                  r"(?:the\s+|this\s+|a\s+)?(?:exact\s+|following\s+)?(?:phrase|sentence|words?|question|line)?\s*(?:of\s+)?(?:exactly\s+)?"
                  + phrase, task, re.I) or \
        re.search(r"\b(?:last|final)\s+(?:sentence|line|words?)\s+of\s+(?:your|the)\s+\w+\s+(?:should|must)\s+(?:be|read)"
                  r"\s*:?\s*" + phrase, task, re.I) or \
        re.search(r"\b(?:very\s+)?end\s+of\s+(?:your|the)\s+\w+\s+(?:should|must)\s+(?:be|read)\s*:?\s*" + phrase,
                  task, re.I)
    if m:
        text = (m["p"] or m["p2"] or m["p3"] or "").strip()
        if re.search(r"\w", text) and len(text) > 1:
            yield {"kind": "ends_with", "text": text}
    m = re.search(r"\b(?:start|begin)\w*\s+your\s+(?:response|answer|reply)\s+with\s+(?:the\s+)?(?:exact\s+)?"
                  r"(?:phrase|sentence|words?)?\s*:?\s*" + phrase, task, re.I)
    if m and (m["p"] or m["p2"]):
        yield {"kind": "starts_with", "text": (m["p"] or m["p2"]).strip()}
    if re.search(r"\brepeat\b[^.]{0,60}\b(?:request|question|prompt|instruction|sentence)", task, re.I):
        request = _request_to_repeat(task)
        if request:
            yield {"kind": "starts_with", "text": request}


def _request_to_repeat(task: str) -> str:
    """The request to repeat word for word: the task without the sentences that ask to repeat it."""
    blocks = [b for b in re.split(r"\n\s*\n", task) if b.strip()]
    if len(blocks) > 1:
        kept = [b for b in blocks if not re.search(r"\brepeat", b, re.I)]
        return "\n\n".join(kept).strip()
    kept = [s for s in _sentences_of(task) if not re.search(r"\brepeat|\bbefore repeating|\bthen give", s, re.I)]
    return " ".join(kept).strip()


def extract_checks(task: str) -> list[Check]:
    """The checks a task text states, validated, without duplicates (in the order found)."""
    seen: set[str] = set()
    out: list[Check] = []
    for found in (*_counts(task), *_keywords(task), *_form(task), *_language(task), *_structure(task),
                  *_start_end(task)):
        try:
            check = parse_check(found)
        except ValueError:
            continue  # e.g. a range written backwards: not a check
        key = repr(sorted(check.spec().items()))
        if key not in seen:
            seen.add(key)
            out.append(check)
    return out
