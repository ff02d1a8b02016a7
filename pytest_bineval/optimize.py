"""The self-update loop on generator prompts (``pytest --bineval-optimize``).

One pytest run with ``--bineval-optimize`` is one iteration of BinEval's loop, for every prompt file
that a test names (``@pytest.mark.bineval(prompt="prompts/summarize.md")``):

1. the tests generate outputs with the current prompt file and the judge answers their checklists
   (the ordinary run);
2. the failures are the "no" verdicts of evaluations below their threshold;
3. a note-taker LLM turns each failing question (with up to :data:`EXAMPLES` examples) into one
   general lesson;
4. lessons are deduplicated against each other and against the prompt's lesson memory (lessons
   applied, or rolled back, in earlier iterations are not proposed again);
5. an updater LLM rewrites one passage of the prompt per lesson (a surgical ``find`` -> ``replace``
   edit, applied only if ``find`` occurs exactly once and the rewrite keeps every ``{{placeholder}}``
   and ``## section`` line); a lesson whose edit cannot be applied is appended to the prompt's first
   section instead, and the history says so;
6. the prompt file is rewritten and ``__bineval__/<prompt file>.optimize.json`` beside it records the
   iteration: score before, lessons, edits, the text before and after.

Bloat guard: at most :data:`MAX_LESSONS` lessons per iteration, a growth budget per iteration, and a
rollback: when the next ``--bineval-optimize`` run (same tests) scores lower than the run before the
update, the previous text is restored and the iteration's lessons are marked "rolled back".

Nothing is written without ``--bineval-optimize``. The outputs under test and the judge's explanations
are untrusted: they reach the note-taker only between markers, and the edited prompt is meant to be
reviewed like any change (``git diff``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .engine import Engine
from .errors import BinevalError
from .llm.client import CallError
from .models import Usage
from .prompting import delimit, load_prompt, strip_comments

__all__ = [
    "HISTORY_FORMAT",
    "Failure",
    "OptimizeResult",
    "PromptOptimizer",
    "append_lesson",
    "apply_edit",
    "dedup_lessons",
    "failures_by_prompt",
    "history_path",
]

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


@dataclass(frozen=True)
class Failure:
    """One "no" verdict of an evaluation below its threshold."""

    test: str
    dimension: str
    question: str
    explanation: str
    output: str
    source: str | None


def failures_by_prompt(records: Iterable[dict[str, Any]]) -> dict[str, list[Failure]]:
    """The failures of the run's evaluation records, by the prompt file their test names."""
    out: dict[str, list[Failure]] = {}
    for rec in records:
        prompt = rec.get("prompt")
        if not prompt:
            continue
        bucket = out.setdefault(prompt, [])
        if rec["outcome"] != "failed":
            continue
        checked = set(rec["thresholds"])
        for v in rec["verdicts"]:
            if v["answer"] == "no" and v["dimension"] in checked:
                bucket.append(Failure(test=rec["test"], dimension=v["dimension"], question=v["question"],
                                      explanation=v.get("explanation") or "", output=rec.get("output") or "",
                                      source=rec.get("source")))
    return out


def run_score(records: Iterable[dict[str, Any]], prompt: str) -> tuple[float | None, list[str]]:
    """Mean share of yes over the evaluations made with ``prompt`` (judge errors left out), and the
    sorted tests they came from (a score is compared with another only for the same tests)."""
    recs = [r for r in records if r.get("prompt") == prompt and r["outcome"] != "error"]
    values = [float(r["overall"]) for r in recs if r.get("overall") is not None]
    tests = sorted({str(r["test"]) for r in recs})
    return (sum(values) / len(values) if values else None), tests


# --------------------------------------------------------------------------------------------------
# lessons and edits (pure functions)


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
        return text, "passage not found in the prompt"
    if count > 1:
        return text, f"passage occurs {count} times in the prompt"
    if replace == find:
        return text, "the rewrite changes nothing"
    if placeholders(find) != placeholders(replace):
        return text, f"the rewrite changes the placeholders {placeholders(find)} -> {placeholders(replace)}"
    if _HEADER.findall(find) != _HEADER.findall(replace):
        return text, "the rewrite changes a section header line"
    if _PLACEHOLDER.search(replace) is None and "{{" in replace:
        return text, "the rewrite adds a broken placeholder"
    growth = len(replace) - len(find)
    if growth > MAX_EDIT_GROWTH:
        return text, f"the rewrite adds {growth} characters (limit {MAX_EDIT_GROWTH})"
    return text.replace(find, replace, 1), None


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


def write_text_atomic(path: Path, text: str) -> None:
    """Atomic write (a crash never leaves half a prompt)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# --------------------------------------------------------------------------------------------------
# one iteration


@dataclass
class OptimizeResult:
    """What ``--bineval-optimize`` did to one prompt file (rendered by the terminal summary)."""

    prompt: str  # as the tests name it
    status: str  # updated | rolled back | no failures | unchanged | error
    message: str = ""
    score: float | None = None
    failures: int = 0
    lessons: list[dict[str, Any]] = field(default_factory=list)
    chars_before: int = 0
    chars_after: int = 0
    history: str = ""
    usage: Usage = field(default_factory=Usage)


class PromptOptimizer:
    """Runs one iteration of the self-update loop on one prompt file with the engine's generator model."""

    def __init__(self, engine: Engine, model: str | None = None) -> None:
        self.engine = engine
        self.model = model or engine.settings.generator_model

    async def note(self, prompt_text: str, failures: Sequence[Failure]) -> tuple[str | None, str | None, Usage]:
        """(lesson, error, usage) for the failures of one question."""
        first = failures[0]
        examples = []
        for i, f in enumerate(failures[:EXAMPLES], 1):
            parts = [f"Example {i}:"]
            if f.source:
                parts.append(f"<input>\n{delimit(clip(f.source))}\n</input>")
            parts.append(f"<response>\n{delimit(clip(f.output))}\n</response>")
            parts.append(f"<explanation>\n{delimit(clip(f.explanation))}\n</explanation>")
            examples.append("\n".join(parts))
        messages = load_prompt("notetaker").messages(
            prompt=delimit(strip_comments(prompt_text)), dimension=first.dimension, question=first.question,
            examples="\n\n".join(examples),
        )
        try:
            reply = await self.engine.client(self.model).complete_json(
                messages, schema_name="lesson", schema=NOTE_SCHEMA, validate=parse_lesson, max_tokens=160,
            )
        except (CallError, BinevalError) as exc:
            return None, f"note-taker failed: {getattr(exc, 'cause', exc)}", getattr(exc, "usage", Usage())
        return reply.value, None, reply.usage

    async def edit(self, prompt_text: str, lesson: str) -> tuple[str | None, str | None, str | None, Usage]:
        """(find, replace, error, usage): the updater's edit for one lesson (not yet applied)."""
        messages = load_prompt("updater").messages(prompt=delimit(strip_comments(prompt_text)),
                                                   lesson=delimit(lesson))
        try:
            reply = await self.engine.client(self.model).complete_json(
                messages, schema_name="prompt_edit", schema=EDIT_SCHEMA, validate=_edit, max_tokens=700,
            )
        except (CallError, BinevalError) as exc:
            return None, None, f"updater failed: {getattr(exc, 'cause', exc)}", getattr(exc, "usage", Usage())
        find, replace = reply.value
        return find, replace, None, reply.usage

    async def write_lesson(self, text: str, lesson: str, entry: dict[str, Any]) -> tuple[str, Usage]:
        """``text`` with ``lesson`` written in -- the updater's edit when it applies, else appended to the
        first section -- and the usage; ``entry`` records which (status, edit, rejected_edit)."""
        find, replace, error, usage = await self.edit(text, lesson)
        reason = error
        candidate = text
        if find is not None and replace is not None:
            candidate, reason = apply_edit(text, find, replace)
            entry["edit"] = {"find": find, "replace": replace}
        if reason is None:
            entry["status"] = "applied"
        else:
            entry["rejected_edit"] = reason
            candidate = append_lesson(text, lesson)
            entry["status"] = "appended"
        return candidate, usage

    async def step(self, name: str, path: Path, records: Sequence[dict[str, Any]]) -> OptimizeResult:
        """One iteration for the prompt file ``path`` (named ``name`` by the tests)."""
        text = path.read_text(encoding="utf-8")
        hist_file = history_path(path)
        history = load_history(hist_file)
        score, tests = run_score(records, name)
        failures = failures_by_prompt(records).get(name, [])
        result = OptimizeResult(prompt=name, status="unchanged", score=score, failures=len(failures),
                                chars_before=len(text), chars_after=len(text), history=str(hist_file))
        last = history["iterations"][-1] if history["iterations"] else None
        measured = False  # whether this run measured the score after the last update
        if last is not None and last.get("after_digest") == digest(text) and last.get("score_after") is None:
            last["score_after"] = score
            measured = True
            comparable = last.get("tests") == tests
            before = last.get("score_before")
            if comparable and score is not None and before is not None and score < before:
                write_text_atomic(path, last["before"])
                for item in history["lessons"]:
                    if item.get("iteration") == last["iteration"] and item.get("status") in ("applied", "appended"):
                        item["status"] = "rolled back"
                last["rolled_back"] = True
                save_history(hist_file, history)
                result.status = "rolled back"
                result.chars_after = len(last["before"])
                result.message = (f"score fell from {before:.3f} to {score:.3f} after iteration "
                                  f"{last['iteration']}: its prompt text is restored and its lessons retired")
                return result
        if not failures:
            errored = sum(1 for r in records if r.get("prompt") == name and r["outcome"] == "error")
            result.status = "no failures"
            result.message = "every evaluation made with this prompt passed" if not errored else (
                f"no failing verdict to learn from; {errored} evaluation(s) could not be scored (judge errors)")
            if measured:
                save_history(hist_file, history)
            return result

        # 3. lessons: one note per failing question, most frequent first
        by_question: dict[tuple[str, str], list[Failure]] = {}
        for f in failures:
            by_question.setdefault((f.dimension, f.question), []).append(f)
        ranked = sorted(by_question.values(), key=lambda fs: -len(fs))[:MAX_NOTES]
        notes: list[tuple[str, list[Failure]]] = []
        errors: list[str] = []
        for group in ranked:
            lesson, error, usage = await self.note(text, group)
            result.usage += usage
            if lesson is not None:
                notes.append((lesson, group))
            elif error:
                errors.append(error)
        # 4. dedup against each other and the memory
        memory = [str(item["text"]) for item in history["lessons"] if item.get("status") != "not applied"]
        kept, dropped = dedup_lessons([n for n, _ in notes], memory)
        kept = kept[:MAX_LESSONS]
        for lesson in dropped:
            result.lessons.append({"text": lesson, "status": "duplicate"})
        # 5. surgical edits, within the growth budget
        iteration = len(history["iterations"]) + 1
        budget = max(GROWTH_BUDGET, int(0.3 * len(text)))
        new_text = text
        for lesson in kept:
            group = next(g for n, g in notes if n == lesson)
            entry: dict[str, Any] = {
                "text": lesson, "iteration": iteration, "questions": sorted({f.question for f in group}),
                "failures": len(group),
            }
            candidate, usage = await self.write_lesson(new_text, lesson, entry)
            result.usage += usage
            if len(candidate) - len(text) > budget:
                entry["status"] = "not applied"
                entry["why"] = f"over this iteration's growth budget of {budget} characters"
            else:
                new_text = candidate
            result.lessons.append(entry)
            history["lessons"].append(entry)
        if new_text == text:
            result.status = "unchanged"
            result.message = "; ".join(errors) or "no new lesson (all were duplicates of earlier ones)"
            if result.lessons or measured:
                save_history(hist_file, history)
            return result
        history["iterations"].append({
            "iteration": iteration,
            "judge": next((r["model"] for r in records if r.get("prompt") == name), None),
            "optimizer": self.model,
            "tests": tests,
            "evaluations": sum(1 for r in records if r.get("prompt") == name),
            "failures": len(failures),
            "score_before": score,
            "score_after": None,
            "before_digest": digest(text),
            "after_digest": digest(new_text),
            "before": text,
            "after": new_text,
        })
        write_text_atomic(path, new_text)
        save_history(hist_file, history)
        result.status = "updated"
        result.chars_after = len(new_text)
        applied = sum(1 for e in result.lessons if e.get("status") in ("applied", "appended"))
        result.message = f"{applied} lesson(s) written into the prompt (iteration {iteration})"
        if errors:
            result.message += "; " + "; ".join(errors)
        return result


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
