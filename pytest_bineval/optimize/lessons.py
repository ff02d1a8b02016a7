"""The lesson loop shared by ``--bineval-optimize`` (generator prompts) and ``bineval align`` (evaluator
prompts): a note-taker LLM turns each group of failures into one general lesson (a reply that is not a plain
sentence, or that restates an example's facts, is discarded and counted), lessons are deduplicated
against each other and the prompt's lesson memory, and an updater LLM writes each lesson into the prompt
as a surgical ``find`` -> ``replace`` edit (an edit that copies the updater's own prompt -- its worked example,
its key names, a placeholder -- is discarded and counted; one is applied only if the passage occurs once and the
rewrite keeps every ``{{placeholder}}`` and ``## section`` line; otherwise the lesson is appended to the first
section), within a growth budget. The history files and atomic writes live here too.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from ..engine import Engine
from ..errors import BinevalError
from ..files import write_text_atomic
from ..models import Usage
from ..prompting import delimit, load_prompt, strip_comments

HISTORY_FORMAT = 1
MAX_LESSONS = 5  # new lessons per iteration (most frequent failing questions first)
MAX_NOTES = 8  # note-taker calls per iteration
EXAMPLES = 2  # failing examples shown to the note-taker per question
MAX_EDIT_GROWTH = 400  # characters one edit may add
GROWTH_BUDGET = 600  # characters one iteration may add (or 30% of the prompt, whichever is larger)
LESSON_MAX = 300
SIMILAR = 0.6  # word-set Jaccard at or above which two lessons are the same lesson
EXAMPLE_CHARS = 1500  # characters of an input or output shown to the note-taker

_PLACEHOLDER = re.compile(r"\{\{\s*\w+\s*\}\}")
_HEADER = re.compile(r"^## .*$", re.MULTILINE)
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset({
    "a", "an", "the", "and", "or", "of", "to", "in", "on", "for", "with", "is", "are", "be", "it", "its",
    "this", "that", "as", "by", "at", "from", "not", "no", "do", "does", "should", "must", "always", "never",
    "only", "each", "every", "any", "your", "you",
})

# Bounded strings: a grammar-constrained model that rambles still closes its JSON. (llama.cpp refuses the
# grammar of much longer bounds -- 2000 characters is too many rules -- so passages are kept short.)
FIND_MAX = 600
NOTE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"lesson": {"type": "string", "minLength": 1, "maxLength": LESSON_MAX}},
    "required": ["lesson"],
    "additionalProperties": False,
}
EDIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "find": {"type": "string", "minLength": 1, "maxLength": FIND_MAX},
        "replace": {"type": "string", "minLength": 1, "maxLength": FIND_MAX + MAX_EDIT_GROWTH},
    },
    "required": ["find", "replace"],
    "additionalProperties": False,
}


# What a lesson is not: a plain sentence for the generator holds no markdown heading or section marker, no
# {{placeholder}}, no chat-template or role tag, no "Question:"/"Answer:" turn of an example (a small note-taker that
# answers the examples instead of learning from them writes such text, which broke an app's own prompt parser).
_NOT_LESSON: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:^|\s)#{1,6}(?=\s|$)"), "a markdown heading marker (#)"),
    (re.compile(r"^\s*(?:-{3,}|\*{3,}|={3,})|```"), "a section marker or code fence"),
    (re.compile(r"\{\{|\}\}|\{[a-z_]+\}"), "a placeholder"),
    (re.compile(r"<\|[^|>]*\|>|</?(?:system|user|assistant|s|im_start|im_end)>", re.IGNORECASE),
     "a role or chat-template tag"),
    (re.compile(r"(?:^|\s)(?:system|user|assistant|human|question|answer)\s*:", re.IGNORECASE),
     "a role or question/answer label"),
)
LESSON_MIN_WORDS = 3
# A lesson that repeats this many consecutive words of an example's input or output (words the prompt does not
# already hold) states that example's facts: the note-taker restated the article instead of learning from it, and
# such a "lesson" in a system prompt makes the app write those facts into other summaries.
COPIED_WORDS = 5


def lesson_problem(lesson: str) -> str | None:
    """Why ``lesson`` is not a plain-sentence lesson (see :data:`_NOT_LESSON`), or None when it is one."""
    for pattern, what in _NOT_LESSON:
        if pattern.search(lesson):
            return f"it holds {what}"
    if len(_WORD.findall(lesson.lower())) < LESSON_MIN_WORDS:
        return f"it is not a sentence (fewer than {LESSON_MIN_WORDS} words)"
    return None


def _runs(text: str) -> set[tuple[str, ...]]:
    words = _WORD.findall(text.lower())
    return {tuple(words[i:i + COPIED_WORDS]) for i in range(len(words) - COPIED_WORDS + 1)}


def copied_problem(lesson: str, examples: Sequence[str], prompt: str = "") -> str | None:
    """Why ``lesson`` is a restatement of an example (it repeats :data:`COPIED_WORDS` consecutive words of one of
    ``examples`` that ``prompt`` does not hold), or None."""
    own = _runs(lesson) - _runs(prompt)
    if not own:
        return None
    for text in examples:
        common = own & _runs(text)
        if common:
            return f"it repeats the example's words ({' '.join(min(common))!r}): facts of one input, not a lesson"
    return None


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


def similar(a: str, b: str) -> bool:
    """Whether two lessons say the same thing (word sets, or near-identical text)."""
    wa, wb = _words(a), _words(b)
    if wa and wb and len(wa & wb) / len(wa | wb) >= SIMILAR:
        return True
    return difflib.SequenceMatcher(None, a.lower(), b.lower()).ratio() >= 0.85


def dedup_lessons(new: Sequence[str], memory: Sequence[str]) -> tuple[list[str], list[str]]:
    """(lessons to keep, lessons dropped as duplicates) -- duplicates of each other or of the memory."""
    kept: list[str] = []
    dropped: list[str] = []
    for lesson in new:
        if any(similar(lesson, old) for old in [*memory, *kept]):
            dropped.append(lesson)
        else:
            kept.append(lesson)
    return kept, dropped


def placeholders(text: str) -> list[str]:
    return sorted(re.sub(r"\s", "", p) for p in _PLACEHOLDER.findall(text))


def apply_edit(text: str, find: str, replace: str) -> tuple[str, str | None]:
    """``text`` with ``find`` replaced, or (``text``, why the edit is rejected)."""
    if not find.strip():
        return text, "empty passage"
    count = text.count(find)
    if count == 0:
        return text, (f"passage not found in the prompt: {_shown(find)} is not a substring of it (an edit must copy "
                      "its passage from the prompt character for character)")
    if count > 1:
        return text, f"passage occurs {count} times in the prompt"
    if replace == find:
        return text, "the rewrite changes nothing"
    if not _WORD.search(replace.lower()):
        return text, f"the rewrite {_shown(replace)} has no words: it would delete the passage"
    if placeholders(find) != placeholders(replace):
        return text, f"the rewrite changes the placeholders {placeholders(find)} -> {placeholders(replace)}"
    if _HEADER.findall(find) != _HEADER.findall(replace):
        return text, "the rewrite changes a section header line"
    if _PLACEHOLDER.search(replace) is None and "{{" in replace:
        return text, "the rewrite adds a broken placeholder"
    added = [ln for ln in replace.splitlines() if ln.strip() and ln not in find.splitlines()]
    bad = next(((ln, why) for ln in added if (why := _added_line_problem(ln)) is not None), None)
    if bad is not None:
        return text, f"the rewrite adds a line that is not plain prose ({bad[1]}): {bad[0][:80]!r}"
    growth = len(replace) - len(find)
    if growth > MAX_EDIT_GROWTH:
        return text, f"the rewrite adds {growth} characters (limit {MAX_EDIT_GROWTH})"
    new = text.replace(find, replace, 1)
    # The passage may be a piece of a header line or of a placeholder ("system", "icle}}"): judged on the whole text.
    if _HEADER.findall(new) != _HEADER.findall(text):
        return text, f"the passage {_shown(find)} is part of a section header line, which an edit keeps"
    if placeholders(new) != placeholders(text):
        return text, f"the passage {_shown(find)} is part of a placeholder, which an edit keeps"
    return new, None


def _shown(text: str, limit: int = 60) -> str:
    """``text`` quoted on one line for a reason, clipped to ``limit`` characters."""
    flat = " ".join(text.split())
    return repr(flat if len(flat) <= limit else flat[:limit] + "...")


# What an updater reply is not: words of the updater's own prompt. Under a JSON grammar a small model fills the
# fields with what it has just read -- the worked example, the key names ("replace"), the old template's placeholder
# values ("the rewritten passage") -- or with a bracketed placeholder ("[city]") instead of a sentence of the prompt
# under edit. Such a reply is discarded and counted (the lesson is appended instead), never applied.
_BRACKETED = re.compile(r"\[[A-Za-z_ ]{1,30}\]|<[a-z_ ]{1,30}>|\.\.\.|\u2026")
# The words a reply format's placeholder value is made of ("exact passage from the prompt", "the rewritten
# passage"): a field of nothing else describes a passage instead of being one.
_META_WORDS = frozenset({
    "a", "an", "the", "this", "that", "your", "my", "its", "of", "from", "in", "to", "with", "here", "exact", "exactly",
    "passage", "sentence", "line", "text", "part", "prompt", "lesson", "rewritten", "rewrite", "new", "old",
    "original", "same", "edited", "updated", "copied", "added", "changed", "find", "replace", "replacement",
    "placeholder", "json", "object", "key", "value",
})


@cache
def _template_words() -> tuple[str, ...]:
    """The words of the updater prompt as the model reads them, without its placeholders (the prompt and lesson)."""
    turns = load_prompt("updater").turns
    return tuple(_WORD.findall(" ".join(_PLACEHOLDER.sub(" ", body) for _, body in turns).lower()))


def _contiguous(words: Sequence[str], within: Sequence[str]) -> bool:
    n = len(words)
    return n > 0 and any(tuple(within[i:i + n]) == tuple(words) for i in range(len(within) - n + 1))


def template_problem(find: str, replace: str, prompt: str, lesson: str,
                     template: Sequence[str] | None = None) -> str | None:
    """Why the updater's edit (``find`` -> ``replace``) copies words of the updater's own prompt instead of editing
    ``prompt`` with ``lesson`` -- a field that is nothing but a run of the template's words (a key name, a placeholder
    value), holds a bracketed placeholder or :data:`COPIED_WORDS` words in a row of the template (its worked example)
    that neither ``prompt`` nor ``lesson`` holds -- or None. ``template``: its words (default: prompts/updater.md)."""
    words = tuple(template) if template is not None else _template_words()
    template_runs = {tuple(words[i:i + COPIED_WORDS]) for i in range(len(words) - COPIED_WORDS + 1)}
    own_runs = _runs(prompt) | _runs(lesson)
    for name, value in (("find", find), ("replace", replace)):
        if value in prompt or value in lesson:
            continue
        field_words = _WORD.findall(value.lower())
        if _contiguous(field_words, words):
            return f"its {name!r} {_shown(value)} is words of the updater's own prompt, not text of the prompt edited"
        if field_words and all(w in _META_WORDS for w in field_words):
            return f"its {name!r} {_shown(value)} is a placeholder: it describes a passage instead of being one"
        bracketed = next((m.group() for m in _BRACKETED.finditer(value) if m.group() not in prompt), None)
        if bracketed is not None:
            return f"its {name!r} holds a placeholder ({bracketed!r}) that the prompt edited does not hold"
        copied = (_runs(value) & template_runs) - own_runs
        if copied:
            return (f"its {name!r} copies words of the updater's own prompt ({' '.join(min(copied))!r}: its worked "
                    "example or instructions), not text of the prompt edited")
    return None


def _added_line_problem(line: str) -> str | None:
    """Why a line an edit adds is not prose a lesson may add (the lesson checks, less the word count)."""
    for pattern, what in _NOT_LESSON:
        if pattern.search(line):
            return f"it holds {what}"
    return None


def append_lesson(text: str, lesson: str) -> str:
    """``lesson`` as a new line at the end of the prompt's first section (or of the whole text)."""
    headers = list(_HEADER.finditer(text))
    end = headers[1].start() if len(headers) > 1 else len(text)
    head, tail = text[:end], text[end:]
    stripped = head.rstrip()
    trailing = head[len(stripped):] or ("\n\n" if tail else "\n")
    return f"{stripped}\n{lesson.strip()}{trailing}{tail}"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def history_path(prompt: Path, kind: str = "optimize") -> Path:
    """``__bineval__/<prompt file name>.<kind>.json`` beside the prompt file (kinds: optimize, align)."""
    return prompt.parent / "__bineval__" / f"{prompt.name}.{kind}.json"


def clip(text: str) -> str:
    return text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + f"... [{len(text) - EXAMPLE_CHARS} more]"


def parse_lesson(obj: dict[str, Any]) -> str:
    """The lesson of a note-taker reply: its first two sentences (the prompt asks for at most two)."""
    lesson = obj.get("lesson")
    if not isinstance(lesson, str) or not lesson.strip():
        raise ValueError('"lesson" must be a non-empty string')
    lesson = " ".join(re.split(r"(?<=[.!?])\s+", " ".join(lesson.split()))[:2])
    if len(lesson) > LESSON_MAX:
        raise ValueError(f'"lesson" must be at most two sentences and {LESSON_MAX} characters')
    return lesson


def _edit(obj: dict[str, Any]) -> tuple[str, str]:
    find, replace = obj.get("find"), obj.get("replace")
    if not isinstance(find, str) or not isinstance(replace, str) or not find:
        raise ValueError('"find" and "replace" must be strings, "find" not empty')
    if len(find) > FIND_MAX or len(replace) > FIND_MAX + MAX_EDIT_GROWTH:
        raise ValueError(f'"find" must be a passage of the prompt (at most {FIND_MAX} characters), not all of it')
    return find, replace


def load_history(path: Path) -> dict[str, Any]:
    empty: dict[str, Any] = {"format": HISTORY_FORMAT, "iterations": [], "lessons": []}
    if not path.is_file():
        return empty
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != HISTORY_FORMAT:
            raise ValueError(f"unknown format {data.get('format') if isinstance(data, dict) else data!r}")
        data.setdefault("iterations", [])
        data.setdefault("lessons", [])
        return data
    except (OSError, ValueError) as exc:
        raise BinevalError(
            f"the optimization history {path} is unreadable ({exc}); fix or delete it (it only holds past "
            "iterations: lessons, edits and earlier prompt texts)"
        ) from exc


def save_history(path: Path, history: dict[str, Any]) -> None:
    write_text_atomic(path, json.dumps(history, indent=2, ensure_ascii=False) + "\n")


@dataclass
class NoteRequest:
    """One group of failures (or disagreements) to learn from: the note-taker's messages and the fields
    its history entry starts with."""

    messages: list[dict[str, str]]
    entry: dict[str, Any]
    examples: tuple[str, ...] = ()  # the examples' inputs and outputs: a lesson must not restate them


@dataclass
class Learned:
    """What one pass of the lesson loop did to a prompt text."""

    text: str
    entries: list[dict[str, Any]] = field(default_factory=list)  # lessons written (applied/appended/not applied)
    duplicates: list[str] = field(default_factory=list)
    rejected: list[dict[str, str]] = field(default_factory=list)  # note-taker replies that are not lessons (why)
    errors: list[str] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)


class LessonLoop:
    """note-taker -> dedup -> surgical edit, with ``model`` (default: the engine's generator model)."""

    def __init__(self, engine: Engine, model: str | None = None) -> None:
        self.engine = engine
        self.model = model or engine.settings.generator_model

    async def note(self, messages: list[dict[str, str]]) -> tuple[str | None, str | None, Usage]:
        """(lesson, error, usage) of one note-taker call."""
        try:
            reply = await self.engine.client(self.model).complete_json(
                messages, schema_name="lesson", schema=NOTE_SCHEMA, validate=parse_lesson, max_tokens=160,
            )
        except BinevalError as exc:
            return None, f"note-taker failed: {getattr(exc, 'cause', exc)}", getattr(exc, "usage", None) or Usage()
        return reply.value, None, reply.usage

    async def edit(self, prompt_text: str, lesson: str) -> tuple[str | None, str | None, str | None, Usage]:
        """(find, replace, error, usage): the updater's edit for one lesson (not yet applied)."""
        messages = load_prompt("updater").messages(prompt=delimit(strip_comments(prompt_text)),
                                                   lesson=delimit(lesson))
        try:
            reply = await self.engine.client(self.model).complete_json(
                messages, schema_name="prompt_edit", schema=EDIT_SCHEMA, validate=_edit, max_tokens=700,
            )
        except BinevalError as exc:
            return None, None, f"updater failed: {getattr(exc, 'cause', exc)}", getattr(exc, "usage", None) or Usage()
        find, replace = reply.value
        return find, replace, None, reply.usage

    async def write_lesson(self, text: str, lesson: str, entry: dict[str, Any]) -> tuple[str, Usage]:
        """``text`` with ``lesson`` written in -- the updater's edit when it applies, else appended to the
        first section -- and the usage; ``entry`` records which (status, edit, and ``discarded_edit`` when the edit
        copies the updater's own prompt (:func:`template_problem`) or ``rejected_edit`` when it does not apply)."""
        find, replace, error, usage = await self.edit(text, lesson)
        reason = error
        candidate = text
        if find is not None and replace is not None:
            entry["edit"] = {"find": find, "replace": replace}
            copied = template_problem(find, replace, strip_comments(text), lesson)
            if copied is not None:  # discarded and counted: the updater's own words are not an edit
                entry["discarded_edit"] = copied
                entry["status"] = "appended"
                return append_lesson(text, lesson), usage
            candidate, reason = apply_edit(text, find, replace)
        if reason is None:
            entry["status"] = "applied"
        else:
            entry["rejected_edit"] = reason
            candidate = append_lesson(text, lesson)
            entry["status"] = "appended"
        return candidate, usage

    async def learn(self, text: str, requests: Sequence[NoteRequest], memory: Sequence[str], iteration: int,
                    check: Callable[[str], str | None] | None = None) -> Learned:
        """One pass over ``requests`` (most important first; at most :data:`MAX_NOTES` are noted): lessons,
        dedup against ``memory``, then at most :data:`MAX_LESSONS` edits within the growth budget.
        ``check(candidate)`` may veto an edited text (returns why)."""
        out = Learned(text=text)
        notes: list[tuple[str, NoteRequest]] = []
        for req in requests[:MAX_NOTES]:
            lesson, error, usage = await self.note(req.messages)
            out.usage += usage
            problem = None if lesson is None else (lesson_problem(lesson)
                                                    or copied_problem(lesson, req.examples, text))
            if lesson is not None and problem is not None:  # discarded and counted, never written into a prompt
                out.rejected.append({"text": lesson, "status": "not a lesson", "why": problem})
            elif lesson is not None:
                notes.append((lesson, req))
            elif error:
                out.errors.append(error)
        kept, out.duplicates = dedup_lessons([n for n, _ in notes], memory)
        budget = max(GROWTH_BUDGET, int(0.3 * len(text)))
        for lesson in kept[:MAX_LESSONS]:
            req = next(r for n, r in notes if n == lesson)
            entry: dict[str, Any] = {"text": lesson, "iteration": iteration, **req.entry}
            candidate, usage = await self.write_lesson(out.text, lesson, entry)
            out.usage += usage
            why = check(candidate) if check is not None else None
            if why is not None:
                entry["status"], entry["why"] = "not applied", why
            elif len(candidate) - len(text) > budget:
                entry["status"] = "not applied"
                entry["why"] = f"over this iteration's growth budget of {budget} characters"
            else:
                out.text = candidate
            out.entries.append(entry)
        return out


def examples_block(examples: Sequence[Sequence[tuple[str, str, str]]]) -> str:
    """Numbered examples for a note-taker prompt: each a list of (intro line, marker, untrusted text)."""
    blocks = []
    for n, parts in enumerate(examples, 1):
        lines = [f"Example {n}:"]
        for intro, tag, body in parts:
            if intro:
                lines.append(intro)
            lines.append(f"<{tag}>\n{delimit(clip(body))}\n</{tag}>")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
