"""A scripted OpenAI-compatible server on 127.0.0.1 (stdlib ``http.server``) that misbehaves on purpose.

It serves ``POST /v1/chat/completions`` (or the paths it is given: ``/v1/messages`` for a fake Anthropic Messages
API, see :func:`anthropic_message`), and ``GET /v1/models``, and answers each request as its
``respond`` function says: a JSON body with any status and headers, raw bytes, a hang, a reset
connection, or a :class:`Stream` of server-sent events.

A request that asks for a stream (``"stream": true``) and gets a 200 reply whose body is a chat completion (or an
Anthropic message) is sent that reply as a stream, as a real server would: one event per token (the logprobs'
tokens when it has logprobs, else the text cut at word and punctuation boundaries), the finish reason, and the
usage when ``stream_options.include_usage`` asks for it (Anthropic: its ``message_start`` ... ``message_stop``
events). ``streams=False`` makes a server that cannot stream: it answers a streamed request whole. With
``chunk_delay`` the events are sent that many seconds apart, so that a client that closes a stream early is seen
(:attr:`FaultServer.streams_cut`).

It records every request it receives, so a test can compare the number of requests the server saw with the
number the plugin counted, and counts the connections it accepted (:attr:`FaultServer.connections`) and those still
open (:attr:`FaultServer.open_connections`: a client that closes its pool at its end leaves none). The fault
matrix (:mod:`pytest_bineval.bench.reliability`) and the tests use it; nothing in it reaches a network beyond the
loopback interface.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Reply:
    """An HTTP reply: ``body`` is sent as JSON unless it is ``bytes``/``str``."""

    status: int = 200
    body: Any = None
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Hang:
    """Send nothing for ``seconds`` (then close the connection)."""

    seconds: float


@dataclass(frozen=True)
class Reset:
    """Close the connection at once with a TCP reset, sending nothing."""


@dataclass(frozen=True)
class Stream:
    """Server-sent events as given: a dict is sent as ``data: <json>``, a str as the line ``data: <str>``; then
    ``data: [DONE]`` unless ``done`` is False. ``delay``: seconds between events."""

    events: tuple[Any, ...]
    done: bool = True
    delay: float = 0.0


Action = Reply | Hang | Reset | Stream

_PIECES = re.compile(r"\s*[A-Za-z0-9]+|\s*[^A-Za-z0-9\s]|\s+")


def pieces(text: str) -> list[str]:
    """``text`` cut as a tokenizer might: words and single punctuation marks, each with the spaces before it."""
    return _PIECES.findall(text)


def chunk_events(body: dict[str, Any], *, include_usage: bool) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events of a chat-completion ``body``, as an OpenAI server streams it."""
    head = {"id": body.get("id", "chatcmpl-fault"), "object": "chat.completion.chunk", "created": 0,
            "model": body.get("model", "fault")}
    choices = body.get("choices") or []
    if not choices:
        events = [{**head, "choices": []}]
    else:
        choice = choices[0]
        message = choice.get("message") or {}
        content = message.get("content")
        logprobs = (choice.get("logprobs") or {}).get("content") if isinstance(choice.get("logprobs"), dict) else None
        events = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "logprobs": None, "finish_reason": None}]}]
        if isinstance(logprobs, list) and logprobs:
            parts = [(str(e.get("token", "")), e) for e in logprobs]
        else:
            parts = [(p, None) for p in pieces(content if isinstance(content, str) else "")]
        for text, entry in parts:
            events.append({**head, "choices": [{"index": 0, "delta": {"content": text},
                                                "logprobs": {"content": [entry]} if entry else None,
                                                "finish_reason": None}]})
        events.append({**head, "choices": [{"index": 0, "delta": {}, "logprobs": None,
                                            "finish_reason": choice.get("finish_reason", "stop")}]})
    if include_usage and body.get("usage") is not None:
        events.append({**head, "choices": [], "usage": body["usage"]})
    return events


def anthropic_events(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The ``(event, data)`` pairs of an Anthropic Messages reply ``body``, as Anthropic streams it."""
    usage = dict(body.get("usage") or {})
    text = "".join(str(block.get("text", "")) for block in body.get("content") or [] if block.get("type") == "text")
    start = {**body, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
    ]
    for piece in pieces(text):
        events.append(("content_block_delta", {"type": "content_block_delta", "index": 0,
                                               "delta": {"type": "text_delta", "text": piece}}))
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": body.get("stop_reason", "end_turn"),
                                                              "stop_sequence": None},
                           "usage": {"output_tokens": usage.get("output_tokens", 0)}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return events


@dataclass(frozen=True)
class Received:
    """One request the server saw."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Responder = Callable[[Received, int], Action]  # (request, 0-based index of the request) -> action


def completion(content: str | None, *, finish_reason: str = "stop", model: str = "fault",
               logprobs: Any = None) -> dict[str, Any]:
    """An OpenAI chat-completion body with one choice."""
    return {
        "id": "chatcmpl-fault", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": finish_reason, "logprobs": logprobs}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def anthropic_message(text: str, *, model: str = "claude-fault", input_tokens: int = 10, output_tokens: int = 5,
                      cache_read: int = 0, cache_write: int = 0) -> dict[str, Any]:
    """An Anthropic Messages API reply body (``POST /v1/messages``) with one text block; ``input_tokens`` are the
    uncached ones, ``cache_read`` / ``cache_write`` the prompt tokens read from / written to its prompt cache."""
    return {
        "id": "msg_fault", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                  "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write},
    }


def error_body(message: str, kind: str = "server_error", code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


class FaultServer:
    """``with FaultServer(respond) as server:`` ... ``server.base_url`` (``http://127.0.0.1:<port>/v1``).
    ``paths``: the POST paths answered by ``respond`` (any other is a 404); ``/v1/messages`` makes it a fake
    Anthropic endpoint (litellm's ``anthropic/`` provider with ``api_base=server.root_url``)."""

    def __init__(self, respond: Responder, *, paths: tuple[str, ...] = ("/chat/completions",),
                 streams: bool = True, chunk_delay: float = 0.0) -> None:
        self.respond = respond
        self.paths = paths
        self.streams = streams
        self.chunk_delay = chunk_delay
        self.received: list[Received] = []
        self.streamed = 0  # requests answered with a stream
        self.connections = 0  # TCP connections accepted (a client that keeps its connections alive makes few)
        self.open_connections = 0  # of them, not yet closed (by the client, or by the server at its end)
        self.streams_cut = 0  # of them, streams the client closed before their end
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("the fault server is not running")
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:<port>`` (an Anthropic ``api_base``: litellm adds ``/v1/messages``)."""
        return self.base_url.removesuffix("/v1")

    def answers(self, path: str) -> bool:
        return path.split("?", 1)[0].rstrip("/").endswith(self.paths)

    @property
    def requests(self) -> int:
        """Requests received so far on the paths it answers (chat completions, by default)."""
        with self._lock:
            return sum(self.answers(r.path) for r in self.received)

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        """The request handler of this server (a subclass may extend it: :mod:`.batch_server`)."""
        return _handler(self)

    def start(self) -> FaultServer:
        server = _Server(("127.0.0.1", 0), self.handler_class())
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="bineval-fault-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()  # ends hangs early
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FaultServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, received: Received) -> int:
        with self._lock:
            self.received.append(received)
            return sum(self.answers(r.path) for r in self.received) - 1


class _Server(ThreadingHTTPServer):
    # a backlog for many clients connecting at once (socketserver's default of 5 refuses connections when a suite's
    # workers open tens at a time: failed requests the server never saw)
    request_queue_size = 256


def _handler(server: FaultServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            return

        def setup(self) -> None:
            super().setup()
            with server._lock:
                server.connections += 1
                server.open_connections += 1

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                with server._lock:
                    server.open_connections -= 1

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(Reply(200, {"object": "list", "data": [{"id": "fault", "object": "model"}]}))
            else:
                self._send(Reply(404, error_body("not found", "not_found_error")))

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparseable": raw.decode("utf-8", "replace")}
            received = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            index = server._record(received)
            if not server.answers(self.path):
                self._send(Reply(404, error_body(f"no route {self.path}", "not_found_error")))
                return
            action = server.respond(received, index)
            if isinstance(action, Reply) and body.get("stream") is True and server.streams:
                action = _as_stream(action, body, server.chunk_delay)
            if isinstance(action, Stream):
                self._stream(action)
                return
            if isinstance(action, Hang):
                server._stop.wait(action.seconds)
                self.close_connection = True
                return
            if isinstance(action, Reset):
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            self._send(action)

        def _stream(self, stream: Stream) -> None:
            with server._lock:
                server.streamed += 1
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("cache-control", "no-cache")
            self.close_connection = True  # the end of the body is the end of the connection (no length)
            self.end_headers()
            events: list[bytes] = []
            for event in stream.events:
                if isinstance(event, tuple):  # (name, data): a named event (Anthropic's)
                    events.append(f"event: {event[0]}\ndata: {json.dumps(event[1])}\n\n".encode())
                elif isinstance(event, dict):
                    events.append(f"data: {json.dumps(event)}\n\n".encode())
                else:
                    events.append(f"data: {event}\n\n".encode())
            if stream.done:
                events.append(b"data: [DONE]\n\n")
            try:
                for i, data in enumerate(events):
                    if i and stream.delay:
                        server._stop.wait(stream.delay)
                    self.wfile.write(data)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                with server._lock:
                    server.streams_cut += 1

        def _send(self, reply: Reply) -> None:
            if isinstance(reply.body, bytes):
                data, kind = reply.body, "application/json"
            elif isinstance(reply.body, str):
                data, kind = reply.body.encode("utf-8"), "application/json"
            else:
                data, kind = json.dumps(reply.body).encode("utf-8"), "application/json"
            self.send_response(reply.status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            for name, value in reply.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

    return Handler


def _as_stream(reply: Reply, body: dict[str, Any], delay: float) -> Action:
    """A 200 reply with a chat completion (or an Anthropic message) body, streamed; any other reply as it is."""
    if reply.status != 200 or not isinstance(reply.body, dict):
        return reply
    if reply.body.get("type") == "message":
        return Stream(tuple(anthropic_events(reply.body)), done=False, delay=delay)
    if "choices" not in reply.body:
        return reply
    include = bool((body.get("stream_options") or {}).get("include_usage"))
    return Stream(tuple(chunk_events(reply.body, include_usage=include)), delay=delay)


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    """Poll ``predicate`` until it is true or ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


__all__ = ["Action", "FaultServer", "Hang", "Received", "Reply", "Reset", "Responder", "Stream", "anthropic_events",
           "anthropic_message", "chunk_events", "completion", "error_body", "pieces", "wait_until"]
