"""The batch seam of a run's engine (:class:`BatchSeam`, given to every client: :mod:`pytest_bineval.llm.seam`).

Every request a client is about to send comes here first, keyed by its logical request (the key of the reply
cache's own entry of it, under another kind: :func:`batch_key`):

- a reply a batch brought (fetched by this process: kept here; by another process or run: read from the reply
  cache) answers it: nothing is sent. It is counted once, at the batch price, by the process that fetched it, when
  it is first used in the final pass (:meth:`BatchSeam.take_uncounted` counts the rest at the end); a reply
  another process fetched is a cache hit here.
- in a first pass (:attr:`BatchSeam.collecting`) any other request is recorded for the next batch and fails
  with :data:`DEFERRED` (a judge error, or a checklist not written yet: the first pass judges nothing);
- a request of an in-process model (the embedded model, a scripted fake), which has no batch API, is sent at once
  in a first pass (a request that depends on it can then be collected) and its reply kept for the final pass,
  which counts it; in the final pass it is sent as usual;
- in the final pass, a request the batch failed (or let expire, or answered with a reply that cannot be read) is
  sent directly once more or is a judge error (``--bineval-batch-failures``), and a request no batch covered (an
  output that changed between the two passes, or a request after a failed one) is sent directly and counted as
  missed.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import CallError
from ..llm.cache import ResponseCache, cache_key
from ..llm.caching import Points, needs_breakpoints, with_breakpoints
from ..llm.client import encodable_messages
from ..llm.local import is_embedded
from ..llm.negotiation import format_for
from ..llm.parsing import ReplyParts, clean_reply, reply_parts
from ..llm.seam import Deferred
from ..llm.transports import transport_for
from ..models import Usage
from .options import BatchFailures

__all__ = ["DEFERRED", "BatchSeam", "FirstPassCache", "Group", "Recorded", "batch_key", "first_pass_of", "in_process"]

if TYPE_CHECKING:
    from ..engine import Engine

R = TypeVar("R")

DEFERRED = "recorded for the batch (the first pass of --bineval-batch sends nothing and judges nothing)"

# The parameters of an OpenAI chat-completion body that a batch line carries (litellm's own parameters, the API
# base and any credential stay out of the file; a parameter of the request not listed is dropped, as litellm's
# drop_params does for a provider that does not take it).
CHAT_PARAMS = frozenset({
    "model", "messages", "temperature", "top_p", "max_tokens", "max_completion_tokens", "response_format",
    "logprobs", "top_logprobs", "stop", "presence_penalty", "frequency_penalty", "seed", "n", "logit_bias", "user",
    "reasoning_effort", "service_tier",
})
JUDGE_SCHEMAS = frozenset({"verdict", "explanation"})  # the judge's replies; any other schema writes checklists


def in_process(model: str) -> bool:
    """Whether ``model`` runs in this process (the embedded model, a transport): it has no batch API."""
    return is_embedded(model) or transport_for(model) is not None


def batch_key(request_key: str) -> str:
    """The reply-cache key of the batch's reply to the request whose own key is ``request_key``."""
    return cache_key({"kind": "batch-reply", "request": request_key})


@dataclass(frozen=True)
class Group:
    """The requests one batch may hold: one model of one provider at one API base (``name``: the model as the
    provider knows it, the ``model`` of each line)."""

    provider: str
    model: str
    api_base: str | None
    name: str


@dataclass
class Recorded:
    """A request recorded in a first pass: its key, its batch, its body (an OpenAI chat-completion request), and
    whether it writes a checklist (its cost is the checklist's)."""

    key: str
    group: Group
    body: dict[str, Any]
    checklist: bool = False


@dataclass
class Stored:
    """A reply kept for the final pass: an OpenAI-shaped chat completion, and what it cost when this process made
    or fetched it (None: another process counts it)."""

    response: Any
    usage: Usage | None = None
    checklist: bool = False


def group_of(model: str, api_base: str | None) -> Group:
    """The :class:`Group` of ``model`` (litellm names its provider; imports litellm)."""
    from ..llm._litellm import import_litellm

    litellm = import_litellm()
    try:
        name, provider, _, _ = litellm.get_llm_provider(model=model, api_base=api_base)
    except Exception:
        provider, _, name = model.partition("/")
        if not name:
            provider, name = "openai", model
    return Group(provider=str(provider), model=model, api_base=api_base, name=str(name))


def batch_body(client: Any, request: dict[str, Any], schema: tuple[str, dict[str, Any]] | None,
               cache_prefix: Points | None, name: str) -> dict[str, Any]:
    """The body of ``request``'s batch line: as the client would send it (the structured-output form the
    negotiation has for the model, cache breakpoints where the provider needs them), without litellm's parameters,
    the API base or a credential, and with the model as the provider knows it."""
    model = client.settings.model
    messages, _ = encodable_messages(request["messages"])
    if cache_prefix and needs_breakpoints(model):
        messages = with_breakpoints(messages, cache_prefix)
    body = {k: v for k, v in request.items() if k in CHAT_PARAMS}
    body["model"] = name
    body["messages"] = messages
    if schema is not None:
        fmt = format_for(client.formats.form(model), *schema)
        if fmt is None:
            body.pop("response_format", None)
        else:
            body["response_format"] = fmt
    return body


def read_stored(response: Any, read: Callable[[ReplyParts], R]) -> tuple[R, ReplyParts]:
    """``read``'s value of a kept reply (ValueError, TypeError or KeyError when it cannot be used)."""
    parts = reply_parts(response)
    content, _ = clean_reply(parts.content)
    parts = ReplyParts(content, parts.logprobs, parts.finish_reason)
    return read(parts), parts


def as_response(parts: ReplyParts) -> dict[str, Any]:
    """A chat completion holding ``parts`` (an in-process model's reply, kept for the final pass)."""
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": parts.content},
                         "logprobs": parts.logprobs, "finish_reason": parts.finish_reason}]}


@dataclass
class SeamCounts:
    """What the final pass did with the requests (see :class:`~pytest_bineval.report.batch.BatchSummary`)."""

    retried: int = 0
    missed: int = 0
    in_process: int = 0
    unusable: int = 0
    errors: int = 0  # failed requests made judge errors (--bineval-batch-failures error)


@dataclass
class BatchSeam:
    """The seam of one engine (see the module): ``cache`` is the reply cache the batches' replies are written to
    and read from; ``failures``: ``direct`` or ``error`` (``--bineval-batch-failures``)."""

    cache: ResponseCache | None
    failures: BatchFailures = "direct"
    recorded: dict[str, Recorded] = field(default_factory=dict)  # in the current first pass
    replies: dict[str, Stored] = field(default_factory=dict)  # fetched or made by this process
    failed: dict[str, str] = field(default_factory=dict)  # requests a batch failed -> why
    counted: set[str] = field(default_factory=set)  # replies of this process counted in the final pass
    counts: SeamCounts = field(default_factory=SeamCounts)
    rewrite_pins: bool = False  # --bineval-update-checklists=all: a first pass writes every checklist anew
    deferrals: int = 0  # requests a first pass could not answer (recorded, or waiting for one recorded already)
    _collecting: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def collecting(self) -> bool:
        return self._collecting

    @collecting.setter
    def collecting(self, value: bool) -> None:
        self._collecting = value

    def take_recorded(self) -> list[Recorded]:
        """The requests the last first pass recorded (and forget them)."""
        with self._lock:
            out, self.recorded = list(self.recorded.values()), {}
        return out

    def keep(self, key: str, stored: Stored) -> None:
        """A reply fetched by this process, for the final pass."""
        with self._lock:
            self.replies[key] = stored

    def fail(self, key: str, why: str) -> None:
        with self._lock:
            self.failed.setdefault(key, why)

    def take_uncounted(self) -> tuple[Usage, Usage, int]:
        """What the replies this process made or fetched and did not use in the final pass cost (judging,
        checklists: each counted now, once), and how many they were."""
        judging, checklists, n = Usage(), Usage(), 0
        with self._lock:
            for key, stored in self.replies.items():
                if stored.usage is None or key in self.counted:
                    continue
                self.counted.add(key)
                n += 1
                if stored.checklist:
                    checklists = checklists + stored.usage
                else:
                    judging = judging + stored.usage
        return judging, checklists, n

    def reply_text(self, key: str) -> str | None:
        """The text of the reply kept for the request of ``key`` (None: none, or no text)."""
        stored = self._stored(key)
        if stored is None:
            return None
        try:
            return reply_parts(stored.response).content
        except ValueError:
            return None

    def has_reply(self, key: str) -> bool:
        """Whether a reply to the request of ``key`` is kept here or in the reply cache."""
        return self._stored(key) is not None

    def _stored(self, key: str) -> Stored | None:
        with self._lock:
            stored = self.replies.get(key)
        if stored is not None or self.cache is None:
            return stored
        entry = self.cache.get(key)
        if entry is None or "response" not in entry:
            return None
        return Stored(entry["response"])

    def _use(self, key: str, stored: Stored) -> Usage:
        """The usage of a reply used in the final pass: its cost the first time, when this process counts it;
        a cache hit otherwise (another process counts it, or it was counted already). Nothing in a first pass."""
        if self._collecting:
            return Usage()
        with self._lock:
            if stored.usage is not None and key not in self.counted:
                self.counted.add(key)
                return stored.usage.model_copy()
        return Usage(cache_hits=1, cost_usd=0.0)

    async def answer(self, client: Any, request: dict[str, Any], read: Callable[[ReplyParts], R], *,
                     schema: tuple[str, dict[str, Any]] | None,
                     cache_prefix: Points | None) -> tuple[R, ReplyParts, Usage] | None:
        model: str = client.settings.model
        key = batch_key(client.key_of(request))
        stored = self._stored(key)
        if stored is not None:
            try:
                value, parts = read_stored(stored.response, read)
            except (ValueError, TypeError, KeyError) as exc:
                self.fail(key, f"the batch's reply could not be used: {exc}")
                with self._lock:
                    self.counts.unusable += 1
            else:
                return value, parts, self._use(key, stored)
        if in_process(model):
            if not self._collecting:
                with self._lock:
                    self.counts.in_process += 1
                return None
            value, parts, usage = await client.uncached(batch=False).send(request, read, schema=schema,
                                                                           cache_prefix=cache_prefix)
            self.keep(key, Stored(as_response(parts), usage, checklist=_writes_checklist(schema)))
            return value, parts, Usage()
        with self._lock:
            why = self.failed.get(key)
        if self._collecting:
            if why is None:
                self._record(client, key, request, schema, cache_prefix)
            with self._lock:
                self.deferrals += 1
            raise Deferred(DEFERRED, Usage())
        if why is not None:
            if self.failures == "error":
                with self._lock:
                    self.counts.errors += 1
                raise CallError(f"{why} (--bineval-batch-failures error: not asked again)", Usage())
            with self._lock:
                self.counts.retried += 1
            return None
        with self._lock:
            self.counts.missed += 1
        return None

    def _record(self, client: Any, key: str, request: dict[str, Any], schema: tuple[str, dict[str, Any]] | None,
                cache_prefix: Points | None) -> None:
        with self._lock:
            if key in self.recorded:
                return
        settings = client.settings
        group = group_of(settings.model, settings.api_base)
        body = batch_body(client, request, schema, cache_prefix, group.name)
        with self._lock:
            self.recorded.setdefault(key, Recorded(key, group, body, checklist=_writes_checklist(schema)))


def _writes_checklist(schema: tuple[str, dict[str, Any]] | None) -> bool:
    return schema is not None and schema[0] not in JUDGE_SCHEMAS


class FirstPassCache(ResponseCache):
    """The reply cache as a first pass sees it: read, never written (the final pass writes what it derives, and
    uses, and so counts, the batch's replies itself)."""

    def __init__(self, inner: ResponseCache) -> None:  # no store of its own: every read goes to ``inner``
        self.inner = inner
        self.mode = inner.mode
        self.ttl = inner.ttl
        self._init_signing(inner.signing)  # what it reads, ``inner`` checks

    @property
    def writes(self) -> bool:
        return False

    def get(self, key: str) -> dict[str, Any] | None:
        return self.inner.get(key)

    def set(self, key: str, value: dict[str, Any]) -> None:
        return None

    def close(self) -> None:
        return None


@contextlib.contextmanager
def first_pass_of(engine: Engine) -> Iterator[None]:
    """``engine`` during a first pass: its cache read but not written, and a ledger of its own that is dropped
    afterwards (nothing a first pass finds or spends is the run's: its cache hits are not, and the requests it made
    to in-process models are counted when the final pass uses their replies)."""
    from ..report.ledger import RunLedger

    cache, ledger = engine.cache, engine.ledger
    if cache is not None:
        engine.cache = FirstPassCache(cache)
    engine.ledger = RunLedger()
    try:
        yield
    finally:
        engine.cache, engine.ledger = cache, ledger
