"""The per-case question of the regression gate, with a judge: each question that flipped from yes (baseline) to no
(this run) is re-asked about both outputs (:mod:`pytest_bineval.flips` plans the asks and decides), and the
comparison's :class:`~pytest_bineval.report.comparison.FlipCheck` of each flip says what came of it.

Where: at the end of the run, on the process that compares (the only one, or the pytest-xdist controller, whose
engine asks), because the plan depends on how many flips the whole run has; ``bineval report --baseline
--confirm-flips`` does the same with an engine of its own. Without an engine every examined flip is
*unconfirmed* (:func:`unconfirmed`), which the gate counts as unsettled, never as noise.

What the judge reads: each side's task, output and source, the question of this run's checklist and this run's
judge model for both (the judge held fixed, so that only what it reads can differ). A record keeps at most 20,000
characters of the output and 4,000 of the source (as the judge read it: documents numbered), redacted. This run's
own evaluations' full texts are kept in memory for this (:class:`KeptInput`, never written to a report); the
baseline's source is this run's when the digests say it is the same, else the one its report keeps. A side whose
kept text is not what the judge read (cut, or redacted) cannot be re-asked faithfully: its flips are unconfirmed,
saying why. A conversation is re-asked as it was judged: a question asked of one of its turns (scope ``each_turn``)
is re-asked of that turn with the conversation up to and including it, on both sides (verdicts are matched by
turn); the record keeps its messages, each text's first 4,000 characters, and its digest tells whether they are the
whole conversation. The fresh asks are cached under their own keys (repeat :data:`FLIP_REPEAT` + i), apart from
the first asks, ``--bineval-repeats`` and ``--bineval-confirm``: the baseline's, made once, serve every later run
against it.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import judge as _judge
from .conversation import Conversation
from .errors import BudgetReachedError
from .flips import flip_plan, flip_status, next_ask
from .models import Answer, Question, Usage
from .report.comparison import (
    EvaluationDiff,
    FlipCheck,
    FlipConfirmation,
    KeptInput,
    QuestionChange,
    RegressionReport,
)
from .report.record import EvaluationRecord, text_digest
from .sources import NO_SOURCE_DIGEST, SourceArg, source_text

if TYPE_CHECKING:
    from .engine import Engine

FLIP_REPEAT = 1_000_000  # fresh ask i of a flip is cached as repeat FLIP_REPEAT + i
_CUT = re.compile(r"… \[\d+ more characters\]\Z")  # how a record marks a text it kept only part of


@dataclass(frozen=True)
class JudgeInput:
    task: str
    source: str | None
    output: str | Conversation


def _output_of(record: EvaluationRecord) -> str | Conversation | None:
    """The output the judge read for ``record`` as the record keeps it (a conversation: its messages); None when it
    keeps only part of it (cut, or redacted: the digest is not the kept output's)."""
    if not record.output_digest:
        return None
    if record.conversation is not None:
        convo = Conversation(record.conversation)
        return convo if convo.digest() == record.output_digest else None
    return record.output if text_digest(record.output) == record.output_digest else None


def _source_of(record: EvaluationRecord) -> str | bool | None:
    """The source the judge read for ``record`` as the record keeps it; False when it keeps only part of it (cut,
    or a redacted text whose digest no longer matches)."""
    kept = record.source
    if kept is None:
        return None
    if _CUT.search(kept):
        return False
    if record.documents is None and record.source_digest not in (None, NO_SOURCE_DIGEST) \
            and text_digest(kept) != record.source_digest:
        return False  # a text whose digest is not the kept text's: redacted
    return kept


def judge_input(record: EvaluationRecord, kept: KeptInput | None = None) -> JudgeInput | str:
    """What the judge read for ``record`` (``kept``: its full texts, for this run's own), or why it is not known."""
    if kept is not None:
        whole = kept.output if kept.conversation is None else Conversation(kept.conversation)
        return JudgeInput(record.task, kept.source, whole)
    output = _output_of(record)
    if output is None:
        return "the report keeps only part of the output (cut, or redacted)"
    source = _source_of(record)
    if source is False:
        return "the report keeps only part of the source (its first 4,000 characters, redacted)"
    return JudgeInput(record.task, source if isinstance(source, str) else None, output)


def baseline_input(before: EvaluationRecord, after: EvaluationRecord, now: JudgeInput) -> JudgeInput | str:
    """What the judge read for the baseline's ``before``: its output as its report keeps it, and its source -- this
    run's own (``now``'s) when the digests say it is the same, else as the report keeps it."""
    output = _output_of(before)
    if output is None:
        return "the report keeps only part of the output (cut, or redacted)"
    if before.source_digest is not None and before.source_digest == after.source_digest:
        return JudgeInput(before.task, now.source, output)
    source = _source_of(before)
    if source is False:
        return "the source changed, and the report keeps only part of the baseline's (its first 4,000 characters)"
    return JudgeInput(before.task, source if isinstance(source, str) else None, output)


def keep_input(record: EvaluationRecord, output: str | Conversation, source: SourceArg) -> KeptInput | None:
    """The texts to keep for ``record`` when it keeps less than the judge read (None: it keeps all of it); a
    conversation's messages in full."""
    text = source_text(source)
    if isinstance(output, Conversation):
        messages = output.to_openai()
        if record.conversation == messages and record.source == text:
            return None
        return KeptInput(key=record.key, output=output.transcript(), source=text, conversation=messages)
    if record.output == output and record.source == text:
        return None
    return KeptInput(key=record.key, output=output, source=text)


def _norm(text: str) -> str:
    return " ".join(text.split()).casefold()


def _question(record: EvaluationRecord, change: QuestionChange) -> Question:
    """The question as this run's checklist asked it (its text, requirement and example)."""
    found = next((q for q in record.questions if q.id == change.question_id and q.text == change.question), None)
    return found or Question(id=change.question_id, dimension=change.dimension, text=change.question)


def _baseline_text(record: EvaluationRecord, change: QuestionChange) -> str:
    return next((v.question for v in record.verdicts if v.dimension == change.dimension
                 and _norm(v.question) == _norm(change.question)), change.question)


def unconfirmed(report: RegressionReport, reason: str) -> RegressionReport:
    """Every flip still pending is unconfirmed, for ``reason`` (no judge to re-ask)."""
    pending = report.flips("pending")
    for _, c in pending:
        c.flip = FlipCheck(status="unconfirmed", reason=reason)
    if pending:
        plan = flip_plan(report.alpha / 2, len(pending))
        report.confirmation = FlipConfirmation(flips=len(pending), asks=plan.asks, tolerance=plan.tolerance,
                                               level=plan.level, bound=plan.bound, engine=False)
    return report


async def confirm_flips(report: RegressionReport, before: Sequence[EvaluationRecord],
                        after: Sequence[EvaluationRecord], engine: Engine,
                        kept: Mapping[str, KeptInput] | None = None) -> RegressionReport:
    """Re-ask the pending flips of ``report`` (made from ``before`` and ``after``) with ``engine``, in place.

    The flips of a case are asked one after the other, and once one is confirmed the case is a confirmed
    regression: its other flips are *skipped*; cases are asked at once up to the engine's concurrency (the
    embedded model one at a time). Every request counts in the engine's usage, and in ``report.confirmation``."""
    pending = report.flips("pending")
    if not pending:
        return report
    plan = flip_plan(report.alpha / 2, len(pending))
    old = {r.key: r for r in before}
    new = {r.key: r for r in after}
    spent: list[Usage] = []
    counts = {"asks": 0}
    from .llm.local import is_embedded

    embedded = any(is_embedded(new[d.key].model) for d, _ in pending)
    semaphore = asyncio.Semaphore(1 if embedded else max(1, engine.settings.concurrency))

    async def ask(record: EvaluationRecord, question: Question, side: JudgeInput, index: int,
                  turn: int | None) -> tuple[Answer, str]:
        engine.check_budget()
        # the run's judge prompt; a question of one turn of a conversation: the conversation up to that turn
        messages = _judge.judge_messages(side.task, side.source, side.output, question,
                                         prompt=engine._judge_prompt, turn=turn)
        client = engine.client(record.model, repeat=FLIP_REPEAT + index, deadline=engine.assertion_deadline())
        verdict = await _judge.reask(client, messages, question, semaphore, spent)
        counts["asks"] += 1
        return verdict.answer, verdict.error or ""

    async def confirm(record: EvaluationRecord, change: QuestionChange, now: JudgeInput, was: JudgeInput) -> FlipCheck:
        question = _question(record, change)
        baseline_question = question.model_copy(update={"text": _baseline_text(old[record.key], change)})
        answers: dict[str, list[Answer]] = {"new": [], "baseline": []}
        while (side := next_ask(plan, answers["new"], answers["baseline"])) is not None:
            try:
                answer, error = await ask(record, question if side == "new" else baseline_question,
                                          now if side == "new" else was, len(answers[side]), change.turn)
            except BudgetReachedError as exc:
                return FlipCheck(status="unconfirmed", new=answers["new"], baseline=answers["baseline"],
                                 reason=str(exc))
            except Exception as exc:  # a judge failure is an error of the gate, never a pass
                answers[side].append("error")
                return FlipCheck(status="error", new=answers["new"], baseline=answers["baseline"],
                                 reason=f"re-asking about the {'baseline' if side == 'baseline' else 'new'} output "
                                        f"failed: {exc}")
            answers[side].append(answer)
            if answer == "error":
                return FlipCheck(status="error", new=answers["new"], baseline=answers["baseline"],
                                 reason=f"re-asking about the {side} output got no answer: {error}")
        status = flip_status(plan, answers["new"], answers["baseline"])
        return FlipCheck(status=status, new=answers["new"], baseline=answers["baseline"])

    async def case(d: EvaluationDiff, changes: list[QuestionChange]) -> None:
        now = judge_input(new[d.key], (kept or {}).get(d.key))
        was = now if isinstance(now, str) else baseline_input(old[d.key], new[d.key], now)
        for change in changes:
            if isinstance(now, str) or isinstance(was, str):
                why = f"this run's: {now}" if isinstance(now, str) else f"the baseline's: {was}"
                change.flip = FlipCheck(status="unconfirmed", reason=f"not re-asked: {why}")
            elif d.regressed:
                change.flip = FlipCheck(status="skipped", reason="another flip of the case was confirmed first")
            else:
                change.flip = await confirm(new[d.key], change, now, was)

    by_case: dict[str, tuple[EvaluationDiff, list[QuestionChange]]] = {}
    for d, c in pending:
        by_case.setdefault(d.key, (d, []))[1].append(c)
    try:
        await asyncio.gather(*(case(d, changes) for d, changes in by_case.values()))
    finally:
        usage = Usage.total(spent)
        engine.add_usage(usage)
        report.confirmation = FlipConfirmation(
            flips=len(pending), asks=plan.asks, tolerance=plan.tolerance, level=plan.level, bound=plan.bound,
            reasks=counts["asks"], requests=usage.llm_calls, cache_hits=usage.cache_hits,
            prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens, cost_usd=usage.cost_usd)
    return report
