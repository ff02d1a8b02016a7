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

_NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "a single": 1, "single": 1, "a": 1, "an": 1})
_ORDINALS = {w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth".split())}
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
            "not exceeding": 0, "within": 0}
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
    if quoted:
        return [q.strip() for q in quoted if q.strip()]
    text = re.split(r"\b(?:in|to|into|throughout|within|anywhere|somewhere|when|while|from|at|for|as|so|"
                    r"and also|but)\b|[.;:!?()\n]", text, maxsplit=1)[0]
    words = [w.strip(" '\"*") for w in re.split(r",|\band\b|\bor\b|\bnor\b", text)]
    return [w for w in words if w and len(w.split()) <= 2 and w.lower() not in {"the", "any", "a", "words"}]


def _sentences_of(task: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z\"'])|\n+", task) if s.strip()]


def _counts(task: str) -> Iterator[dict[str, Any]]:
    """Counts of sentences, words, characters, paragraphs, bullets and placeholders."""
    gap = r"(?:\s+(?!and\b|or\b)[\w-]+){0,2}?"  # "at least 3 *short* sentences", "100 *English* words"
    for m in re.finditer(r"\b(?P<a>\d+)\s*(?:-|–|to|or)\s*(?P<b>\d+)" + gap + r"\s+" + _UNIT, task, re.I):
        yield {"kind": f"{_unit(m['unit'])}_between", "min": int(m["a"]), "max": int(m["b"])}
    for m in re.finditer(r"\bbetween\s+(?P<a>\d+)\s+and\s+(?P<b>\d+)" + gap + r"\s+" + _UNIT, task, re.I):
        yield {"kind": f"{_unit(m['unit'])}_between", "min": int(m["a"]), "max": int(m["b"])}
    for m in re.finditer(r"\b" + _QUANT + r"\s+" + NUM + gap + r"\s+" + _UNIT, task, re.I):
        if m["q"].lower() == "only" and _unit(m["unit"]) not in ("sentences", "paragraphs", "bullets"):
            continue
        spec = _bounded(_unit(m["unit"]), m["q"], _number(m["n"]))
        if spec:
            yield spec
    for m in re.finditer(r"\b" + NUM + r"\s+" + _UNIT + r"\s+or\s+(?P<d>less|fewer|more)\b", task, re.I):
        unit = _unit(m["unit"])
        yield {"kind": f"{'min' if m['d'].lower() == 'more' else 'max'}_{unit}", "value": _number(m["n"])}
    for m in re.finditer(r"\b" + NUM + r"(?:\s+|-)" + r"(?P<unit>sentences?|paragraphs?|bullet[ -]points?)\b"
                         r"(?!\s+or\b)", task, re.I):
        before = task[max(0, m.start() - 30):m.start()].lower()
        if re.search(r"(?:less than|fewer than|under|below|at most|more than|least|maximum of|minimum of|up to|"
                     r"exactly|only|between|\d\s*(?:-|–|to|or)|and)\s*$", before):
            continue
        if m["n"].lower() in ("a", "an", "single"):
            continue
        unit = _unit(m["unit"])
        if re.match(r"\s+(?:long|or so)", task[m.end():]) is None and not re.search(
                r"\b(?:in|of|with|write|into|contain|contains|have|has|give|use|provide|be|make|as|exactly)\s+"
                r"(?:a\s+|the\s+|your\s+)?$", before):
            continue
        yield {"kind": f"exact_{unit}", "value": _number(m["n"])}


def _keywords(task: str) -> Iterator[dict[str, Any]]:
    # "the word X should appear at least 3 times", "use the word X at least twice"
    times = r"(?P<times>" + NUM + r"\s+times|once|twice|thrice)"
    for m in re.finditer(r"\b(?:the\s+)?(?:key)?word\s+[\"'“]?(?P<w>[\w'-]+)[\"'”]?\s+(?:should|must|to|will|shall)?"
                         r"\s*(?:appear|be used|be included|occur|be mentioned|show up)(?:\s+in\s+(?:the|your)\s+"
                         r"(?:response|answer|reply))?\s+" + _QUANT + r"?\s*" + times, task, re.I):
        yield _freq(m["w"], m["q"], m["times"])
    for m in re.finditer(r"\b(?:use|mention|include|repeat|say)\s+(?:the\s+)?(?:key)?(?:word|term|keyword)?\s*"
                         r"[\"'“](?P<w>[\w' -]+)[\"'”]\s+(?:in\s+(?:the|your)\s+\w+\s+)?" + _QUANT + r"?\s*" + times,
                         task, re.I):
        yield _freq(m["w"], m["q"], m["times"])
    # the letter q should appear at least 5 times
    for m in re.finditer(r"\bletter\s+[\"'“]?(?P<l>\w)[\"'”]?\s+(?:should|must|to|will)?\s*(?:appear|be used|occur)"
                         r"\s+" + _QUANT + r"?\s*" + times, task, re.I):
        spec = _freq(m["l"], m["q"], m["times"])
        yield {**spec, "kind": "letter_count"}
    # include the keywords X and Y
    for m in re.finditer(r"\b(?:include|includes|including|contain|contains|containing|use|using|mention|with)\s+"
                         r"(?:the\s+)?(?:following\s+)?(?:key\s?words?|keyphrases?|key phrases?|words?)\s*:?\s*"
                         r"(?P<rest>[^.\n]*)", task, re.I):
        before = task[max(0, m.start() - 40):m.start()].lower()
        if re.search(r"(?:not|n't|never|without|avoid|refrain from|no)\s+(?:\w+\s+){0,2}$", before):
            continue
        if re.match(r"\s*(?:in all capital|with all capital|that|which)", m["rest"], re.I):
            continue
        words = _word_list(m["rest"])
        if words and not re.search(r"\b(?:times?|once|twice)\b", m["rest"][:60]):
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
    if re.search(r"\bjson\b", low):
        yield {"kind": "json"}
    if re.search(r"(?:no|without|not|avoid|refrain from|zero)\s+(?:\w+\s+){0,4}?commas?\b|commas?\s+(?:are|is)\s+not\s+"
                 r"(?:allowed|permitted)|\bcomma-free\b|\bno\s+commas?\b", low):
        yield {"kind": "no_commas"}
    if re.search(r"double quot|quotation marks", low) and re.search(
            r"(?:wrap|enclose|around|inside|within|surround|put|place|in)\b[^.]{0,60}(?:double quot|quotation marks)"
            r"|(?:double quot|quotation marks)[^.]{0,40}(?:around|wrap)", low):
        yield {"kind": "quoted"}
    if "<<" in task and ">>" in task:
        yield {"kind": "title"}
    m = re.search(r"(?:postscript|p\.s\.)[^.\n]{0,40}?(?:start(?:ing|s)?|begin(?:ning|s)?)\s+with\s+[\"']?"
                  r"(?P<m>P\.P\.S\.?|P\.S\.?)", task, re.I) or \
        re.search(r"(?:start(?:ing|s)?|begin(?:ning|s)?)\s+with\s+[\"']?(?P<m>P\.P\.S\.?|P\.S\.?)", task, re.I)
    if m:
        yield {"kind": "postscript", "marker": m["m"]}
    elif re.search(r"\bpostscript\b", low):
        yield {"kind": "postscript", "marker": "P.S."}
    options = re.findall(r"My answer is [\w ]+?\.", task)
    if len(set(options)) >= 2:
        yield {"kind": "one_of", "options": list(dict.fromkeys(options))}
    if re.search(r"\*{6}|\b(?:6|six) asterisk", low) and re.search(r"\b(?:two|2)\b", low):
        yield {"kind": "two_responses"}
    # letter case
    capital_words = r"words?\s+(?:or phrases\s+)?(?:in|with|using|written in)\s+(?:all\s+)?(?:capital|caps|upper)"
    if re.search(r"\b(?:all\s+|only\s+|entirely\s+(?:in\s+)?)(?:lower\s?case|lowercase)|\blower\s?case\s+(?:letters\s+)?"
                 r"only|\bno capital letters|\bnot (?:a single|any|one) (?:letter|word)[^.]{0,40}capitali[sz]ed|"
                 r"\bin lowercase|\blowercase letters|\bno capitals\b|\bwithout (?:any )?capital", low):
        yield {"kind": "letter_case", "case": "lower"}
    elif re.search(r"\b(?:all|only|entirely in|entire(?:ly)?)\s+(?:in\s+)?(?:capital letters|caps|upper\s?case|capitals)"
                   r"|\bcapital letters only|\bin (?:all )?capital letters|\ball[- ]caps|\buppercase letters|"
                   r"\bcapital(?:ized)? letters?,? (?:only|no lowercase)", low) and not re.search(capital_words, low):
        yield {"kind": "letter_case", "case": "upper"}
    for m in re.finditer(r"(?:capital|caps|upper)[^.]{0,80}?(?:appear|used|occur|include|contain|use)?\s*" + _QUANT +
                         r"\s+" + NUM + r"\s+times", task, re.I):
        spec = _bounded("capital_words", m["q"], _number(m["n"]))
        if spec:
            yield spec
    for m in re.finditer(r"\b" + _QUANT + r"\s+" + NUM + r"\s+(?:\w+\s+){0,2}?" + capital_words, task, re.I):
        spec = _bounded("capital_words", m["q"], _number(m["n"]))
        if spec:
            yield spec


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
        n = re.search(NUM + r"\s+(?:sections|parts|paragraphs|days|chapters|" + re.escape(marker["w"].lower()) + r"s?)\b",
                      task, re.I)
        if marker["w"].upper() not in ("PART", "STEP", "P", "Q") or n:
            yield {"kind": "min_sections", "value": _number(n["n"]) if n else 1, "marker": marker["w"]}
    # highlights
    m = re.search(r"\b(?:highlight|italici[sz]e|bold|emphasi[sz]e)\w*\s+" + _QUANT + r"?\s*(?:" + NUM + r"\s+)?"
                  r"(?:\w+\s+){0,2}?(?:sections?|parts?|words?|phrases?|key points?|points?)", task, re.I)
    if m and ("*" in task or "markdown" in task.lower()):
        yield {"kind": "min_highlights", "value": _number(m["n"]) if m["n"] else 1}
    # paragraphs separated by the divider ***
    if "***" in task and re.search(r"paragraph|section|part|separat|divider", task, re.I):
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
    phrase = r"[\"“'](?P<p>[^\"”\n]+?)[\"”']?(?=[\"”]|\s*$|\s*\n|\.\s|'\s)"
    m = re.search(r"\b(?:end|finish|conclude|close)\w*\s+(?:\w+\s+){0,4}?with\s+(?:the\s+|this\s+|a\s+)?(?:exact\s+|"
                  r"following\s+)?(?:phrase|sentence|words?|question|line)?\s*:?\s*(?:exactly\s+)?" + phrase, task, re.I)
    if m:
        yield {"kind": "ends_with", "text": m["p"].strip()}
    m = re.search(r"\b(?:start|begin)\w*\s+your\s+(?:response|answer|reply)\s+with\s+(?:the\s+)?(?:exact\s+)?"
                  r"(?:phrase|sentence|words?)?\s*:?\s*" + phrase, task, re.I)
    if m:
        yield {"kind": "starts_with", "text": m["p"].strip()}
    if re.search(r"\brepeat\b[^.]{0,60}\b(?:request|question|prompt|instruction)", task, re.I):
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
