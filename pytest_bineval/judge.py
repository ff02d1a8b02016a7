"""Judging: every question answered independently, one request each, about one (source, output) pair.

The prompt puts what all questions share first (instructions, task, source, output) and the question
last, so that prefix caching applies (llama.cpp's KV cache locally, prompt caching at providers).
The source and the output are untrusted data between markers that they cannot close.
"""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from .errors import ArgumentTypeError, CallError, InputTooLargeError
from .llm.client import LLMClient
from .models import Checklist, Evaluation, Question, Usage, Verdict
from .prompting import Prompt, delimit, load_prompt

EXPLANATION_MAX = 200
VERDICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "enum": ["yes", "no"]},
        "explanation": {"type": "string", "maxLength": EXPLANATION_MAX},
    },
    "required": ["answer", "explanation"],
    "additionalProperties": False,
}
NO_SOURCE = "(no input was given; judge the response on its own)"


def _verdict_fields(obj: dict[str, Any]) -> tuple[Literal["yes", "no"], str]:
    raw = str(obj.get("answer", "")).strip().lower().strip(".!\"'")
    if raw not in ("yes", "no"):
        raise ValueError(f'"answer" must be "yes" or "no", not {obj.get("answer")!r}')
    answer: Literal["yes", "no"] = "yes" if raw == "yes" else "no"
    explanation = obj.get("explanation", "")
    if not isinstance(explanation, str):
        raise ValueError('"explanation" must be a string')
    return answer, explanation.strip()


def judge_messages(task: str, source: str | None, output: str, question: Question,
                   *, question_first: bool = False, prompt: Prompt | None = None) -> list[dict[str, str]]:
    """The evaluator messages (``prompt``: an evaluator prompt of your own instead of the packaged one);
    ``question_first`` defeats prefix reuse (for the benchmark only)."""
    messages = (prompt or load_prompt("judge")).messages(
        task=task,
        source=delimit(source) if source is not None else NO_SOURCE,
        output=delimit(output),
        question=question.text,
        no_example=question.no_example or "(none given)",
    )
    if question_first:
        messages[1]["content"] = f"Question: {question.text}\n\n{messages[1]['content']}"
    return messages


def check_output(output: object, source: object) -> None:
    if not isinstance(output, str):
        raise ArgumentTypeError(f"the output under test must be a str, not {type(output).__name__}")
    if source is not None and not isinstance(source, str):
        raise ArgumentTypeError(f"source must be a str or None, not {type(source).__name__}")


async def judge(
    client: LLMClient,
    output: str,
    checklist: Checklist,
    source: str | None = None,
    *,
    concurrency: int = 8,
    question_first: bool = False,
    prompt: Prompt | None = None,
) -> Evaluation:
    """Answer every question of ``checklist`` about ``output``; judge failures become error verdicts.

    An empty output is judged like any other (each question is still asked; a sound judge says no).
    """
    check_output(output, source)
    semaphore = asyncio.Semaphore(max(1, concurrency))

    async def ask(q: Question) -> tuple[Verdict, Usage]:
        async with semaphore:
            messages = judge_messages(checklist.task, source, output, q, question_first=question_first,
                                      prompt=prompt)
            base: dict[str, Any] = {"question_id": q.id, "dimension": q.dimension, "question": q.text}
            try:
                reply = await client.complete_json(
                    messages, schema_name="verdict", schema=VERDICT_SCHEMA, validate=_verdict_fields,
                    max_tokens=160, want_p_yes=True,
                )
            except CallError as exc:
                return Verdict(**base, answer="error", error=exc.cause), exc.usage or Usage()
            answer, explanation = reply.value
            return (
                Verdict(**base, answer=answer, explanation=explanation, p_yes=reply.p_yes, cached=reply.cached),
                reply.usage,
            )

    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        results = await asyncio.gather(*(ask(q) for q in checklist.questions))
    except InputTooLargeError as exc:
        sizes = f"output: {len(output)} characters"
        if source is not None:
            sizes += f", source: {len(source)} characters"
        raise InputTooLargeError(f"{exc} ({sizes}); shorten them or use a model with a larger context") from exc
    usage = Usage.total(u for _, u in results)
    usage.seconds = loop.time() - started
    return Evaluation(
        task=checklist.task,
        model=client.model,
        dimensions=list(checklist.dimensions),
        verdicts=[v for v, _ in results],
        usage=usage,
    )
