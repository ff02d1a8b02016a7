"""Judging: every question answered independently about one (source, output) pair, the answer first.

The prompt puts what all questions share first (instructions, task, source, output) and the question
last, so that prefix caching applies (llama.cpp's KV cache locally, prompt caching at providers).
The source and the output are untrusted data between markers that they cannot close.

A verdict's answer comes from the first answer token; its explanation is generated only when the
explain mode asks for one (``failing``: every *no*; ``all``; ``none``). Two request shapes, one code
path (``litellm.acompletion`` through :class:`~pytest_bineval.llm.client.LLMClient`):

- a provider that continues an assistant prefill (the embedded model): the assistant turn is prefilled
  up to the answer value (``{"answer": "``), one decoding step gives the answer and P(yes) (the more
  probable of the yes and no tokens; a token that is neither is an error verdict unless yes and no together
  hold :data:`~pytest_bineval.llm.parsing.MIN_YES_NO_MASS` of the probability, and so are malformed logprobs),
  and, when wanted, a second request prefilled up to the explanation
  (``{"answer": "no", "explanation": "Because the response``) decodes it to the closing quote. Both share
  every token up to the answer, so the model's KV cache makes the pair one pass.
- any other provider: one streamed request per question (``--bineval-stream auto``, :mod:`.llm.streaming`),
  for ``{"answer": ..., "explanation": ...}`` with the answer first (logprobs asked for P(yes)); the stream is
  closed as soon as the answer is read when the explain mode wants no explanation for it, else read to the end.
  Whether a model streams is found out by the first question of the first assertion, asked alone.
- a provider that cannot stream (or ``--bineval-stream off``): an answer-only JSON request (a few tokens,
  logprobs asked for P(yes)), then, when wanted, an explanation request that repeats the same messages plus the
  answer and a short follow-up turn (provider prompt caching applies to the repeated prefix).

The reply cache holds whole verdicts, keyed on the question's messages, the model settings and the
explain mode; it is read before anything heavy is imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from .conversation import Conversation, asked_turns, check_subject, judged_text, output_size, turn_question
from .errors import CallError, InputTooLargeError
from .llm.caching import Points
from .llm.client import LLMClient
from .llm.parsing import answer_at, answer_settled, check_answer_once, read_reply, reply_schema
from .llm.streaming import NoStream, answer_so_far
from .models import Checklist, Evaluation, ExplainMode, Question, Usage, Verdict, wants_explanation
from .prompting import Prompt, delimit, load_follow_up, load_prompt

T = TypeVar("T")

EXPLANATION_MAX = 200  # characters kept of an explanation
ANSWER_MAX_TOKENS = 16  # an answer-only JSON reply: {"answer": "yes"} is ~6 tokens
EXPLANATION_MAX_TOKENS = 64  # ~EXPLANATION_MAX characters
TOP_LOGPROBS = 20  # alternatives read at the answer position (OpenAI's maximum)
ANSWER_PREFILL = '{"answer": "'


class AnswerReply(BaseModel):
    """The judge's answer-only reply, ``{"answer": "yes"|"no"}`` (any case, trailing punctuation or quotes
    forgiven). An explanation a provider volunteers with it (non-strict JSON modes) is kept, but not asked for:
    it is not in the schema."""

    model_config = ConfigDict(extra="ignore")

    answer: Literal["yes", "no"]
    explanation: SkipJsonSchema[str] = ""

    @field_validator("answer", mode="before")
    @classmethod
    def _spelled(cls, value: Any) -> Any:
        return value.strip().lower().strip(".!\"'") if isinstance(value, str) else value

    @field_validator("explanation", mode="before")
    @classmethod
    def _volunteered(cls, value: Any) -> str:
        return value.strip() if isinstance(value, str) else ""


class ExplanationReply(BaseModel):
    """The judge's explanation reply of the ``turns`` shape, ``{"explanation": "..."}`` (clipped after reading)."""

    explanation: str = Field(json_schema_extra={"maxLength": EXPLANATION_MAX})


class StreamedReply(BaseModel):
    """The judge's reply of the ``stream`` shape, ``{"answer": "yes"|"no", "explanation": "..."}``: the answer first
    (its schema lists it first, so structured output writes it first); read by :class:`AnswerReply`."""

    answer: Literal["yes", "no"]
    explanation: str = Field(json_schema_extra={"maxLength": EXPLANATION_MAX})


ANSWER_SCHEMA: dict[str, Any] = reply_schema(AnswerReply)
STREAMED_SCHEMA: dict[str, Any] = reply_schema(StreamedReply)
EXPLANATION_SCHEMA: dict[str, Any] = reply_schema(ExplanationReply)
NO_SOURCE = "(no input was given; judge the response on its own)"

Shape = Literal["prefill", "stream", "turns"]


# The explanation's first words, prefilled: without them the embedded model "explains" with the bare word "no";
# with them it writes one sentence about the response (docs/performance.md).
EXPLANATION_HEAD = "Because the response"


def explanation_prefill(answer: str) -> str:
    """The assistant text up to the explanation's value (and its first words), after ``answer``."""
    return f'{ANSWER_PREFILL}{answer}", "explanation": "{EXPLANATION_HEAD}'


def _answer_field(obj: dict[str, Any]) -> tuple[Literal["yes", "no"], str]:
    """(answer, explanation the model volunteered or "") of an answer-only reply."""
    reply = read_reply(AnswerReply, obj)
    return reply.answer, reply.explanation


def _explanation_field(obj: dict[str, Any]) -> str:
    return read_reply(ExplanationReply, obj).explanation.strip()


def _clean_explanation(text: str) -> str:
    """A decoded JSON-string value up to its closing quote: unescape what can be, clip, trim."""
    text = text.rstrip("\\").strip()
    with contextlib.suppress(ValueError):
        text = json.loads(f'"{text}"')
    return text[:EXPLANATION_MAX].strip()


def judge_messages(task: str, source: str | None, output: str | Conversation, question: Question,
                   *, question_first: bool = False, prompt: Prompt | None = None,
                   turn: int | None = None) -> list[dict[str, Any]]:
    """The evaluator messages (``prompt``: an evaluator prompt of your own instead of the packaged one);
    ``question_first`` defeats prefix reuse (for the benchmark only). A conversation is read as its transcript, up
    to and including ``turn`` when the question is asked of that turn (which the question then names)."""
    messages: list[dict[str, Any]] = (prompt or load_prompt("judge")).messages(
        task=task,
        source=delimit(source) if source is not None else NO_SOURCE,
        output=delimit(judged_text(output, turn)),
        question=turn_question(question.text, turn),
        no_example=question.no_example or "(none given)",
    )
    if question_first:
        messages[1]["content"] = f"Question: {question.text}\n\n{messages[1]['content']}"
    return messages


# A question that refers to the input (the questions prompt tells the writer to call it "the input") cannot be
# answered without one: asked with NO_SOURCE, the judge answers it about nothing and the test fails with no hint.
_ABOUT_THE_INPUT = re.compile(
    r"\b(?:the|this|that)\s+(?:given\s+|provided\s+|original\s+|source\s+)?"
    r"(?:input|source|article|document|passage|transcript|source\s+text|original\s+text)\b",
    re.IGNORECASE,
)


def refers_to_the_input(text: str) -> bool:
    """Whether a question's ``text`` refers to the input (``the input``, ``the source``, ``the article``, ...)."""
    return _ABOUT_THE_INPUT.search(text) is not None


def questions_needing_source(questions: Sequence[Question]) -> list[Question]:
    """The questions that refer to the input: asked without a source, they have nothing to be answered about."""
    return [q for q in questions if refers_to_the_input(q.text)]


def questions_need_source(questions: Sequence[Question]) -> bool:
    """Whether any of ``questions`` refers to the input (see :func:`questions_needing_source`)."""
    return bool(questions_needing_source(questions))


def missing_source_message(test: str, questions: Sequence[Question]) -> str:
    """The :class:`MissingSourceWarning` text for ``test``, an assertion asked without ``source=``: how many
    questions, of which dimension(s), and one of them."""
    needing = questions_needing_source(questions)
    first = needing[0].text if needing else ""
    names = list(dict.fromkeys(q.dimension for q in needing))
    of = f"of dimension{'s' if len(names) > 1 else ''} {', '.join(repr(n) for n in names)} " if names else ""
    return (f"{test}: {len(needing)} question(s) {of}are about the input (e.g. {first!r}) but the assertion gave "
            f"no source: they are judged about nothing. Pass the input the output was made from, "
            f"assert_passes(output, ..., source=...), or check dimensions whose questions do not need it.")


def shared_prefix(messages: list[dict[str, Any]], blank: list[dict[str, Any]]) -> tuple[int, int] | None:
    """Where the part of ``messages`` every question of an assertion shares ends: (index of the first message that
    differs from ``blank``, the same messages rendered for an empty question, and the characters they have in
    common), or None when they share nothing (``question_first``)."""
    for index, (mine, theirs) in enumerate(zip(messages, blank, strict=False)):
        a, b = str(mine.get("content") or ""), str(theirs.get("content") or "")
        if a != b:
            chars = common_prefix(a, b)
            return (index, chars) if index or chars else None
    return None


def common_prefix(a: str, b: str) -> int:
    """The length of the longest common prefix of ``a`` and ``b`` (a binary search over slices: compared in C, a
    few microseconds for a judge prompt, where a character loop took a millisecond)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def cache_points(messages: list[dict[str, Any]], blank: list[dict[str, Any]],
                 blank_output: list[dict[str, Any]]) -> Points | None:
    """Where prompt-cache breakpoints go in one question's ``messages``: after the source (where they part from
    ``blank_output``, the same messages for an empty output: what every assertion about this source shares) and
    after the output (where they part from ``blank``, for an empty question: what the assertion's questions
    share); None when the questions share nothing (``question_first``)."""
    shared = shared_prefix(messages, blank)
    if shared is None:
        return None
    source = shared_prefix(messages, blank_output)
    return (source, shared) if source is not None and source < shared else (shared,)


def explanation_messages(messages: list[dict[str, Any]], answer_reply: str) -> list[dict[str, Any]]:
    """The explanation request of the ``turns`` shape: the answer request's messages, the model's answer
    reply, and the packaged follow-up turn."""
    return [*messages, {"role": "assistant", "content": answer_reply}, dict(load_follow_up("explain"))]


def check_output(output: object, source: object) -> str | Conversation:
    """The input's one check, where it comes in, and the output under test as it is judged: a str as it is, a
    conversation validated once (:func:`~pytest_bineval.conversation.as_output`: a :class:`ConversationError` naming
    the message); any other output, or a source neither ``str``, documents nor None, is an error saying what is
    wrong before anything is asked."""
    from .conversation import as_output

    judged = as_output(output)
    if source is not None and not isinstance(source, str):  # a list of documents (pytest_bineval.sources), checked
        from .sources import read_source

        read_source(source)
    return judged


@dataclass
class _Answer:
    answer: Literal["yes", "no"]
    p_yes: float | None
    reply: str  # the answer as the model wrote it (turns shape)
    volunteered: str  # an explanation given with the answer (turns shape, non-strict providers)


async def _answer(client: LLMClient, messages: list[dict[str, Any]], shape: Shape,
                  prefix: Points | None = None) -> tuple[_Answer, Usage]:
    if shape == "prefill":
        reply = await client.complete_text(
            [*messages, {"role": "assistant", "content": ANSWER_PREFILL, "prefix": True}],
            max_tokens=1, top_logprobs=TOP_LOGPROBS,
        )
        try:
            answer, p_yes = answer_at(reply.text, reply.logprobs[0] if reply.logprobs else None)
        except ValueError as exc:  # neither yes nor no, or malformed logprobs: an error verdict, a failed request
            usage = reply.usage.model_copy(update={"failed_requests": reply.usage.failed_requests + 1})
            raise CallError(str(exc), usage) from None
        return _Answer(answer, p_yes, reply.text, ""), reply.usage
    json_reply = await client.uncached().complete_json(
        messages, schema_name="verdict", schema=ANSWER_SCHEMA, validate=_answer_field,
        max_tokens=ANSWER_MAX_TOKENS, want_p_yes=True, cache_prefix=prefix,
    )
    answer, volunteered = json_reply.value
    return _Answer(answer, json_reply.p_yes, json_reply.raw, volunteered), json_reply.usage


def streamed_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The request of the ``stream`` shape: the judge's messages and the packaged turn asking for the answer and,
    after it, the explanation in one reply."""
    return [*messages, dict(load_follow_up("stream"))]


def _answer_read_so_far(text: str) -> tuple[Literal["yes", "no"], str]:
    """(answer, "") of a streamed reply closed after its answer; ValueError when what was read gives the answer
    twice (an ambiguous reply, as it is read whole)."""
    check_answer_once(text)
    answer = answer_so_far(text)
    if answer is None:
        raise ValueError("the reply was closed before its answer")  # never: the stream closes after an answer
    return answer, ""


async def _streamed(client: LLMClient, messages: list[dict[str, Any]], explain: ExplainMode,
                    prefix: Points | None) -> tuple[_Answer, Usage]:
    """One streamed request: the answer, and its explanation when ``explain`` wants one (else the stream is
    closed after the answer). Raises :class:`NoStream` (with the usage) when the model cannot stream."""
    def enough(text: str) -> bool:  # the answer, and the next key (a second "answer" is then read, and refused)
        answer = answer_so_far(text)
        return answer is not None and not wants_explanation(explain, answer) and answer_settled(text)

    reply = await client.uncached().complete_json(
        streamed_messages(messages), schema_name="verdict", schema=STREAMED_SCHEMA, validate=_answer_field,
        max_tokens=ANSWER_MAX_TOKENS + EXPLANATION_MAX_TOKENS + 16, want_p_yes=True, cache_prefix=prefix,
        until=enough, partial=_answer_read_so_far,
    )
    answer, explanation = reply.value
    return _Answer(answer, reply.p_yes, reply.raw, explanation), reply.usage


async def _explanation(client: LLMClient, messages: list[dict[str, Any]], shape: Shape,
                       first: _Answer, prefix: Points | None = None) -> tuple[str, Usage]:
    if shape == "prefill":
        reply = await client.complete_text(
            [*messages, {"role": "assistant", "content": explanation_prefill(first.answer), "prefix": True}],
            max_tokens=EXPLANATION_MAX_TOKENS, stop=['"'], min_tokens=1,  # never an empty explanation
        )
        return _clean_explanation(EXPLANATION_HEAD + reply.text), reply.usage
    if first.volunteered:
        return first.volunteered[:EXPLANATION_MAX], Usage()
    json_reply = await client.uncached().complete_json(
        explanation_messages(messages, first.reply), schema_name="explanation", schema=EXPLANATION_SCHEMA,
        validate=_explanation_field, max_tokens=EXPLANATION_MAX_TOKENS + 16, cache_prefix=prefix,
    )
    return json_reply.value[:EXPLANATION_MAX], json_reply.usage


def verdict_key(client: LLMClient, messages: list[dict[str, Any]], explain: ExplainMode) -> str:
    """The reply-cache key of one verdict: the question's messages, the model settings, the explain mode."""
    return client.key({"kind": "verdict", "messages": messages, "explain": explain})


def _cached_verdict(entry: dict[str, Any] | None) -> tuple[Literal["yes", "no"], float | None, str] | None:
    if entry is None:
        return None
    answer, p_yes, explanation = entry.get("answer"), entry.get("p_yes"), entry.get("explanation", "")
    if answer not in ("yes", "no") or not isinstance(explanation, str):
        return None
    if p_yes is not None and not isinstance(p_yes, (int, float)):
        return None
    return answer, None if p_yes is None else float(p_yes), explanation


async def judge_question(client: LLMClient, messages: list[dict[str, Any]], question: Question,
                         explain: ExplainMode = "failing",
                         prefix: Points | None = None, *, turn: int | None = None) -> tuple[Verdict, Usage]:
    """One verdict: from the cache, else an answer request and, when ``explain`` wants one, an
    explanation request. A failed answer is an error verdict; a failed explanation keeps the answer and
    says why the explanation is missing (and is not cached). ``prefix``: where the messages' shared part ends
    (:func:`shared_prefix`; a prompt-cache breakpoint for providers that need one); ``turn``: the conversation's
    turn the question was asked of (recorded in the verdict)."""
    base: dict[str, Any] = {"question_id": question.id, "dimension": question.dimension,
                            "question": question.text, "explain": explain, "turn": turn}
    key = verdict_key(client, messages, explain)
    hit = _cached_verdict(client.lookup(key))
    if hit is not None:
        answer, p_yes, explanation = hit
        return (Verdict(**base, answer=answer, p_yes=p_yes, explanation=explanation, cached=True),
                Usage(cache_hits=1, cost_usd=0.0))
    shape: Shape = "prefill" if client.continues_prefill() else "stream" if client.may_stream() else "turns"
    usage = Usage()
    try:
        if shape == "stream":
            try:
                first, usage = await _streamed(client, messages, explain, prefix)
            except NoStream as exc:  # found out now: this question, and the model's next ones, take two requests
                usage, shape = exc.usage or Usage(), "turns"
        if shape != "stream":
            first, more = await _answer(client, messages, shape, prefix)
            usage = usage + more
    except CallError as exc:
        return Verdict(**base, answer="error", error=exc.cause), usage + (exc.usage or Usage())
    explanation = ""
    if wants_explanation(explain, first.answer):  # (a streamed reply has it, unless the provider left it out)
        try:
            explanation, more = await _explanation(client, messages, shape, first, prefix)
        except CallError as exc:
            usage = usage + (exc.usage or Usage())
            return (Verdict(**base, answer=first.answer, p_yes=first.p_yes,
                            error=f"no explanation: {exc.cause}"), usage)
        usage = usage + more
    client.store(key, {"answer": first.answer, "p_yes": first.p_yes, "explanation": explanation})
    return Verdict(**base, answer=first.answer, p_yes=first.p_yes, explanation=explanation), usage


async def judge(
    client: LLMClient,
    output: str | Conversation,
    checklist: Checklist,
    source: str | None = None,
    *,
    concurrency: int = 8,
    question_first: bool = False,
    prompt: Prompt | None = None,
    explain: ExplainMode = "failing",
) -> Evaluation:
    """Answer every question of ``checklist`` about ``output``; judge failures become error verdicts.

    An empty output is judged like any other (each question is still asked; a sound judge says no). A conversation's
    questions of scope ``each_turn`` are asked once per assistant turn, turn by turn (the questions of one turn share
    the prompt up to the question; a later turn's transcript starts with an earlier one's).
    Output and source too large for the judge's context raise :class:`InputTooLargeError` once every question
    already being asked has finished (none is left running; none not yet asked is asked), with the usage of
    every request made (the failed ones too). The input was checked where it came in (``assert_passes``,
    ``evaluate``, ``Engine.evaluate``: :func:`check_output`).
    """
    semaphore = asyncio.Semaphore(max(1, concurrency))
    stop = asyncio.Event()  # set by a question that raised: the questions not asked yet are not asked
    empty = Question(id="", dimension="", text="")
    blank_output = judge_messages(checklist.task, source, "", empty, question_first=question_first, prompt=prompt)
    blanks: dict[int | None, list[dict[str, Any]]] = {}  # per turn: the messages for an empty question

    def blank(turn: int | None) -> list[dict[str, Any]]:
        if turn not in blanks:
            blanks[turn] = judge_messages(checklist.task, source, output, empty, question_first=question_first,
                                          prompt=prompt, turn=turn)
        return blanks[turn]

    async def ask(q: Question, turn: int | None) -> tuple[Verdict, Usage] | None:
        if q.check is not None:  # code answers it: the judge is never asked
            return await checked_verdict(q, q.check, check_subject(output, turn), check_seconds(client),
                                         turn=turn), Usage()
        async with semaphore:
            if stop.is_set():
                return None
            messages = judge_messages(checklist.task, source, output, q, question_first=question_first,
                                      prompt=prompt, turn=turn)
            try:
                return await judge_question(client, messages, q, explain,
                                            cache_points(messages, blank(turn), blank_output), turn=turn)
            except Exception:
                stop.set()
                raise

    loop = asyncio.get_running_loop()
    started = loop.time()
    # the whole output's questions, then each assistant turn's (a text output has no turns)
    turns = sorted({t for q in checklist.questions for t in asked_turns(q.scope, output)}, key=lambda t: t or 0)
    asks = [(q, t) for t in turns for q in checklist.questions if t in asked_turns(q.scope, output)]
    first = next((i for i, (q, _) in enumerate(asks) if q.check is None), None)
    if first is not None and client.stream_unknown() and not client.continues_prefill():
        # whether the model streams is not known: its first question is asked alone, so that a server that cannot
        # stream costs one streamed request, not one per question asked at once
        head, head_failures = await settle([ask(*asks[first])])
        rest, failures = await settle([ask(*a) for i, a in enumerate(asks) if i != first])
        outcomes, failures = [*rest[:first], *head, *rest[first:]], [*head_failures, *failures]
    else:
        outcomes, failures = await settle([ask(*a) for a in asks])
    results = [o for o in outcomes if o is not None]  # None: not asked, another question had raised
    usage = Usage.total([*(u for _, u in results), *(usage_of_error(e) for e in failures)])
    usage.seconds = loop.time() - started
    # counted per evaluation: an assertion whose shared prefix is too short to be cached is one, whatever its size
    usage.below_cache_minimum = dict.fromkeys(usage.below_cache_minimum, 1)
    if failures:
        exc = next((e for e in failures if isinstance(e, InputTooLargeError)), failures[0])
        if not isinstance(exc, InputTooLargeError):
            raise exc
        sizes = output_size(output)
        if source is not None:
            sizes += f", source: {len(source)} characters"
        raise InputTooLargeError(f"{exc} ({sizes}); shorten them or use a model with a larger context",
                                 usage) from exc
    return Evaluation(
        task=checklist.task,
        model=client.model,
        dimensions=list(checklist.dimensions),
        verdicts=[v for v, _ in results],
        usage=usage,
    )


async def reask(client: LLMClient, messages: list[dict[str, Any]], question: Question, semaphore: asyncio.Semaphore,
                spent: list[Usage]) -> Verdict:
    """One more ask of ``question`` (no explanation), within ``semaphore``; what it cost is appended to ``spent``,
    also when it raises (a request that failed was made all the same)."""
    async with semaphore:
        try:
            verdict, usage = await judge_question(client, messages, question, "none")
        except Exception as exc:
            spent.append(usage_of_error(exc))
            raise
    spent.append(usage)
    return verdict


# A check asked when little of the evaluation's deadline is left still gets this long (a check takes milliseconds).
MIN_CHECK_SECONDS = 0.5


def check_seconds(client: LLMClient) -> float:
    """How long a check may take: as long as one judge request (``--bineval-timeout``), and no longer than what is
    left of the evaluation's deadline (at least :data:`MIN_CHECK_SECONDS`)."""
    seconds = client.settings.timeout
    if client.deadline is not None:
        seconds = min(seconds, max(client.deadline - time.monotonic(), MIN_CHECK_SECONDS))
    return seconds


async def checked_verdict(question: Question, check: dict[str, Any], output: str | Conversation, seconds: float,
                          *, turn: int | None = None) -> Verdict:
    """The verdict of ``question`` decided by its ``check``: the check's result and what it measured; a check
    that does not finish within ``seconds`` is an error verdict saying so (never a pass). ``turn``: the
    conversation's turn it was asked of (``output`` is then that turn alone)."""
    from .checks.running import arun_check
    from .checks.tools import ToolCheckResult
    from .errors import CheckTimeout

    base: dict[str, Any] = {"question_id": question.id, "dimension": question.dimension, "question": question.text,
                            "decided_by": "code", "turn": turn}
    try:
        result = await arun_check(check, output, seconds)
    except CheckTimeout as exc:
        return Verdict(**base, answer="error", error=f"{exc} (a check's bound: --bineval-timeout, within the "
                                                     "evaluation's deadline)")
    return Verdict(**base, answer="yes" if result.passed else "no", explanation=result.explanation,
                   found_turn=result.turn if isinstance(result, ToolCheckResult) and not result.passed and turn is None
                   else None)


async def settle(aws: Sequence[Awaitable[T]]) -> tuple[list[T], list[BaseException]]:
    """Await every one of ``aws``: their results (in order) and the exceptions raised. A plain gather returns at the
    first exception and leaves the others running, their requests uncounted; a cancellation still cancels all."""
    outcomes = await asyncio.gather(*aws, return_exceptions=True)
    return ([o for o in outcomes if not isinstance(o, BaseException)],
            [o for o in outcomes if isinstance(o, BaseException)])


def usage_of_error(exc: BaseException) -> Usage:
    """What the requests behind an exception had spent: the usage it (or the one it was raised from) carries."""
    seen: BaseException | None = exc
    while seen is not None:
        usage = getattr(seen, "usage", None)
        if isinstance(usage, Usage):
            return usage
        seen = seen.__cause__
    return Usage()
