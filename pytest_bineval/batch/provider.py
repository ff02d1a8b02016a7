"""A provider's batch API through litellm's file and batch calls (``acreate_file``, ``acreate_batch``,
``aretrieve_batch``, ``afile_content``, ``acancel_batch``, ``alist_batches``), and reading what a batch returns.

The providers whose batches take OpenAI chat-completion lines through litellm: ``openai`` (OpenAI, and any
OpenAI-compatible server that implements the Files and Batches API, at ``--bineval-api-base``), ``azure`` and
``litellm_proxy``. The API base and the key are those of the judge's requests (the key from the environment,
``OPENAI_API_KEY``, or a placeholder for a local server without one); nothing secret is written anywhere.
Anthropic's message batches are not among them: litellm can read an Anthropic batch but not create one.

Prices: a reply of a batch costs litellm's ``input_cost_per_token_batches`` / ``output_cost_per_token_batches``
(and ``cache_read_input_token_cost_batches`` for prompt tokens read from the provider's cache) of its model;
a model without batch prices in litellm is unpriced (never guessed from the normal price). A line the batch
failed is not billed by the provider: it counts as a failed request, at no cost.
"""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UsageError
from ..llm._litellm import import_litellm
from ..llm.accounting import cache_tokens
from ..llm.client import connection_failure
from ..llm.parsing import clip, get
from ..llm.retry import status_of
from ..llm.streaming import estimate_tokens
from ..models import Usage
from ..redaction import redact

__all__ = ["BATCHABLE", "BatchAPI", "BatchStatus", "BatchUnavailable", "Endpoint", "Results", "batch_prices",
           "estimate", "read_results", "reply_usage", "unsupported"]

BATCHABLE = ("openai", "azure", "litellm_proxy")
ENDPOINT = "/v1/chat/completions"
MAX_LINES = 50_000  # OpenAI's limit of requests per batch
MAX_BYTES = 190 * 1024 * 1024  # under OpenAI's 200 MB per input file
FINISHED = ("completed", "failed", "expired", "cancelled")


class BatchUnavailable(UsageError):
    """The provider (or the server at the API base) has no batch API this package can use."""


def unsupported(provider: str) -> str | None:
    """Why ``provider``'s requests cannot be batched, or None when they can."""
    if provider in BATCHABLE:
        return None
    if provider == "anthropic":
        return ("litellm cannot create Anthropic message batches (it can only read them), so anthropic/... models "
                "cannot be batched yet")
    return (f"litellm has no batch API for provider {provider!r} that takes OpenAI chat requests (batched: "
            f"{', '.join(BATCHABLE)}, and any OpenAI-compatible server with the Batches API as openai/... with "
            "--bineval-api-base)")


@dataclass(frozen=True)
class Endpoint:
    """Where batches of one provider go: its litellm name and API base (None: the provider's own)."""

    provider: str
    api_base: str | None = None

    def label(self) -> str:
        return f"{self.provider} at {self.api_base}" if self.api_base else self.provider


@dataclass
class BatchStatus:
    """A batch as the provider last described it."""

    status: str
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: list[str] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED


def _credentials(endpoint: Endpoint, extra: dict[str, Any]) -> dict[str, Any]:
    """The key (and, for Azure, the API version) of the judge's requests: ``api_key`` / ``api_version`` given in
    the settings' extra parameters, else the provider's environment variable, which litellm reads (an
    OpenAI-compatible server at an API base without ``OPENAI_API_KEY`` gets a placeholder, as the requests do)."""
    out = {k: extra[k] for k in ("api_key", "api_version", "organization") if extra.get(k)}
    if ("api_key" not in out and endpoint.provider in ("openai", "litellm_proxy")
            and endpoint.api_base and not os.environ.get("OPENAI_API_KEY")):
        out["api_key"] = "no-key"
    return out


def _litellm() -> Any:
    """litellm, with the deprecation warnings of its own batch cost logging (pydantic attributes read in its
    threads, after the call returned) silenced: they are litellm's, not the user's."""
    litellm = import_litellm()
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"litellm(\.|$)")
    return litellm


def describe(exc: BaseException, endpoint: Endpoint, secrets: Sequence[str] = ()) -> str:
    """A failed batch call in one line: who answered what (no traceback, no secret)."""
    refused = connection_failure(exc, endpoint.api_base)
    if refused is not None:
        return redact(refused, secrets)
    status = status_of(exc)
    text = str(exc).split("\nTraceback (most recent call last)", 1)[0].strip()
    head = f"HTTP {status}: " if status is not None else f"{type(exc).__name__}: "
    return redact(head + clip(redact(text, secrets), 300), secrets)


class BatchAPI:
    """The batch calls of one :class:`Endpoint` (``extra``: the settings' extra parameters, for credentials).
    litellm's synchronous calls, each in a thread: its asynchronous ones leave SDK clients bound to an event loop
    that a later one finds closed."""

    def __init__(self, endpoint: Endpoint, extra: dict[str, Any] | None = None, *, timeout: float = 120.0) -> None:
        self.endpoint = endpoint
        self._credentials = _credentials(endpoint, extra or {})
        self.timeout = timeout

    @property
    def secrets(self) -> list[str]:
        return [v for k, v in self._credentials.items() if k == "api_key" and isinstance(v, str)]

    def _kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"custom_llm_provider": self.endpoint.provider, "timeout": self.timeout,
                              "max_retries": 2, **self._credentials}
        if self.endpoint.api_base:
            kw["api_base"] = self.endpoint.api_base
        return kw

    async def probe(self) -> None:
        """Check that the endpoint takes batches (one ``GET /batches``); :class:`BatchUnavailable` saying why
        not (a server without the Batches API, a refused key, nothing listening)."""
        why = unsupported(self.endpoint.provider)
        if why is not None:
            raise BatchUnavailable(f"--bineval-batch: {why}")
        litellm = _litellm()
        try:
            await asyncio.to_thread(litellm.list_batches, limit=1, **self._kwargs())
        except Exception as exc:
            status = status_of(exc)
            what = describe(exc, self.endpoint, self.secrets)
            if status in (404, 405, 501):
                hint = ("it has no Batches API (GET /batches is not there): run without --bineval-batch, or give an "
                        "API base whose server has the Files and Batches API")
            elif status in (401, 403):
                hint = "the key was refused (the batch API takes the judge's key: OPENAI_API_KEY for openai/...)"
            else:
                hint = "nothing was judged; check the API base and the key"
            raise BatchUnavailable(f"--bineval-batch: the batch API of {self.endpoint.label()} cannot be used "
                                   f"({what}): {hint}") from None

    async def submit(self, lines: list[dict[str, Any]], metadata: dict[str, str]) -> tuple[str, str]:
        """Upload ``lines`` (JSONL) and create a batch of them: (batch id, input file id)."""
        litellm = _litellm()
        data = "\n".join(json.dumps(line, ensure_ascii=False) for line in lines).encode("utf-8", "surrogatepass")
        uploaded = await asyncio.to_thread(litellm.create_file, file=("bineval-batch.jsonl", data), purpose="batch",
                                           **self._kwargs())
        created = await asyncio.to_thread(litellm.create_batch, completion_window="24h", endpoint=ENDPOINT,
                                          input_file_id=uploaded.id, metadata=metadata, **self._kwargs())
        return str(created.id), str(uploaded.id)

    async def retrieve(self, batch_id: str) -> BatchStatus:
        litellm = _litellm()
        # without litellm's own cost logging of a finished batch (it downloads the output file at every poll)
        batch = await asyncio.to_thread(litellm.retrieve_batch, batch_id=batch_id, **self._kwargs(),
                                        litellm_metadata={"batch_ignore_default_logging": True})
        counts = get(batch, "request_counts")
        errors = get(get(batch, "errors"), "data") or []
        return BatchStatus(
            status=str(get(batch, "status") or "unknown"), total=int(get(counts, "total") or 0),
            completed=int(get(counts, "completed") or 0), failed=int(get(counts, "failed") or 0),
            output_file_id=get(batch, "output_file_id"), error_file_id=get(batch, "error_file_id"),
            errors=[str(get(e, "message") or get(e, "code") or e) for e in errors])

    async def content(self, file_id: str) -> bytes:
        litellm = _litellm()
        reply = await asyncio.to_thread(litellm.file_content, file_id=file_id, **self._kwargs())
        data = getattr(reply, "content", reply)
        return data if isinstance(data, bytes) else str(data).encode("utf-8")

    async def cancel(self, batch_id: str) -> str:
        litellm = _litellm()
        batch = await asyncio.to_thread(litellm.cancel_batch, batch_id=batch_id, **self._kwargs())
        return str(get(batch, "status") or "unknown")


def batch_line(key: str, body: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": key, "method": "POST", "url": ENDPOINT, "body": body}


def chunks(lines: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``lines`` cut into batches within the provider's limits (requests per batch, bytes per file)."""
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for line in lines:
        n = len(json.dumps(line, ensure_ascii=False).encode("utf-8", "surrogatepass")) + 1
        if current and (len(current) >= MAX_LINES or size + n > MAX_BYTES):
            out.append(current)
            current, size = [], 0
        current.append(line)
        size += n
    if current:
        out.append(current)
    return out


# -- what a batch returns ------------------------------------------------------------------------------------------
@dataclass
class Results:
    """What a finished batch answered: ``replies`` (key -> chat completion), ``failures`` (key -> why), and how
    many lines could not be read at all (``malformed``)."""

    replies: dict[str, dict[str, Any]] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    malformed: int = 0


def _slim(body: dict[str, Any]) -> dict[str, Any]:
    """A reply without the byte arrays of its logprobs (what is kept in the cache)."""
    choices = body.get("choices")
    if not isinstance(choices, list):
        return body
    out = []
    for choice in choices:
        logprobs = choice.get("logprobs") if isinstance(choice, dict) else None
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        if isinstance(content, list):
            entries = []
            for entry in content:
                if isinstance(entry, dict):
                    entry = {k: v for k, v in entry.items() if k != "bytes"}
                    tops = entry.get("top_logprobs")
                    if isinstance(tops, list):
                        entry["top_logprobs"] = [{k: v for k, v in t.items() if k != "bytes"} if isinstance(t, dict)
                                                 else t for t in tops]
                entries.append(entry)
            choice = {**choice, "logprobs": {**(logprobs or {}), "content": entries}}
        out.append(choice)
    return {**body, "choices": out}


def _error_text(line: dict[str, Any]) -> str:
    error = line.get("error")
    if isinstance(error, dict):
        code, message = error.get("code"), error.get("message")
        return clip(f"{code}: {message}" if code and message else str(message or code or error), 300)
    response = line.get("response")
    status = get(response, "status_code")
    message = get(get(get(response, "body"), "error"), "message")
    return clip(f"HTTP {status}: {message}" if message else f"HTTP {status}", 300)


def _lines(data: bytes | None) -> list[Any]:
    out: list[Any] = []
    for raw in (data or b"").decode("utf-8", "replace").splitlines():
        if not raw.strip():
            continue
        try:
            out.append(json.loads(raw))
        except ValueError:
            out.append(None)
    return out


def read_results(output: bytes | None, errors: bytes | None, keys: Sequence[str], status: BatchStatus) -> Results:
    """The replies and failures of a finished batch covering ``keys``: a line of the output file with status 200
    and a chat completion is a reply; any other line (of either file) is a failure with its reason; a line that is
    not JSON, or names no request of the batch, is malformed; a request with no line is a failure saying why (the
    batch expired, failed, was cancelled, or its line was malformed)."""
    wanted = set(keys)
    results = Results()
    for line in [*_lines(output), *_lines(errors)]:
        key = line.get("custom_id") if isinstance(line, dict) else None
        if not isinstance(key, str) or key not in wanted:
            results.malformed += 1
            continue
        if key in results.replies or key in results.failures:
            continue  # a second line for one request: the first counts
        response = line.get("response")
        body = get(response, "body")
        if line.get("error") is None and get(response, "status_code") == 200 and isinstance(body, dict):
            if isinstance(body.get("choices"), list) and body["choices"]:
                results.replies[key] = _slim(body)
            else:
                results.failures[key] = "the batch's reply to it has no choices"
            continue
        results.failures[key] = _error_text(line)
    missing = [k for k in keys if k not in results.replies and k not in results.failures]
    if missing:
        if status.status == "expired":
            why = "the batch expired (its 24-hour window ended) before this request was run"
        elif status.status == "failed":
            why = "the batch failed as a whole" + (f": {clip('; '.join(status.errors), 300)}" if status.errors else "")
        elif status.status == "cancelled":
            why = "the batch was cancelled before this request was run"
        else:
            why = "the batch's output has no usable line for this request (a malformed line, or none)"
        for key in missing:
            results.failures[key] = why
    return results


def batch_prices(model: str) -> tuple[float, float, float | None] | None:
    """(input, output, cache-read) price per token of ``model``'s batches, as litellm lists them; None when litellm
    has no batch price for it (the cache-read price is None when only that one is missing)."""
    litellm = import_litellm()
    known = litellm.model_cost
    name = model.split("/", 1)[1] if "/" in model else model
    for candidate in (model, name):
        prices = known.get(candidate)
        if not isinstance(prices, dict):
            continue
        inp, out = prices.get("input_cost_per_token_batches"), prices.get("output_cost_per_token_batches")
        if inp is None or out is None:
            return None
        cached = prices.get("cache_read_input_token_cost_batches")
        return float(inp), float(out), None if cached is None else float(cached)
    return None


def reply_usage(body: dict[str, Any], model: str) -> Usage:
    """What one reply of a batch cost: its tokens, at ``model``'s batch price (unpriced without one)."""
    u = body.get("usage")
    prompt = int(get(u, "prompt_tokens") or 0)
    completion = int(get(u, "completion_tokens") or 0)
    read, written = cache_tokens(u)
    prices = batch_prices(model)
    cost: float | None = None
    if prices is not None and not written and (not read or prices[2] is not None):
        cost = (prompt - read) * prices[0] + read * (prices[2] or 0.0) + completion * prices[1]
    return Usage(llm_calls=1, batch_requests=1, prompt_tokens=prompt, completion_tokens=completion,
                 cached_prompt_tokens=read, cost_usd=cost, unpriced_requests=int(cost is None))


def estimate(body: dict[str, Any], model: str) -> tuple[int, float | None]:
    """At most how many tokens (the prompt's, estimated, and ``max_tokens``) and dollars (None: no batch price)
    one line may cost: what ``--bineval-budget`` holds a batch to before it is submitted."""
    text = json.dumps(body.get("messages") or [], ensure_ascii=False)
    try:
        prompt = int(import_litellm().token_counter(model=model, messages=body.get("messages") or []))
    except Exception:
        prompt = estimate_tokens(text)
    completion = int(body.get("max_tokens") or body.get("max_completion_tokens") or 0)
    prices = batch_prices(model)
    cost = None if prices is None else prompt * prices[0] + completion * prices[1]
    return prompt + completion, cost
