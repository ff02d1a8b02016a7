"""Every model call goes through here, and from here through ``litellm.acompletion`` or an in-process transport.

Hosted models (``openai/...``, ``anthropic/...``, ``ollama/...``, any OpenAI-compatible ``api_base``) and the
embedded model (``bineval/...``) are reached through litellm; the scripted fakes of :mod:`pytest_bineval.testing`
are transports (:mod:`.transports`), which skip litellm and nothing else. All take the same path:
cache lookup, structured-output request (negotiated: :mod:`.negotiation`), unambiguous JSON parsing
(:mod:`.parsing`), bounded retries within a deadline (:mod:`.retry`), usage accounting (every request,
failed ones included). Every failure is a :class:`~pytest_bineval.errors.CallError` with its cause (redacted),
or :class:`~pytest_bineval.errors.InputTooLargeError`; nothing else escapes. :meth:`LLMClient.send` is that one
request path; :meth:`LLMClient.complete_json` is the cache and the JSON reading around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from ..errors import BinevalEncodingWarning, CallError, InputTooLargeError
from ..models import Usage
from ..prompting import prompt_version
from ..redaction import redact, replace_surrogates, secrets_of_params
from . import openai_compat
from ._litellm import import_litellm
from .accounting import BinevalUsageWarning, reply_usage, short_prefix
from .cache import REPLAY_MISS, ResponseCache, cache_key
from .caching import Points, needs_breakpoints, with_breakpoints
from .http import CrossHostRedirect, HttpClients, warn_plain_http_key
from .local import cut_generations, is_embedded, weights_id
from .negotiation import Form, FormatNegotiator, form_key, format_for, remembered_form, response_format
from .parsing import (
    MalformedResponse,
    ReplyParts,
    clean_reply,
    clip,
    get,
    p_yes_at,
    p_yes_from_logprobs,
    parse_json_object,
    reply_parts,
)
from .providers import continues_prefill, ensure_provider, warm_up
from .retry import RetryPolicy, classify, retry_after
from .seam import RequestSeam
from .streaming import CLOSED, NoStream, Streamed, read_stream, refuses_stream
from .transports import transport_for

__all__ = ["BinevalEncodingWarning", "BinevalUsageWarning", "LLMClient", "ModelSettings", "Reply", "TextReply",
           "import_litellm", "p_yes_at", "p_yes_from_logprobs", "parse_json_object", "response_format"]

T = TypeVar("T")
R = TypeVar("R")


def _cleaned(content: str, model: str) -> str:
    """A reply's text with its lone surrogates (raw or JSON-escaped) replaced, said in a warning: model-written
    text enters the run here, so questions, requirements, criteria, lessons, explanations and verdicts can all be
    written as UTF-8 (reports, pinned checklists, the terminal)."""
    content, replaced = clean_reply(content)
    if replaced:
        warnings.warn(f"{replaced} lone surrogate character(s) (not valid UTF-8) in the reply of {model} were "
                      "replaced by U+FFFD", BinevalEncodingWarning, stacklevel=4)
    return content


@dataclass
class Reply(Generic[T]):
    value: T
    raw: str
    p_yes: float | None
    usage: Usage
    cached: bool


@dataclass
class TextReply:
    """A plain-text reply (no JSON parsing, no cache): the text, the OpenAI-style logprobs of its tokens
    (``[]`` when the provider gave none) and what the request(s) cost."""

    text: str
    logprobs: list[Any]
    usage: Usage


@dataclass
class ModelSettings:
    """Decoding and transport settings of one model (picklable; never holds a secret)."""

    model: str
    temperature: float = 0.0
    timeout: float = 120.0
    retries: int = 2
    api_base: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # Which repeat of a request this client makes (--bineval-repeats): part of the cache key when > 0, so that
    # each repeat gets its own reply and repeat 0 keeps the keys of a run that asks once. Never sent.
    repeat: int = 0
    # --bineval-cache replay: a request the cache cannot answer is an error, never sent (REPLAY_MISS).
    replay: bool = False
    # --bineval-stream: "auto" streams the judge's answer-then-explanation replies where the provider can; "off" never.
    stream: str = "auto"

    @property
    def policy(self) -> RetryPolicy:
        return RetryPolicy(retries=self.retries, timeout=self.timeout)


def encodable_messages(messages: list[dict[str, str]]) -> tuple[list[dict[str, str]], int]:
    """``messages`` with lone surrogates replaced by U+FFFD (they cannot be sent as UTF-8), and how many."""
    out, total = [], 0
    for m in messages:
        content, n = replace_surrogates(str(m.get("content") or ""))
        total += n
        out.append({**m, "content": content})
    return out, total


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes (``__cause__``, else ``__context__``; the first of an exception group's, as anyio
    groups the failed attempts of a connection), outermost first, each once."""
    out: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in out and len(out) < 20:
        out.append(current)
        grouped = getattr(current, "exceptions", None)
        inner = grouped[0] if isinstance(grouped, (list, tuple)) and grouped else None
        current = current.__cause__ or current.__context__ or (inner if isinstance(inner, BaseException) else None)
    return out


_CONNECT_CAUSES: tuple[tuple[type[BaseException], str], ...] = (
    (ConnectionRefusedError, "connection refused"),
    (socket.gaierror, "the host name does not resolve"),
)


def connection_failure(exc: BaseException, url: str | None) -> str | None:
    """``cannot connect to <url> (connection refused): is the server running?`` when the request failed before
    any reply because nothing accepted the connection, else None. ``url``: the API base (when None, the URL of
    the request found in the exception, without its path)."""
    chain = _chain(exc)
    why = next((text for cause in chain for kind, text in _CONNECT_CAUSES if isinstance(cause, kind)), None)
    if why is None:
        return None
    if url is None:
        request = next((r for r in (getattr(c, "request", None) for c in chain[::-1]) if r is not None), None)
        target = getattr(request, "url", None)
        scheme, host = getattr(target, "scheme", ""), getattr(target, "netloc", b"")
        host = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
        url = f"{scheme}://{host}" if scheme and host else "the model's server"
    hint = "is the server running?" if why == "connection refused" else "is the address right?"  # (a reset is
    # not here: the server took the connection, and the request's own error says what happened)
    return f"cannot connect to {url} ({why}): {hint}"


def _describe(exc: BaseException, secrets: Iterable[str] = (), url: str | None = None) -> str:
    """A one-paragraph cause: the exception's type and message, without a traceback litellm may have put in it;
    secrets are removed before the message is clipped (a cut inside a key would hide it from the redaction).
    A connection that could not be made says so, with ``url`` (:func:`connection_failure`)."""
    if isinstance(exc, asyncio.TimeoutError):
        return str(exc) or "timed out"
    refused = next((c for c in _chain(exc) if isinstance(c, CrossHostRedirect)), None)
    if refused is not None:
        return redact(str(refused), secrets)
    unreachable = connection_failure(exc, url)
    if unreachable is not None:
        return redact(unreachable, secrets)
    message = redact(str(exc).split("\nTraceback (most recent call last)", 1)[0].strip(), secrets)
    return f"{type(exc).__name__}: {clip(message, 300)}"


def _correction_turn(messages: list[dict[str, str]], content: str, problem: str) -> list[dict[str, str]]:
    """The conversation for another try after an unusable reply: the reply and what was wrong with it."""
    if not content.strip():
        return messages
    return [
        *messages,
        {"role": "assistant", "content": content},
        {"role": "user", "content": f"That reply was not valid ({clip(problem, 200)}). "
                                    "Reply with only the JSON object, nothing else."},
    ]


class LLMClient:
    """Asks one model for JSON replies, with cache, negotiated structured output, retries within a deadline and
    usage accounting. ``formats``: the session's negotiation state (the engine shares one between its clients);
    ``deadline``: a ``time.monotonic()`` instant no request of this client goes past (one assertion's)."""

    def __init__(self, settings: ModelSettings, cache: ResponseCache | None, *,
                 formats: FormatNegotiator | None = None, deadline: float | None = None,
                 http: HttpClients | None = None, batch: RequestSeam | None = None) -> None:
        self.settings = settings
        self.cache = cache
        self.formats = formats or FormatNegotiator()
        self.http = http or HttpClients()  # the engine's (pooled per event loop); a client of its own has its own
        self._memory = cache  # where learned structured-output forms are kept across runs (uncached() keeps it)
        self.batch = batch  # --bineval-batch: asked before every request (see .seam)
        # shared with the copies of uncached(): a deadline moved by a provider set-up moves for all of them
        self._deadline: list[float | None] = [deadline]

    @property
    def deadline(self) -> float | None:
        return self._deadline[0]

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self._deadline[0] = value

    @property
    def model(self) -> str:
        return self.settings.model

    # -- answer first: the judge's requests (plain text, prefill) and its own cache entries ----------------------
    def continues_prefill(self) -> bool:
        """Whether the provider continues a final assistant message marked ``"prefix": True`` (litellm's
        convention) instead of answering it (the embedded model does; an in-process provider says so with
        a ``continues_prefill`` attribute). Sets the provider up (imports litellm): ask after the cache. The
        set-up's time does not count against the deadline (it moves by that time, as in :meth:`send`)."""
        started = time.monotonic()
        try:
            return continues_prefill(self.settings.model)
        finally:
            if self.deadline is not None:
                self.deadline += time.monotonic() - started

    def may_stream(self) -> bool:
        """Whether the judge's replies of this model are asked for streamed (:mod:`.streaming`): ``--bineval-stream
        auto``, a model litellm serves (in-process transports do not stream), not yet found unable to."""
        s = self.settings
        return (s.stream == "auto" and transport_for(s.model) is None
                and self.formats.streaming.streams(s.model) is not False)

    def stream_unknown(self) -> bool:
        """Whether a streamed request of this model would be its first (whether it streams is not known yet)."""
        return self.may_stream() and self.formats.streaming.streams(self.settings.model) is None

    def uncached(self, *, batch: bool = True) -> LLMClient:
        """This client without the reply cache (for callers that cache a result of several requests); it shares
        the negotiation state and the deadline, and the batch seam unless ``batch`` is False."""
        client = LLMClient(self.settings, None, formats=self.formats, http=self.http,
                           batch=self.batch if batch else None)
        client._deadline = self._deadline
        client._memory = self._memory
        return client

    def key(self, parts: dict[str, Any]) -> str:
        """A cache key for a result of this model made from ``parts`` (model, decoding settings and prompt
        version included; never a secret). Computing it imports nothing heavy."""
        s = self.settings
        return cache_key({"model": s.model, "temperature": s.temperature, "api_base": s.api_base, **s.extra,
                          **parts, "prompt_version": prompt_version(), **weights_id(s.model),
                          **({"repeat": s.repeat} if s.repeat else {})})

    def lookup(self, key: str) -> dict[str, Any] | None:
        return self.cache.get(key) if self.cache is not None else None

    def store(self, key: str, value: dict[str, Any]) -> None:
        if self.cache is not None:
            self.cache.set(key, value)

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int,
        stop: list[str] | None = None,
        top_logprobs: int | None = None,
        min_tokens: int = 0,
    ) -> TextReply:
        """One plain-text reply (uncached), through :meth:`send` (retries, deadline, every request counted,
        redacted causes). A final ``{"role": "assistant", "content": ..., "prefix": True}`` message is a
        prefill for providers that continue it (:meth:`continues_prefill`); ``min_tokens`` (vLLM's and the
        embedded model's parameter) keeps the reply from ending before that many tokens."""
        s = self.settings
        request: dict[str, Any] = {"model": s.model, "messages": messages, "temperature": s.temperature,
                                   "max_tokens": max_tokens, **s.extra}
        if stop:
            request["stop"] = stop
        if min_tokens:
            request["min_tokens"] = min_tokens
        if top_logprobs:
            request["logprobs"] = True
            request["top_logprobs"] = top_logprobs
        if s.api_base:
            request["api_base"] = s.api_base

        def read(parts: ReplyParts) -> tuple[str, list[Any]]:
            content = get(parts.logprobs, "content") if top_logprobs and parts.logprobs is not None else None
            return parts.content, list(content or [])

        (text, logprobs), _, usage = await self.send(request, read)
        return TextReply(text, logprobs, usage)

    # -- the request ---------------------------------------------------------------------------------------------
    def build_request(self, messages: list[dict[str, str]], *, schema_name: str, schema: dict[str, Any],
                      max_tokens: int, want_p_yes: bool = False,
                      sampling: dict[str, float] | None = None) -> dict[str, Any]:
        """The logical request (with the ``json_schema`` form, whatever form is sent): what the cache key is of."""
        s = self.settings
        request: dict[str, Any] = {
            "model": s.model,
            "messages": messages,
            "temperature": s.temperature,
            "max_tokens": max_tokens,
            "response_format": response_format(schema_name, schema),
            **(sampling or {}),
            **s.extra,
        }
        if s.api_base:
            request["api_base"] = s.api_base
        if want_p_yes:
            request["logprobs"] = True
            request["top_logprobs"] = 5
        return request

    def key_of(self, request: dict[str, Any]) -> str:
        """The cache key of a logical request: it, the prompt version, and the repeat (when > 0)."""
        s = self.settings
        return cache_key({**request, "prompt_version": prompt_version(), **weights_id(s.model),
                          **({"repeat": s.repeat} if s.repeat else {})})

    def _secrets(self) -> list[str]:
        return secrets_of_params(self.settings.extra)

    def _cached(self, key: str, validate: Callable[[dict[str, Any]], T]) -> Reply[T] | None:
        if self.cache is None:
            return None
        hit = self.cache.get(key)
        if hit is None:
            return None
        try:
            content = _cleaned(str(hit["content"]), self.settings.model)
            value = validate(parse_json_object(content))
            p = hit.get("p_yes")
            return Reply(value, content, None if p is None else float(p),
                         Usage(cache_hits=1, cost_usd=0.0), cached=True)
        except (ValueError, KeyError, TypeError):
            return None  # an entry that no longer validates is recomputed

    async def complete_json(
        self,
        messages: list[dict[str, str]],
        *,
        schema_name: str,
        schema: dict[str, Any],
        validate: Callable[[dict[str, Any]], T],
        max_tokens: int,
        want_p_yes: bool = False,
        sampling: dict[str, float] | None = None,
        cache_prefix: Points | None = None,
        until: Callable[[str], bool] | None = None,
        partial: Callable[[str], T] | None = None,
    ) -> Reply[T]:
        """One JSON reply validated by ``validate`` (which raises ValueError on a bad one).

        ``until`` and ``partial``: stream the reply (where :meth:`may_stream`) and stop reading once ``until``
        accepts the text so far; ``partial`` reads the value of such a reply cut short (raises
        :class:`~.streaming.NoStream` when the provider cannot stream: the caller asks otherwise).

        ``sampling``: extra OpenAI-style decoding parameters (e.g. ``presence_penalty``), part of the key.
        ``cache_prefix``: (message index, characters) points, the last where the part every question shares ends:
        prompt-cache breakpoints there for providers that need them (:mod:`.caching`; not part of the key).
        Raises :class:`CallError` (cause redacted, usage attached) when no usable reply came within the retries
        and the deadline, :class:`InputTooLargeError` when the prompt does not fit the model's context.
        """
        request = self.build_request(messages, schema_name=schema_name, schema=schema, max_tokens=max_tokens,
                                     want_p_yes=want_p_yes, sampling=sampling)
        key = self.key_of(request) if self.cache is not None else ""
        hit = self._cached(key, validate)
        if hit is not None:
            return hit

        def read(parts: ReplyParts) -> tuple[T, float | None]:
            if parts.finish_reason == CLOSED and partial is not None:
                value = partial(parts.content)
            else:
                value = validate(parse_json_object(parts.content))
            return value, p_yes_from_logprobs(parts.logprobs) if want_p_yes else None

        (value, p_yes), parts, usage = await self.send(request, read, schema=(schema_name, schema),
                                                       cache_prefix=cache_prefix, until=until)
        reply = Reply(value, parts.content, p_yes, usage, cached=False)
        if self.cache is not None:
            self.cache.set(key, {"content": reply.raw, "p_yes": reply.p_yes})
        return reply

    async def send(self, request: dict[str, Any], read: Callable[[ReplyParts], R], *,
                   schema: tuple[str, dict[str, Any]] | None = None,
                   cache_prefix: Points | None = None,
                   until: Callable[[str], bool] | None = None) -> tuple[R, ReplyParts, Usage]:
        """Send ``request`` until ``read`` accepts a reply (it raises ValueError/TypeError/KeyError on an unusable
        one), or the retries or the deadline run out; every request is counted in the usage returned.

        The one request path (JSON and plain-text replies alike): text that cannot be encoded is replaced and said
        (:class:`BinevalEncodingWarning`); ``schema`` (name, JSON schema): ask for structured output in the form
        the session's negotiation has found the provider takes, and add a correction turn after an unusable
        reply; failures are classified and retried by :mod:`.retry`. Raises :class:`CallError` (cause redacted,
        usage attached) or :class:`InputTooLargeError`. ``cache_prefix``: where the shared part of the messages
        ends (see :meth:`complete_json`). ``until``: stream the reply where :meth:`may_stream`, and stop reading
        when ``until`` accepts the text so far (a reply cut short has the finish reason
        :data:`~.streaming.CLOSED`); a model found unable to stream raises :class:`~.streaming.NoStream` with
        the usage so far (``usage`` attribute).
        """
        policy = self.settings.policy
        model = self.settings.model
        if self.settings.replay:  # every cache lookup came first and missed
            raise CallError(REPLAY_MISS, Usage())
        if self.batch is not None:  # --bineval-batch: a reply a batch brought, or the request recorded for one
            answered = await self.batch.answer(self, request, read, schema=schema, cache_prefix=cache_prefix)
            if answered is not None:
                return answered
        # Here, after any cache lookup: a run served from the cache never imports litellm. The set-up (litellm's
        # cold import takes seconds, more on a loaded machine; the embedded model's load) happens before a request
        # can be sent, so it does not count against the deadline: the deadline moves by the time it took (the
        # set-up blocks the event loop, so concurrent questions of this client lose that time together).
        setup_started = time.monotonic()
        self._prepare(request, schema is not None)
        if self.deadline is not None:
            self.deadline += time.monotonic() - setup_started
        base_messages, replaced = encodable_messages(request["messages"])
        if replaced:
            warnings.warn(f"{replaced} lone surrogate character(s) (not valid UTF-8) in the text sent to "
                          f"{model} were replaced by U+FFFD", BinevalEncodingWarning, stacklevel=3)
        usage = Usage()
        streaming = until is not None and self.may_stream()
        started = time.monotonic()
        deadline = started + policy.budget
        if self.deadline is not None:
            deadline = min(deadline, self.deadline)
        convo = base_messages
        cause = "no request made"
        attempt = 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining < policy.min_request:
                cause = (f"the deadline of {policy.budget:g} s was reached before the question was asked"
                         if usage.llm_calls == 0 else f"deadline of {policy.budget:g} s reached ({cause})")
                break
            form: Form = self.formats.form(model, self._remembered_form) if schema is not None else "json_schema"
            if form != "json_schema":
                usage.structured_output[model] = form
            usage.llm_calls += 1
            wait_for = min(policy.timeout, remaining)
            sent = with_breakpoints(convo, cache_prefix) if cache_prefix and needs_breakpoints(model) else convo
            outgoing = {**request, "messages": sent, "timeout": wait_for}
            if schema is not None:
                outgoing = self._with_form(outgoing, form, *schema)
            streamed: Streamed | None = None
            try:
                with cut_generations() as cut_short:
                    response = await self._call(outgoing, until if streaming else None)
                if isinstance(response, Streamed):
                    streamed, response = response, response.response
            except Exception as exc:  # any failure of the request: classified, never a crash
                usage.failed_requests += 1
                if streaming and (isinstance(exc, NoStream) or (refuses_stream(exc) and classify(exc) == "fatal")):
                    why = str(exc) if isinstance(exc, NoStream) else _describe(exc, self._secrets())
                    reason = redact(clip(why, 200), self._secrets())
                    if self.formats.streaming.learned(model, False, reason):
                        usage.not_streamed[model] = reason
                    if self.formats.streaming.streams(model) is False:
                        usage.seconds = time.monotonic() - started
                        raise NoStream(why, usage) from None
                    cause = f"malformed stream: {exc}"  # a model known to stream sent a stream without a reply
                    if attempt >= policy.retries:
                        break
                    attempt += 1
                    continue
                for prompt_tokens, completion_tokens in cut_short:  # the embedded model's work for a request cut
                    usage.prompt_tokens += prompt_tokens
                    usage.completion_tokens += completion_tokens
                if not is_embedded(model):  # a provider may bill a request that failed (e.g. cut at the timeout)
                    usage.unpriced_requests += 1
                kind = classify(exc)
                if kind == "too_large":
                    usage.seconds = time.monotonic() - started
                    raise InputTooLargeError(redact(
                        f"the prompt does not fit in the context window of {model}: "
                        f"{clip(redact(str(exc), self._secrets()), 400)}",
                        self._secrets()), usage) from None
                cause = _describe(exc, self._secrets(), self.settings.api_base)
                if wait_for < policy.timeout and isinstance(exc, asyncio.TimeoutError):
                    cause += " (cut at the deadline of the evaluation)"
                if kind == "format" and schema is not None:
                    new, changed = self.formats.downgrade(model, form)
                    if new is not None:
                        if changed and self._memory is not None:  # the next run starts from it (issue 33, item 17)
                            self._memory.set(form_key(model, self.settings.api_base), {"form": new})
                        usage.structured_output[model] = new
                        continue  # not a retry: the same question, in a form the provider takes
                    kind = "fatal"
                if kind != "transient" or attempt >= policy.retries:
                    break
                wait, why = policy.wait(attempt, retry_after(exc), deadline - time.monotonic())
                if wait is None:
                    cause = f"{cause}; {why}"
                    break
                await asyncio.sleep(wait)
                attempt += 1
                continue
            if streamed is not None:
                self.formats.streaming.learned(model, True)
            spent, impossible, response = reply_usage(response, model, sent, counter=self.formats.tokens,
                                            estimate=streamed is not None and not streamed.reported_usage)
            if impossible is not None and self.formats.first("impossible usage", model):
                warnings.warn(f"{model} reported impossible usage ({impossible}): that reply's tokens are estimated "
                              "and its cost is unknown (said once per model)", BinevalUsageWarning, stacklevel=3)
            usage = usage + spent
            if cache_prefix is not None:
                usage = usage + short_prefix(response, model, self.settings.api_base, base_messages, cache_prefix)
            content, finish = "", None
            try:
                parts = reply_parts(response)
                parts = ReplyParts(_cleaned(parts.content, model), parts.logprobs, parts.finish_reason)
                content, finish = parts.content, parts.finish_reason
                value = read(parts)
            except Exception as exc:  # a malformed response or an unusable reply: retried at once
                usage.failed_requests += 1
                if isinstance(exc, MalformedResponse):
                    cause = str(exc)
                else:
                    cut = " (cut at max_tokens)" if finish == "length" else ""
                    cause = f"unparseable reply{cut}: {exc}"
                if attempt >= policy.retries:
                    break
                attempt += 1
                if schema is not None:
                    convo = _correction_turn(base_messages, content, str(exc))
                continue
            usage.seconds = time.monotonic() - started
            return value, parts, usage
        usage.seconds = time.monotonic() - started
        raise CallError(redact(cause, self._secrets()), usage)

    @staticmethod
    def _with_form(request: dict[str, Any], form: Form, schema_name: str, schema: dict[str, Any]) -> dict[str, Any]:
        out = dict(request)
        fmt = format_for(form, schema_name, schema)
        if fmt is None:
            out.pop("response_format", None)
        else:
            out["response_format"] = fmt
        return out

    def _prepare(self, request: dict[str, Any], structured: bool) -> None:
        """What must be ready before the first request: the provider (litellm imported, the embedded model
        registered), the HTTP side (httpx and its event-loop backend imported), litellm and its code for the
        provider (loaded at its first request, a second or more on a cold process: :func:`~.providers.warm_up`)
        when litellm serves the request, the tokenizer that estimates a stream closed early, and the
        structured-output form of the model (``structured``)."""
        model = self.settings.model
        ensure_provider(model)
        if transport_for(model) is None:
            self.http.ready()
            if not openai_compat.goes_direct(request, self.settings.api_base):
                import_litellm()
                if self.formats.first("warm-up", model):
                    warm_up(model, self.settings.api_base)
            if self.may_stream():  # a stream closed after its answer has its tokens counted by the tokenizer
                self.formats.tokens.ready(model)
        if structured:
            self.formats.form(model, self._remembered_form)

    def _remembered_form(self, model: str) -> Form | None:
        """The form a refusal in an earlier run taught (kept in the reply cache), or None."""
        if self._memory is None:
            return None
        return remembered_form(self._memory.get(form_key(model, self.settings.api_base)))

    async def _call(self, request: dict[str, Any], until: Callable[[str], bool] | None = None) -> Any:
        """One request through the model's transport, else over HTTP (``request["timeout"]``: seconds to wait).
        ``until``: a streamed request, read by :func:`~.streaming.read_stream` (a :class:`Streamed`) within the
        same wait, its stream closed when read (so that the provider stops generating)."""
        request = dict(request)
        timeout = float(request.pop("timeout", None) or self.settings.timeout)
        transport = transport_for(request["model"])
        try:
            if transport is not None:
                return await asyncio.wait_for(transport.acompletion(request), timeout=timeout)
            return await asyncio.wait_for(self._over_http(request, timeout, until), timeout=timeout)
        except asyncio.TimeoutError:
            raise asyncio.TimeoutError(f"no reply within {timeout:g} s") from None

    async def _over_http(self, request: dict[str, Any], timeout: float, until: Callable[[str], bool] | None) -> Any:
        """The request over HTTP: the direct path of OpenAI-compatible servers (:mod:`.openai_compat`), else
        litellm (an ``openai/`` model with an API base gets a pooled SDK client that refuses cross-host
        redirects)."""
        model, base = request["model"], self.settings.api_base
        if base:
            request["api_base"] = base
            if not request.get("api_key") and self._needs_placeholder_key(model):
                request["api_key"] = "no-key"  # OpenAI-compatible local servers ignore the key, the client needs one
        key = request.get("api_key") or (os.environ.get("OPENAI_API_KEY") if model.startswith("openai/") else None)
        if base and key and key != "no-key":
            warn_plain_http_key(base)
        if base and openai_compat.goes_direct(request, base):
            async with self.http.http(base, key or "") as http:
                if until is not None:
                    return await openai_compat.stream(http, request, key, until)
                return await openai_compat.complete(http, request, key)
        litellm = import_litellm()
        async with contextlib.AsyncExitStack() as stack:
            if base and model.startswith("openai/"):
                request["client"] = await stack.enter_async_context(
                    self.http.sdk(base, key or "no-key", self.settings.timeout))
            if until is not None:
                return await self._litellm_stream(litellm, request, timeout, until)
            return await litellm.acompletion(**request, timeout=timeout, drop_params=True, num_retries=0,
                                             max_retries=0)

    @staticmethod
    async def _litellm_stream(litellm: Any, request: dict[str, Any], timeout: float,
                              accept: Callable[[str], bool]) -> Streamed:
        stream = await litellm.acompletion(**request, stream=True, stream_options={"include_usage": True},
                                           timeout=timeout, drop_params=True, num_retries=0, max_retries=0)
        try:
            if not hasattr(stream, "__aiter__"):  # a provider that answered the request whole
                raise NoStream("the provider answered a streamed request with a whole reply")
            result = await read_stream(stream, accept)
            result.response["provider"] = getattr(stream, "custom_llm_provider", None)
            if not result.reported_usage:  # litellm holds back what a provider reported early (Anthropic's
                # message_start: the prompt's tokens, cached ones included) until the end; it keeps the chunks
                held = [get(c, "usage") for c in getattr(stream, "chunks", None) or []]
                early = next((u for u in reversed(held) if get(u, "prompt_tokens")), None)
                if early is not None:
                    result.response["usage"] = early
            return result
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                with contextlib.suppress(Exception):
                    await close()

    @staticmethod
    def _needs_placeholder_key(model: str) -> bool:
        return model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY")
