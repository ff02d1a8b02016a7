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
   and ``## section`` line; an edit that copies the updater's own prompt -- its worked example, its key
   names, a placeholder -- is discarded and counted); a lesson whose edit is discarded or cannot be
   applied is appended to the prompt's first section instead, and the history says so;
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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..engine import Engine, run_sync
from ..errors import BinevalError
from ..files import write_text_atomic
from ..prompting import delimit, load_prompt, strip_comments
from ..report.document import OptimizeOutcome
from ..report.record import EvaluationRecord
from .lessons import (
    EXAMPLES,
    LessonLoop,
    NoteRequest,
    digest,
    examples_block,
    history_path,
    load_history,
    save_history,
)

__all__ = ["Failure", "PromptOptimizer", "failures_by_prompt", "optimize_prompts", "run_score"]


@dataclass(frozen=True)
class Failure:
    """One "no" verdict of an evaluation below its threshold."""

    test: str
    dimension: str
    question: str
    explanation: str
    output: str
    source: str | None


def failures_by_prompt(records: Iterable[EvaluationRecord]) -> dict[str, list[Failure]]:
    """The failures of the run's evaluation records, by the prompt file their test names."""
    out: dict[str, list[Failure]] = {}
    for rec in records:
        if not rec.prompt:
            continue
        bucket = out.setdefault(rec.prompt, [])
        if rec.outcome != "failed":
            continue
        for v in rec.failing():
            bucket.append(Failure(test=rec.test, dimension=v.dimension, question=v.question,
                                  explanation=v.explanation or "", output=rec.output, source=rec.source))
    return out


def run_score(records: Iterable[EvaluationRecord], prompt: str) -> tuple[float | None, list[str]]:
    """Mean share of yes over the evaluations made with ``prompt`` (judge errors left out), and the
    sorted tests they came from (a score is compared with another only for the same tests)."""
    recs = [r for r in records if r.prompt == prompt and r.outcome != "error"]
    values = [float(r.overall) for r in recs if r.overall is not None]
    tests = sorted({r.test for r in recs})
    return (sum(values) / len(values) if values else None), tests


class PromptOptimizer:
    """Runs one iteration of the self-update loop on one prompt file with the engine's generator model."""

    def __init__(self, engine: Engine, model: str | None = None) -> None:
        self.loop = LessonLoop(engine, model)
        self.model = self.loop.model

    def _note_request(self, prompt_text: str, failures: Sequence[Failure]) -> NoteRequest:
        first = failures[0]
        examples = []
        for f in failures[:EXAMPLES]:
            parts = [("", "input", f.source)] if f.source else []
            parts += [("", "response", f.output), ("", "explanation", f.explanation)]
            examples.append(parts)
        messages = load_prompt("notetaker").messages(
            prompt=delimit(strip_comments(prompt_text)), dimension=first.dimension, question=first.question,
            examples=examples_block(examples),
        )
        shown = tuple(t for f in failures[:EXAMPLES] for t in (f.source, f.output) if t)
        return NoteRequest(messages, {"questions": sorted({f.question for f in failures}), "failures": len(failures)},
                           shown)

    async def step(self, name: str, path: Path, records: Sequence[EvaluationRecord]) -> OptimizeOutcome:
        """One iteration for the prompt file ``path`` (named ``name`` by the tests)."""
        text = path.read_text(encoding="utf-8")
        hist_file = history_path(path)
        history = load_history(hist_file)
        score, tests = run_score(records, name)
        failures = failures_by_prompt(records).get(name, [])
        result = OptimizeOutcome(prompt=name, status="unchanged", score=score, failures=len(failures),
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
            errored = sum(1 for r in records if r.prompt == name and r.outcome == "error")
            result.status = "no failures"
            result.message = "every evaluation made with this prompt passed" if not errored else (
                f"no failing verdict to learn from; {errored} evaluation(s) could not be scored (judge errors)")
            if measured:
                save_history(hist_file, history)
            return result

        # lessons: one note per failing question, most frequent first
        by_question: dict[tuple[str, str], list[Failure]] = {}
        for f in failures:
            by_question.setdefault((f.dimension, f.question), []).append(f)
        ranked = sorted(by_question.values(), key=lambda fs: -len(fs))
        memory = [str(item["text"]) for item in history["lessons"] if item.get("status") != "not applied"]
        iteration = len(history["iterations"]) + 1
        learned = await self.loop.learn(text, [self._note_request(text, g) for g in ranked], memory, iteration)
        result.usage += learned.usage
        result.lessons += [{"text": t, "status": "duplicate"} for t in learned.duplicates]
        result.lessons += learned.rejected
        result.lessons += learned.entries
        history["lessons"] += learned.entries
        history.setdefault("rejected", []).extend({**r, "iteration": iteration} for r in learned.rejected)
        new_text = learned.text
        if new_text == text:
            result.status = "unchanged"
            result.message = "; ".join(learned.errors) or (
                "no new lesson (every note-taker reply was a duplicate of an earlier lesson or not a lesson)")
            if result.lessons or measured:
                save_history(hist_file, history)
            return result
        history["iterations"].append({
            "iteration": iteration,
            "judge": next((r.model for r in records if r.prompt == name), None),
            "optimizer": self.model,
            "tests": tests,
            "evaluations": sum(1 for r in records if r.prompt == name),
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
        if learned.errors:
            result.message += "; " + "; ".join(learned.errors)
        return result


def optimize_prompts(engine: Engine, records: Sequence[EvaluationRecord], rootpath: Path) -> list[OptimizeOutcome]:
    """``--bineval-optimize``: one iteration per generator prompt file the run's tests name (rootdir-relative)."""
    optimizer = PromptOptimizer(engine)
    results: list[OptimizeOutcome] = []
    for name in sorted({r.prompt for r in records if r.prompt}):
        path = Path(name) if Path(name).is_absolute() else rootpath / name
        try:
            result = run_sync(optimizer.step(name, path, records))
            if Path(result.history).is_relative_to(rootpath):
                result.history = Path(result.history).relative_to(rootpath).as_posix()
            results.append(result)
        except (OSError, BinevalError) as exc:
            results.append(OptimizeOutcome(prompt=name, status="error", message=str(exc)))
    return results
