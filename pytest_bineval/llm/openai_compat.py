"""The direct path of OpenAI-compatible chat completions: one ``POST {api_base}/chat/completions`` per request, over
the engine's pooled httpx client (:class:`~.http.HttpClients`), read as the OpenAI SDK reads it.

It serves ``openai/<name>`` models with an ``api_base`` (llama.cpp's server, vLLM, LM Studio, Ollama's ``/v1``, a
proxy) whose ``<name>`` litellm does not know, when every parameter of the request is one the wire protocol takes
(:data:`BODY_PARAMS`, plus ``api_key``, ``extra_headers`` and ``extra_body``): for such a request litellm only
passes the parameters on, at a cost in CPU several times that of the request itself (issue 32). A model litellm
knows (its price, its parameter rules: ``max_completion_tokens``, unsupported ``temperature``), any other
parameter, and every other provider keep litellm's path. A process whose requests all take this path never imports
litellm (seconds of CPU per process: :mod:`._litellm`).

What the client sees is what it saw through litellm: a chat completion (a dict) for a plain request, a
:class:`~.streaming.Streamed` reply for a streamed one (``stream_options.include_usage`` asked; the stream closed
as soon as ``until`` accepts the text, so that the server stops generating); an HTTP error status is an exception
named as the OpenAI SDK and litellm name it (:class:`RateLimitError`, :class:`InternalServerError`, ...), with
its ``status_code``, the server's message and its headers (``Retry-After``); a connection that fails is an
:class:`APIConnectionError` caused by the socket's error; a reply that is no JSON is a
:class:`~.parsing.MalformedResponse`. A server that answers a streamed request with a whole body raises
:class:`~.streaming.NoStream` (it does not stream); a stream without any text is a malformed reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ._litellm import litellm_knows
from .parsing import MalformedResponse, clip
from .streaming import NoStream, Streamed, read_stream, sse_data

__all__ = ["BODY_PARAMS", "APIConnectionError", "APIStatusError", "complete", "goes_direct", "status_error",
           "stream"]

# The chat-completion parameters sent as they are (OpenAI's, and ``min_tokens``, which vLLM and llama.cpp take).
BODY_PARAMS = frozenset({
    "messages", "temperature", "top_p", "n", "stop", "max_tokens", "max_completion_tokens", "presence_penalty",
    "frequency_penalty", "logit_bias", "logprobs", "top_logprobs", "seed", "user", "response_format", "min_tokens",
    "reasoning_effort", "service_tier", "tools", "tool_choice", "parallel_tool_calls",
})
_CLIENT_PARAMS = frozenset({"model", "api_base", "api_key", "extra_headers", "extra_body"})


def goes_direct(request: dict[str, Any], api_base: str | None) -> bool:
    """Whether ``request`` takes the direct path (see the module's docstring)."""
    model = str(request.get("model") or "")
    if not api_base or not model.startswith("openai/"):
        return False
    if any(k not in BODY_PARAMS and k not in _CLIENT_PARAMS for k in request):
        return False
    return not litellm_knows(model, model.split("/", 1)[1])


class APIStatusError(Exception):
    """The server answered with an HTTP error status (``status_code``; ``headers``: its headers, for
    ``Retry-After``). Subclasses are named after the status, as the OpenAI SDK and litellm name them."""

    def __init__(self, message: str, *, status_code: int, headers: Any = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.headers = headers


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class UnprocessableEntityError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


class BadGatewayError(APIStatusError):
    pass


class ServiceUnavailableError(APIStatusError):
    pass


class Timeout(APIStatusError):  # (litellm's name for 408 and 504)
    pass


_BY_STATUS: dict[int, type[APIStatusError]] = {
    400: BadRequestError, 401: AuthenticationError, 403: PermissionDeniedError, 404: NotFoundError, 408: Timeout,
    413: BadRequestError, 422: UnprocessableEntityError, 429: RateLimitError, 500: InternalServerError,
    502: BadGatewayError, 503: ServiceUnavailableError, 504: Timeout,
}


class APIConnectionError(Exception):
    """The request got no HTTP reply: the connection could not be made, or broke (its cause is the socket's)."""


def _detail(body: bytes) -> str:
    """What an error body says: its ``error.message`` (OpenAI's shape), ``error`` or ``detail`` (FastAPI's), else
    the text itself."""
    text = body.decode("utf-8", "replace").strip()
    try:
        value = json.loads(text)
    except ValueError:
        return text or "(no body)"
    if isinstance(value, dict):
        error = value.get("error")
        if isinstance(error, dict) and error.get("message") is not None:
            return str(error["message"])
        for found in (error, value.get("detail"), value.get("message")):
            if found is not None:
                return found if isinstance(found, str) else json.dumps(found, ensure_ascii=False)
    return text


def status_error(status: int, body: bytes, headers: Any) -> APIStatusError:
    """The exception of an HTTP error reply."""
    kind = _BY_STATUS.get(status) or (InternalServerError if status >= 500 else APIStatusError)
    return kind(f"HTTP {status}: {clip(_detail(body), 2000)}", status_code=status, headers=headers)


def _prepared(request: dict[str, Any], key: str | None, stream: bool) -> tuple[str, dict[str, Any], dict[str, str]]:
    """(URL, JSON body, headers) of ``request``."""
    body = {k: v for k, v in request.items() if k in BODY_PARAMS}
    body["model"] = str(request["model"]).split("/", 1)[1]
    body.update(request.get("extra_body") or {})
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    headers = {"Authorization": f"Bearer {key or 'no-key'}", **(request.get("extra_headers") or {})}
    return str(request["api_base"]).rstrip("/") + "/chat/completions", body, headers


def _connection_error(exc: BaseException) -> APIConnectionError:
    return APIConnectionError(f"Connection error: {type(exc).__name__}: {exc}")


async def complete(http: Any, request: dict[str, Any], key: str | None) -> dict[str, Any]:
    """The chat completion of ``request`` (a dict with ``api_base``), over ``http`` (an ``httpx.AsyncClient``)."""
    import httpx

    url, body, headers = _prepared(request, key, stream=False)
    try:
        response = await http.post(url, json=body, headers=headers)
    except httpx.TransportError as exc:
        raise _connection_error(exc) from exc
    if response.status_code >= 300:
        raise status_error(response.status_code, response.content, response.headers)
    try:
        value = json.loads(response.content)
    except ValueError as exc:
        raise MalformedResponse(f"malformed provider response (not JSON): {exc}") from None
    if not isinstance(value, dict):
        raise MalformedResponse(f"malformed provider response: a JSON {type(value).__name__}, not an object")
    value.setdefault("provider", "openai")
    return value


async def stream(http: Any, request: dict[str, Any], key: str | None, until: Callable[[str], bool]) -> Streamed:
    """``request`` streamed, read by :func:`~.streaming.read_stream` until ``until`` accepts the text so far; the
    stream is closed when read (early: the server stops generating)."""
    import httpx

    url, body, headers = _prepared(request, key, stream=True)
    try:
        response = await http.send(http.build_request("POST", url, json=body, headers=headers), stream=True)
    except httpx.TransportError as exc:
        raise _connection_error(exc) from exc
    try:
        if response.status_code >= 300:
            raise status_error(response.status_code, await response.aread(), response.headers)
        if "text/event-stream" not in response.headers.get("content-type", ""):
            raise NoStream("the server answered a streamed request with a whole reply")
        try:
            result = await read_stream(sse_data(response.aiter_bytes()), until)
        except NoStream:  # an event stream whose chunks carried no text: a malformed reply, not a server that
            # cannot stream
            raise MalformedResponse("malformed provider response: no choices with text in the stream") from None
        result.response["provider"] = "openai"
        return result
    except httpx.TransportError as exc:
        raise _connection_error(exc) from exc
    finally:
        await response.aclose()
