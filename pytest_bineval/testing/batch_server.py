"""A scripted OpenAI-compatible server with the Files and Batches API, on 127.0.0.1: a :class:`FaultServer` (its
chat completions, streamed or not, answered by the same ``respond`` function) that also takes

- ``POST /v1/files`` (a multipart upload of the batch's JSONL, ``purpose=batch``), ``GET /v1/files/{id}`` and
  ``GET /v1/files/{id}/content``;
- ``POST /v1/batches``, ``GET /v1/batches/{id}``, ``GET /v1/batches`` (a list) and ``POST /v1/batches/{id}/cancel``.

A batch runs its lines through ``respond`` (one :class:`~pytest_bineval.testing.faults.Received` per line, its
``path`` the line's ``url``): a 200 reply is a line of the output file, any other reply a line of the error file,
as OpenAI writes them. How a batch goes is scripted by :class:`BatchScript`: it completes after a number of status
requests, stays in progress until :meth:`BatchServer.release`, expires with only its first lines run, fails as a
whole, or has output lines mangled (malformed JSON). ``batches=False`` makes a server without the Batches API (its
file and batch routes answer 404, as a chat-only server does).

Counters for the tests: :attr:`BatchServer.uploads`, :attr:`BatchServer.created` (batches submitted),
:attr:`BatchServer.lines` (batch lines run) and, from :class:`FaultServer`, ``requests`` (direct chat requests).
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any

from .faults import FaultServer, Received, Reply, Responder, _handler, error_body

if TYPE_CHECKING:
    from .scripted import ScriptedModel

__all__ = ["BatchScript", "BatchServer", "scripted_responder"]


@dataclass
class BatchScript:
    """How the server runs the batches it is given.

    ``polls``: status requests a batch answers ``in_progress`` before it is finished (0: finished at the first);
    ``hold``: stay ``in_progress`` until :meth:`BatchServer.release`; ``expire``: end ``expired`` with only the first
    ``run`` lines run (the others in the error file, ``batch_expired``); ``fail``: the whole batch ``failed`` with
    this message (no line run); ``mangle``: rewrite the text of output line ``i`` (0-based), e.g. to malformed
    JSON."""

    polls: int = 1
    hold: bool = False
    expire: bool = False
    run: int = 0
    fail: str | None = None
    mangle: Callable[[str, int], str] | None = None


@dataclass
class _Batch:
    id: str
    input_file_id: str
    lines: list[dict[str, Any]]
    created_at: int
    metadata: dict[str, Any] | None
    polls: int = 0
    status: str = "validating"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    cancel: bool = False


class BatchServer(FaultServer):
    """``with BatchServer(respond) as server:`` ... (see the module); ``script`` may be changed between runs."""

    def __init__(self, respond: Responder, *, batches: bool = True, script: BatchScript | None = None,
                 **kwargs: Any) -> None:
        super().__init__(respond, **kwargs)
        self.batches_api = batches
        self.script = script or BatchScript()
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, _Batch] = {}
        self.uploads = 0
        self.created = 0
        self.lines = 0  # batch lines run through respond
        self.cancelled = 0
        self.api_calls: list[tuple[str, str]] = []  # (method, path) of every Files/Batches API request
        self._ids = itertools.count(1)
        self._released = threading.Event()

    def release(self) -> None:
        """Let held batches finish (at their next status request)."""
        self._released.set()

    def handler_class(self) -> type[BaseHTTPRequestHandler]:
        return _batch_handler(self)

    def __enter__(self) -> BatchServer:
        self.start()
        return self

    # -- the API -------------------------------------------------------------------------------------------------
    def _new_id(self, kind: str) -> str:
        return f"{kind}-{next(self._ids)}"

    def upload(self, filename: str, purpose: str, data: bytes) -> dict[str, Any]:
        with self._lock:
            file_id = self._new_id("file")
            self.files[file_id] = data
            self.uploads += 1
        return _file_object(file_id, filename, purpose, len(data))

    def create(self, body: dict[str, Any]) -> Reply:
        file_id = str(body.get("input_file_id") or "")
        with self._lock:
            data = self.files.get(file_id)
        if data is None:
            return Reply(404, error_body(f"no file {file_id}", "invalid_request_error"))
        lines = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
        with self._lock:
            batch = _Batch(self._new_id("batch"), file_id, lines, int(time.time()), body.get("metadata"))
            self.batches[batch.id] = batch
            self.created += 1
        return Reply(200, self._batch_object(batch))

    def retrieve(self, batch_id: str, *, advance: bool = True) -> Reply:
        with self._lock:
            batch = self.batches.get(batch_id)
        if batch is None:
            return Reply(404, error_body(f"no batch {batch_id}", "invalid_request_error"))
        if advance:
            self._advance(batch)
        return Reply(200, self._batch_object(batch))

    def cancel(self, batch_id: str) -> Reply:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is not None:
                batch.cancel = True
                self.cancelled += 1
        if batch is None:
            return Reply(404, error_body(f"no batch {batch_id}", "invalid_request_error"))
        if batch.status in ("validating", "in_progress"):
            batch.status = "cancelling"
        return Reply(200, self._batch_object(batch))

    def listing(self) -> Reply:
        with self._lock:
            data = [self._batch_object(b) for b in self.batches.values()]
        return Reply(200, {"object": "list", "data": data, "first_id": None, "last_id": None, "has_more": False})

    def _advance(self, batch: _Batch) -> None:
        """One status request's worth of progress (see :class:`BatchScript`)."""
        script = self.script
        if batch.status in ("completed", "failed", "expired", "cancelled"):
            return
        if batch.cancel:
            self._finish(batch, run=0, status="cancelled", code="batch_cancelled",
                         message="The batch was cancelled before this request was run.")
            return
        batch.polls += 1
        if script.fail is not None:
            batch.status = "failed"
            batch.errors = [{"code": "invalid_request", "message": script.fail, "param": None, "line": None}]
            return
        if (script.hold and not self._released.is_set()) or batch.polls <= script.polls:
            batch.status = "in_progress"
            return
        if script.expire:
            self._finish(batch, run=script.run, status="expired", code="batch_expired",
                         message="This request could not be executed before the completion window expired.")
        else:
            self._finish(batch, run=len(batch.lines), status="completed", code="", message="")

    def _finish(self, batch: _Batch, *, run: int, status: str, code: str, message: str) -> None:
        output: list[str] = []
        errors: list[str] = []
        for i, line in enumerate(batch.lines):
            custom_id = line.get("custom_id")
            if i >= run:
                errors.append(json.dumps({"id": f"batch_req_{i}", "custom_id": custom_id, "response": None,
                                          "error": {"code": code, "message": message}}))
                batch.failed += 1
                continue
            with self._lock:
                index = self.lines
                self.lines += 1
            reply = self.respond(Received(str(line.get("url", "")), {}, dict(line.get("body") or {})), index)
            if not isinstance(reply, Reply):
                reply = Reply(500, error_body(f"the scripted reply {type(reply).__name__} has no batch form"))
            body = reply.body if not isinstance(reply.body, (bytes, str)) else {"raw": str(reply.body)}
            text = json.dumps({"id": f"batch_req_{i}", "custom_id": custom_id,
                               "response": {"status_code": reply.status, "request_id": f"req_{i}", "body": body},
                               "error": None})
            if reply.status == 200:
                mangle = self.script.mangle
                output.append(mangle(text, len(output)) if mangle is not None else text)
                batch.completed += 1
            else:
                errors.append(text)
                batch.failed += 1
        if output:
            batch.output_file_id = self.upload("output.jsonl", "batch_output", "\n".join(output).encode())["id"]
        if errors:
            batch.error_file_id = self.upload("errors.jsonl", "batch_output", "\n".join(errors).encode())["id"]
        with self._lock:
            self.uploads -= (1 if output else 0) + (1 if errors else 0)  # the server's own files are no uploads
        batch.status = status

    def _batch_object(self, batch: _Batch) -> dict[str, Any]:
        return {
            "id": batch.id, "object": "batch", "endpoint": "/v1/chat/completions",
            "errors": {"object": "list", "data": batch.errors} if batch.errors else None,
            "input_file_id": batch.input_file_id, "completion_window": "24h", "status": batch.status,
            "output_file_id": batch.output_file_id, "error_file_id": batch.error_file_id,
            "created_at": batch.created_at, "in_progress_at": None, "expires_at": batch.created_at + 86400,
            "finalizing_at": None, "completed_at": None, "failed_at": None, "expired_at": None,
            "cancelling_at": None, "cancelled_at": None,
            "request_counts": {"total": len(batch.lines), "completed": batch.completed, "failed": batch.failed},
            "metadata": batch.metadata,
        }


def _file_object(file_id: str, filename: str, purpose: str, size: int) -> dict[str, Any]:
    return {"id": file_id, "object": "file", "bytes": size, "created_at": int(time.time()), "filename": filename,
            "purpose": purpose, "status": "processed", "expires_at": None, "status_details": None}


def _multipart(content_type: str, body: bytes) -> dict[str, tuple[str | None, bytes]]:
    """The fields of a multipart/form-data body: name -> (filename, content)."""
    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    out: dict[str, tuple[str | None, bytes]] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        if isinstance(name, str):
            out[name] = (part.get_filename(), payload if isinstance(payload, bytes) else b"")
    return out


def _batch_handler(server: BatchServer) -> type[BaseHTTPRequestHandler]:
    base: Any = _handler(server)

    class Handler(base):  # type: ignore[misc]
        def _reply(self, reply: Reply) -> None:
            data = reply.body if isinstance(reply.body, bytes) else json.dumps(reply.body).encode("utf-8")
            kind = "application/octet-stream" if isinstance(reply.body, bytes) else "application/json"
            self.send_response(reply.status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def _route(self) -> list[str]:
            path: str = self.path.split("?", 1)[0].rstrip("/")
            parts: list[str] = path.split("/")
            if "v1" in parts:
                parts = parts[parts.index("v1") + 1:]
            return parts

        def do_GET(self) -> None:
            parts = self._route()
            if not server.batches_api or not parts or parts[0] not in ("files", "batches"):
                super().do_GET()
                return
            with server._lock:
                server.api_calls.append(("GET", self.path))
            if parts[0] == "batches":
                self._reply(server.listing() if len(parts) == 1 else server.retrieve(parts[1]))
                return
            with server._lock:
                data = server.files.get(parts[1]) if len(parts) > 1 else None
            if data is None:
                self._reply(Reply(404, error_body("no such file", "invalid_request_error")))
            elif len(parts) > 2 and parts[2] == "content":
                self._reply(Reply(200, data))
            else:
                self._reply(Reply(200, _file_object(parts[1], "input.jsonl", "batch", len(data))))

        def do_POST(self) -> None:
            parts = self._route()
            if not server.batches_api or not parts or parts[0] not in ("files", "batches"):
                super().do_POST()
                return
            with server._lock:
                server.api_calls.append(("POST", self.path))
            length = int(self.headers.get("content-length") or 0)
            raw = self.rfile.read(length) if length else b""
            if parts[0] == "files":
                fields = _multipart(self.headers.get("content-type", ""), raw)
                filename, data = fields.get("file", (None, b""))
                purpose = fields.get("purpose", (None, b"batch"))[1].decode()
                self._reply(Reply(200, server.upload(filename or "upload.jsonl", purpose, data)))
                return
            if len(parts) == 1:
                self._reply(server.create(json.loads(raw or b"{}")))
            elif len(parts) > 2 and parts[2] == "cancel":
                self._reply(server.cancel(parts[1]))
            else:
                self._reply(Reply(404, error_body(f"no route {self.path}", "not_found_error")))

    return Handler


def scripted_responder(fake: ScriptedModel) -> Responder:
    """A ``respond`` that answers every chat request (direct, or a batch line) as ``fake`` would: its replies by
    the request's schema name (checklists, verdicts, explanations ...), its rules, its counters."""
    from .scripted import _Transport

    transport = _Transport(fake)

    def respond(req: Received, index: int) -> Reply:
        del index
        messages = list(req.body.get("messages") or [])
        params = {k: v for k, v in req.body.items() if k not in ("model", "messages")}
        try:
            text, _ = fake._respond(transport.kind_of(params, messages), messages, params)
        except Exception as exc:
            status = getattr(exc, "status_code", 500)
            return Reply(status if isinstance(status, int) else 500, error_body(str(exc)))
        body = transport.build(text, messages, params)
        choice = body["choices"][0]
        entries = (choice.get("logprobs") or {}).get("content")
        covered = "".join(str(e.get("token", "")) for e in entries or [])
        if entries and text.startswith(covered) and len(covered) < len(text):  # the rest of the text, streamed too
            entries.append({"token": text[len(covered):], "logprob": 0.0, "top_logprobs": []})
        return Reply(200, body)

    return respond
