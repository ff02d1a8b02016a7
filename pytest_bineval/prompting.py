"""The prompts are files in the package (``prompts/*.md``), versioned by ``prompts/VERSION``.

A prompt file holds a ``## system`` and a ``## user`` section; ``{{name}}`` placeholders are filled
by plain substitution (never ``str.format``: outputs under test are full of braces).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources

from .errors import UsageError

_SECTION = re.compile(r"^## (system|user|assistant)\s*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

@dataclass(frozen=True)
class Prompt:
    """A chat prompt: a system section, optional example turns, and the final user turn.

    ``guard`` (an evaluator prompt of your own, see :func:`check_judge_prompt`): the tags neutralised in the values
    of the untrusted placeholders (``UNTRUSTED_PLACEHOLDERS``) when they are filled in: the markers and the prompt's
    own tags that enclose those placeholders, so that an output cannot close the prompt's own delimiters either.
    """

    name: str
    turns: tuple[tuple[str, str], ...]
    guard: re.Pattern[str] | None = None

    def messages(self, **values: str) -> list[dict[str, str]]:
        return self.filled(self.guarded(values))

    def guarded(self, values: dict[str, str]) -> dict[str, str]:
        """``values`` with the untrusted ones (``UNTRUSTED_PLACEHOLDERS``) delimited by this prompt's ``guard``."""
        if self.guard is None:
            return values
        guard = self.guard
        return {k: delimit(v, guard) if k in UNTRUSTED_PLACEHOLDERS else v for k, v in values.items()}

    def filled(self, values: dict[str, str]) -> list[dict[str, str]]:
        """The messages with ``values`` put in as they are (already :meth:`guarded`: a caller that fills one prompt
        with the same untrusted values many times delimits them once)."""
        return [{"role": role, "content": _fill(text, values, self.name)} for role, text in self.turns]


def _fill(template: str, values: dict[str, str], name: str) -> str:
    def sub(match: re.Match[str]) -> str:
        key = match.group(1)
        if key not in values:
            raise UsageError(f"prompt {name!r} needs a value for {{{{{key}}}}}")
        return values[key]

    return _PLACEHOLDER.sub(sub, template)


@cache
def prompt_version() -> str:
    """The version of the packaged prompts; part of every cache key."""
    return resources.files(__package__).joinpath("prompts/VERSION").read_text("utf-8").strip()


def prompt_digest(prompt: Prompt) -> str:
    """``sha256:<hex>`` of a prompt's turns as they are sent (comments stripped, delimiters added): what a report
    records of the judge prompt, so that a run judged with another prompt is told apart."""
    import hashlib
    import json

    body = json.dumps(prompt.turns, ensure_ascii=False)
    return "sha256:" + hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()


def strip_comments(text: str) -> str:
    """A prompt file's text without its ``<!-- -->`` comments (what the model sees)."""
    return re.sub(r"<!--.*?-->\n?", "", text, flags=re.DOTALL)


def parse_prompt(name: str, text: str) -> Prompt:
    """A prompt from its file text: ``## system``, optional example turns, ``## user`` last."""
    text = strip_comments(text)
    parts = _SECTION.split(text)
    turns = tuple((parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2))
    roles = [role for role, _ in turns]
    if not roles or roles[0] != "system" or roles[-1] != "user":
        raise UsageError(f"prompt file {name} must start with '## system' and end with '## user'")
    return Prompt(name, turns)


@cache
def load_prompt(name: str, folder: str = "prompts") -> Prompt:
    """The prompt file ``<folder>/<name>.md`` of the package (``bench/prompts`` for the benchmark's)."""
    text = resources.files(__package__).joinpath(f"{folder}/{name}.md").read_text("utf-8")
    return parse_prompt(f"{name}.md", text)


@cache
def load_follow_up(name: str) -> dict[str, str]:
    """The user turn of ``prompts/<name>.md``, a file with one ``## user`` section: a follow-up turn that
    is added to another prompt's conversation."""
    text = strip_comments(resources.files(__package__).joinpath(f"prompts/{name}.md").read_text("utf-8"))
    parts = _SECTION.split(text)
    if len(parts) != 3 or parts[1] != "user":
        raise UsageError(f"prompt file {name}.md must hold exactly one '## user' section")
    return {"role": "user", "content": parts[2].strip()}


JUDGE_PLACEHOLDERS = frozenset({"task", "source", "output", "question", "no_example"})


def packaged_judge_prompt() -> str:
    """The text of the packaged evaluator prompt (the starting point of a prompt of your own)."""
    return resources.files(__package__).joinpath("prompts/judge.md").read_text("utf-8")


def check_judge_prompt(prompt: Prompt) -> Prompt:
    """``prompt``, delimited, if it can serve as an evaluator prompt: ``{{output}}`` and ``{{question}}`` present,
    no placeholder the judge cannot fill; else UsageError.

    The output under test (and the source) is untrusted text; its protection does not depend on how the prompt
    writes its placeholders (:func:`delimit_untrusted`)."""
    used = {m for _, body in prompt.turns for m in _PLACEHOLDER.findall(body)}
    missing = {"output", "question"} - used
    unknown = used - JUDGE_PLACEHOLDERS
    if missing or unknown:
        def names(keys: set[str] | frozenset[str]) -> str:
            return ", ".join("{{" + k + "}}" for k in sorted(keys))

        problems = ([f"needs {names(missing)}"] if missing else []) + ([f"unknown {names(unknown)}"] if unknown else [])
        raise UsageError(f"judge prompt {prompt.name}: {'; '.join(problems)}; it may use {names(JUDGE_PLACEHOLDERS)}")
    return delimit_untrusted(prompt)


# The placeholders of untrusted text (the output under test, the source), and the marker that encloses each.
UNTRUSTED_PLACEHOLDERS = {"output": "response", "source": "input"}
# A tag as a prompt template writes it: (slash, name, rest); ``<answer_text>``, ``</answer_text>``, ``<b class="x">``.
_TEMPLATE_TAG = re.compile(r"<\s*(/?)\s*([A-Za-z](?:[\w.\-]*\w)?)(\s[^<>]*)?>")


def _enclosing_tags(body: str) -> set[str]:
    """The names (lower case) of the tags of ``body`` that enclose an ``{{output}}`` / ``{{source}}``: for a
    placeholder, a name whose last tag before it is an opening one and whose first tag after it is a closing one
    (``<answer_text>{{output}}</answer_text>``: the prompt's own delimiter). Tags that open and close elsewhere
    (``<b>bold</b>`` in the instructions) enclose nothing."""
    tags = [(m.start(), bool(m.group(1)), m.group(2).lower()) for m in _TEMPLATE_TAG.finditer(body)
            if not (m.group(3) or "").rstrip().endswith("/")]  # <br/> opens nothing
    names: set[str] = set()
    for p in _PLACEHOLDER.finditer(body):
        if p.group(1) not in UNTRUSTED_PLACEHOLDERS:
            continue
        last_before: dict[str, bool] = {}  # name -> is its last tag before the placeholder a closing one
        first_after: dict[str, bool] = {}
        for at, closing, name in tags:
            if at < p.start():
                last_before[name] = closing
            else:
                first_after.setdefault(name, closing)
        names |= {n for n, closing in last_before.items() if not closing and first_after.get(n)}
    return names


def _enclosed(body: str, start: int, end: int) -> bool:
    """Whether ``body[start:end]`` sits between an opening marker tag and the same marker's closing tag, with no
    other marker tag in between."""
    before = list(_MARKER_TAG.finditer(body, 0, start))
    after = _MARKER_TAG.search(body, end)
    if not before or after is None:
        return False
    opening = before[-1]
    return (not opening.group(1) and after.group(1) == "/"
            and opening.group(2).lower() == after.group(2).lower())


def delimit_untrusted(prompt: Prompt) -> Prompt:
    """An evaluator prompt of your own, made safe for untrusted text whatever its markers.

    Each ``{{output}}`` / ``{{source}}`` that is not already enclosed in marker tags (``<response>`` ...
    ``</response>``, ``<input>`` ... ``</input>``: the packaged judge.md's) is written enclosed in its marker
    (``Output: {{output}}`` becomes ``Output: <response>``, ``{{output}}``, ``</response>`` on three lines), and
    the values of those placeholders have the marker tags and the prompt's own tags that enclose a placeholder
    (``<answer_text>{{output}}</answer_text>``) neutralised (:func:`delimit`): an output can close neither the
    package's delimiters nor the prompt's own. Other tags of the prompt (``<b>bold</b>`` in its instructions) are
    left alone in the values: an HTML output reaches the judge as it was written.
    """
    def wrap(body: str) -> str:
        out: list[str] = []
        last = 0
        for m in _PLACEHOLDER.finditer(body):
            marker = UNTRUSTED_PLACEHOLDERS.get(m.group(1))
            if marker is None or _enclosed(body, m.start(), m.end()):
                continue
            out.append(body[last:m.start()] + f"<{marker}>\n{m.group(0)}\n</{marker}>")
            last = m.end()
        return "".join(out) + body[last:]

    turns = tuple((role, wrap(body)) for role, body in prompt.turns)
    own = sorted({name for _, body in turns for name in _enclosing_tags(body)} - set(MARKER_NAMES))
    return Prompt(prompt.name, turns, guard=_tag_pattern((*MARKER_NAMES, *own)))


def load_judge_prompt(path: str) -> Prompt:
    """An evaluator prompt file of your own (``--bineval-judge-prompt``), in the packaged ``judge.md``'s format."""
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read the judge prompt {path}: {exc}") from exc
    return check_judge_prompt(parse_prompt(path, text))


MARKER_NAMES = ("input", "response", "task", "prompt", "lesson", "explanation")


def _tag_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    """A tag a lenient reader could take for one named ``names``, in folded text (see _fold): any case, spaces
    anywhere, attributes, a missing ">"."""
    return re.compile(r"<\s*/?\s*(?:" + "|".join(map(re.escape, names)) + r")\b[^<>]{0,200}>?", re.IGNORECASE)


LENIENT_TAG = _tag_pattern(MARKER_NAMES)
# A marker tag as a prompt template writes it: (slash, name).
_MARKER_TAG = re.compile(r"<\s*(/?)\s*(" + "|".join(MARKER_NAMES) + r")\s*>", re.IGNORECASE)

# Characters a reader could see as the brackets or the slash of a tag although NFKC keeps them apart.
_LOOKALIKES = {
    "\u2039": "<", "\u203a": ">", "\u2329": "<", "\u232a": ">", "\u3008": "<", "\u3009": ">", "\u27e8": "<",
    "\u27e9": ">", "\u02c2": "<", "\u02c3": ">", "\u1438": "<", "\u1433": ">", "\u276e": "<", "\u276f": ">",
    "\u2044": "/", "\u2215": "/", "\u29f8": "/",
    # Cyrillic and Greek letters that look like the Latin ones of the marker names
    "\u0430": "a", "\u0435": "e", "\u0456": "i", "\u043a": "k", "\u043e": "o", "\u0440": "p", "\u0455": "s",
    "\u0445": "x", "\u0410": "A", "\u0415": "E", "\u0406": "I", "\u041a": "K", "\u041e": "O", "\u0420": "P",
    "\u0405": "S", "\u0422": "T", "\u0425": "X", "\u03bf": "o", "\u03c1": "p", "\u03b9": "i", "\u03ba": "k",
    "\u03c4": "t", "\u03b1": "a", "\u03b5": "e", "\u039f": "O", "\u03a1": "P", "\u0399": "I", "\u039a": "K",
    "\u03a4": "T", "\u0391": "A", "\u0395": "E", "\u039d": "N",
}
# Invisible characters that are letters or symbols by category (fillers, blanks).
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800")


def _fold_char(c: str) -> str:
    """What a lenient reader sees of one character: nothing for format (zero-width, bidi), combining and control
    characters and blank fillers; the Latin/ASCII look-alike; else its NFKC form (fullwidth < becomes <)."""
    if c in _LOOKALIKES:
        return _LOOKALIKES[c]
    category = unicodedata.category(c)
    if c in _INVISIBLE or category in ("Cf", "Mn", "Me", "Cs") or (category == "Cc" and c not in "\t\n\r"):
        return ""
    folded = unicodedata.normalize("NFKC", c)
    return "".join(_LOOKALIKES.get(f, f) for f in folded)


def fold(text: str) -> tuple[str, list[int]]:
    """``text`` as a lenient reader sees it, and for each folded character the index of its original one."""
    if text.isascii():
        folded = "".join(c if c >= " " or c in "\t\n\r" else "" for c in text)
        if len(folded) == len(text):
            return text, list(range(len(text)))
    memo: dict[str, str] = {}
    chars: list[str] = []
    index: list[int] = []
    for i, c in enumerate(text):
        f = memo.get(c)
        if f is None:
            f = memo[c] = _fold_char(c)
        for ch in f:
            chars.append(ch)
            index.append(i)
    return "".join(chars), index


def delimit(text: str, tags: re.Pattern[str] = LENIENT_TAG) -> str:
    """Neutralise marker tags (``tags``: those a :func:`_tag_pattern` finds) inside untrusted text so that it cannot
    close (or open) its own delimiters.

    Tags are found in the folded text (NFKC, format/zero-width/combining characters removed, look-alike brackets,
    slashes and letters mapped: :func:`fold`), so ``</response class="x">``, ``< /response>``, ``</res\u200bponse>``
    and a fullwidth ``\uff1c/response\uff1e`` are all found; in each, every character that reads as ``<`` or ``>``
    is written ``&lt;`` / ``&gt;``. The rest of the text is left as it was.
    """
    folded, index = fold(text)
    spans = [(index[m.start()], index[m.end() - 1]) for m in tags.finditer(folded)]
    if not spans:
        return text
    out: list[str] = []
    last = 0
    for start, end in spans:
        if start < last:
            start = last
        out.append(text[last:start])
        for c in text[start : end + 1]:
            seen = _fold_char(c) if not c.isascii() else c
            out.append("&lt;" if seen == "<" else "&gt;" if seen == ">" else c)
        last = end + 1
    out.append(text[last:])
    return "".join(out)
