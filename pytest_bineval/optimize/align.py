"""Cross-model alignment of an evaluator prompt (``bineval align``).

A reference evaluator (a strong model, with the packaged judge prompt) and a target evaluator (the
cheaper model you want to run at volume, with an evaluator prompt file of your own) answer the same
checklist about the same outputs. Where they disagree, the reference is taken as right:

1. a note-taker LLM turns the disagreements of each question (up to two examples, with both
   explanations, between markers) into one general lesson for the target's prompt;
2. lessons are deduplicated against each other and against the prompt's lesson memory;
3. an updater LLM rewrites one passage of the prompt per lesson (the same surgical, checked edits as
   ``--bineval-optimize``; a lesson whose edit does not fit is appended to the system section);
4. the target answers again with the candidate prompt; the prompt file is rewritten only if the
   agreement with the reference rose, and ``__bineval__/<prompt>.align.json`` records the iteration.

Use the aligned prompt with ``--bineval-judge-prompt FILE`` (or ``Settings(judge_prompt=...)``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine import Engine, run_sync
from ..errors import UsageError
from ..files import write_text_atomic
from ..jsonl import field_text, iter_records
from ..models import Checklist, Evaluation, Usage, Verdict
from ..prompting import Prompt, check_judge_prompt, delimit, load_prompt, parse_prompt, strip_comments
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

__all__ = ["AlignItem", "AlignResult", "Disagreement", "EvaluatorAligner", "agreement", "run_align"]


@dataclass(frozen=True)
class AlignItem:
    """One output to judge (and its source, if any)."""

    output: str
    source: str | None = None


@dataclass(frozen=True)
class Disagreement:
    item: int
    question: str
    target: Verdict
    reference: Verdict


def agreement(reference: Sequence[Evaluation], target: Sequence[Evaluation]) -> tuple[float | None, int,
                                                                                     list[Disagreement]]:
    """(share of questions answered alike, questions both answered, the disagreements); error verdicts
    of either side are left out."""
    same = 0
    compared = 0
    disagreements: list[Disagreement] = []
    for i, (ref, tgt) in enumerate(zip(reference, target, strict=True)):
        by_id = {(v.question_id, v.turn): v for v in tgt.verdicts}  # a conversation: a verdict per turn
        for rv in ref.verdicts:
            tv = by_id.get((rv.question_id, rv.turn))
            if tv is None or rv.answer == "error" or tv.answer == "error":
                continue
            compared += 1
            if rv.answer == tv.answer:
                same += 1
            else:
                disagreements.append(Disagreement(item=i, question=rv.question, target=tv, reference=rv))
    return (same / compared if compared else None), compared, disagreements


@dataclass
class AlignResult:
    """What one alignment iteration did to the target's evaluator prompt."""

    prompt: str
    status: str  # updated | unchanged | no disagreements
    message: str = ""
    agreement_before: float | None = None
    agreement_after: float | None = None
    compared: int = 0
    disagreements: int = 0
    lessons: list[dict[str, Any]] = field(default_factory=list)
    history: str = ""
    usage: Usage = field(default_factory=Usage)


class EvaluatorAligner:
    """Aligns the evaluator prompt file of ``target`` with the answers of ``reference``."""

    def __init__(self, engine: Engine, *, reference: str, target: str, optimizer_model: str | None = None) -> None:
        self.engine = engine
        self.reference = reference
        self.target = target
        self.loop = LessonLoop(engine, optimizer_model or reference)

    async def evaluate(self, model: str, prompt: Prompt | None, items: Sequence[AlignItem],
                       checklist: Checklist) -> list[Evaluation]:
        """Every item judged by ``model`` (``prompt``: None for the packaged judge prompt); every answer is
        explained, since a disagreement shows both sides' reasons."""
        return [await self.engine.aevaluate(item.output, checklist, item.source, model=model, prompt=prompt,
                                            explain="all")
                for item in items]

    def _note_request(self, prompt_text: str, group: Sequence[Disagreement], items: Sequence[AlignItem]) -> NoteRequest:
        examples = []
        for d in group[:EXAMPLES]:
            item = items[d.item]
            parts = [("", "input", item.source)] if item.source else []
            parts += [("", "response", item.output),
                      (f'The target answered "{d.target.answer}":', "explanation", d.target.explanation),
                      (f'The reference answered "{d.reference.answer}":', "explanation", d.reference.explanation)]
            examples.append(parts)
        messages = load_prompt("aligner").messages(prompt=delimit(strip_comments(prompt_text)),
                                                   question=group[0].question, examples=examples_block(examples))
        return NoteRequest(messages, {"question": group[0].question, "disagreements": len(group)})

    async def step(self, path: Path, items: Sequence[AlignItem], checklist: Checklist, *,
                   write: bool = True) -> AlignResult:
        """One iteration; the prompt file is rewritten only if the agreement rose (and ``write``)."""
        text = path.read_text(encoding="utf-8")
        current = check_judge_prompt(parse_prompt(str(path), text))
        hist_file = history_path(path, "align")
        history = load_history(hist_file)
        result = AlignResult(prompt=str(path), status="unchanged", history=str(hist_file))
        before = self.engine.usage
        ref = await self.evaluate(self.reference, None, items, checklist)
        tgt = await self.evaluate(self.target, current, items, checklist)
        result.agreement_before, result.compared, found = agreement(ref, tgt)
        result.disagreements = len(found)
        if not found:
            result.status = "no disagreements"
            result.message = f"the target agrees with the reference on all {result.compared} answered questions"
            result.usage = self.engine.usage.since(before)
            return result

        groups: dict[str, list[Disagreement]] = {}
        for d in found:
            groups.setdefault(d.question, []).append(d)
        ranked = sorted(groups.values(), key=lambda g: -len(g))
        memory = [str(e["text"]) for e in history["lessons"]]
        iteration = len(history["iterations"]) + 1

        def check(candidate: str) -> str | None:
            try:
                check_judge_prompt(parse_prompt(str(path), candidate))
            except ValueError as exc:
                return f"the edited prompt would be invalid: {exc}"
            return None

        learned = await self.loop.learn(text, [self._note_request(text, g, items) for g in ranked], memory,
                                        iteration, check)
        self.engine.add_usage(learned.usage)
        result.lessons += [{"text": t, "status": "duplicate"} for t in learned.duplicates]
        result.lessons += learned.rejected
        entries = learned.entries
        result.lessons += entries
        new_text = learned.text
        if new_text == text:
            result.message = "; ".join(learned.errors) or "no new lesson (all were duplicates of earlier ones)"
            result.usage = self.engine.usage.since(before)
            return result

        tgt_new = await self.evaluate(self.target, check_judge_prompt(parse_prompt(str(path), new_text)), items,
                                      checklist)
        after, _, still = agreement(ref, tgt_new)
        result.agreement_after = after
        improved = after is not None and result.agreement_before is not None and after > result.agreement_before
        for entry in entries:
            if entry["status"] in ("applied", "appended") and not improved:
                entry["status"] = "no gain"
        history["lessons"] += entries
        if improved:
            history["iterations"].append({
                "iteration": iteration, "reference": self.reference, "target": self.target,
                "optimizer": self.loop.model, "items": len(items), "questions": len(checklist.questions),
                "agreement_before": result.agreement_before, "agreement_after": after,
                "disagreements_before": len(found), "disagreements_after": len(still),
                "before_digest": digest(text), "after_digest": digest(new_text), "before": text, "after": new_text,
            })
        if write:
            if improved:
                write_text_atomic(path, new_text)
            save_history(hist_file, history)
        before_s = f"{result.agreement_before:.3f}" if result.agreement_before is not None else "n/a"
        after_s = f"{after:.3f}" if after is not None else "n/a"
        result.status = "updated" if improved else "unchanged"
        result.message = (
            f"agreement with the reference {before_s} -> {after_s}: "
            + ("the prompt is rewritten" if improved else "no gain, the edit is discarded")
            + ("" if write else " (dry run: nothing written)")
        )
        result.usage = self.engine.usage.since(before)
        return result


def run_align(aligner: EvaluatorAligner, path: Path, items: Sequence[AlignItem], checklist: Checklist, *,
              iterations: int, write: bool) -> list[AlignResult]:
    """Up to ``iterations`` iterations, stopping at the first that does not rewrite the prompt."""
    results: list[AlignResult] = []
    for _ in range(iterations):
        result = run_sync(aligner.step(path, items, checklist, write=write))
        results.append(result)
        if result.status != "updated" or not write:
            break
    return results


def load_items(path: Path, output_key: str, source_key: str | None = None, limit: int | None = None) -> list[AlignItem]:
    """The outputs (and sources) of a JSONL file, or of a ``.json`` list; dotted keys reach nested fields."""
    if not path.is_file():
        raise UsageError(f"data file not found: {path}")
    items = [
        AlignItem(output=field_text(record, output_key, where),
                  source=field_text(record, source_key, where) if source_key else None)
        for _, where, record in iter_records(path, limit)
    ]
    if not items:
        raise UsageError(f"{path}: no records")
    return items
