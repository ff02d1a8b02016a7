"""A scripted fake model for tests, served as an in-process transport (:mod:`pytest_bineval.llm.transports`).

It takes the code path of real models up to the transport (cache, structured-output negotiation, the request,
reply parsing, retries, deadline, usage), but not litellm, which it never imports; so tests of caching, retries,
parsing and scoring exercise the real machinery, fast::

    fake = ScriptedModel(answers={"Is the response accurate?": "no"})
    fake.register()                      # provider "fake"; model string fake.model == "fake/judge"
    evaluate(summary, checklist, model=fake.model)
    assert fake.calls_of("verdict") == 3

Replies are chosen by the structured-output schema name of the request (``requirements``,
``questions``, ``verdict`` (the judge's answer-only request), ``explanation`` (its follow-up), the optimizer's
``lesson`` and ``prompt_edit``, and Qworld's ``qworld_scenarios``, ``qworld_perspectives``, ``qworld_criteria``,
``qworld_review_<level>`` and ``qworld_lite``); anything a rule returns that is an ``Exception`` is raised
(a provider error: one without an HTTP ``status_code`` as :class:`ScriptedProviderError`, a server error),
a ``float`` is slept (seconds, to test timeouts) before the default reply, a ``str`` is sent raw.

With ``prefill=True`` the fake behaves like the embedded model: it continues a final assistant message
marked ``"prefix": True`` (the judge then prefills ``{"answer": "`` and reads one token, and prefills up to
the explanation for the explanation request), and those requests count as ``verdict`` and
``explanation`` too.

Embedding requests (the ``embedding:<provider>/...`` similarity) get :meth:`ScriptedModel.embed` vectors
and are recorded with kind ``embedding``.

The default Qworld replies make a deterministic tree: each call writes as many nodes as the request allows
("Write up to N ..."), numbered in the order of the calls (``Scenario 1``, ``Perspective 1`` ...; criteria
ask about distinct topics, with points 10, 9, 8 ... cycling), no penalty, and reviews that find nothing.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Rule = Callable[["Request"], Any]


@dataclass
class Request:
    kind: str
    messages: list[dict[str, str]]
    params: dict[str, Any]

    @property
    def user(self) -> str:
        return next((m["content"] for m in reversed(self.messages) if m["role"] == "user"), "")

    @property
    def prefill(self) -> str | None:
        """The text of a final assistant message to continue (``"prefix": True``), else None."""
        last = self.messages[-1] if self.messages else {}
        return str(last.get("content") or "") if last.get("role") == "assistant" and last.get("prefix") else None

    @property
    def answered(self) -> str:
        """The answer an explanation request is about (from its prefill or the assistant turn before it)."""
        for m in reversed(self.messages):
            if m["role"] == "assistant":
                found = re.search(r'"answer"\s*:\s*"(yes|no)"', str(m.get("content") or ""))
                if found:
                    return found.group(1)
        return ""

    def _find(self, pattern: str, flags: int) -> re.Match[str] | None:
        # The latest user turn that has it: a retry turn ("That reply was not valid ...") keeps the
        # question, dimension and response of the turn it retries.
        for m in reversed(self.messages):
            if m["role"] == "user":
                found = re.search(pattern, m["content"], flags)
                if found:
                    return found
        return None

    @property
    def question(self) -> str:
        m = self._find(r"^Question: (.*)$", re.MULTILINE)
        return m.group(1).strip() if m else ""

    @property
    def dimension(self) -> str:
        m = self._find(r"^Dimension: (.*)$", re.MULTILINE)
        return m.group(1).strip() if m else ""

    @property
    def output(self) -> str:
        m = self._find(r"<response>\n(.*)\n</response>", re.DOTALL)
        return m.group(1) if m else ""

    @property
    def count(self) -> int:
        """The N of "Write up to N ..." (Qworld requests); 0 when absent."""
        m = self._find(r"^Write up to (\d+)", re.MULTILINE)
        return int(m.group(1)) if m else 0

    @property
    def ids(self) -> list[str]:
        """The node ids listed in a Qworld review request, in order."""
        m = self._find(r"^The (?:scenarios|perspectives|criteria):\n(.*?)\n\n", re.MULTILINE | re.DOTALL)
        return re.findall(r"^([spc]\d+)\b", m.group(1), re.MULTILINE) if m else []


# Distinct topics for the fake's criteria, so that the lexical duplicate pre-filter keeps them apart.
TOPICS = ("dosage", "timing", "cost", "warning signs", "alternatives", "follow-up", "evidence", "risks", "budget",
          "schedule", "weather", "packing", "insurance", "refunds", "security", "testing", "licences", "privacy",
          "deadlines", "taxes", "savings", "children", "elderly", "allergies", "exercise", "sleep", "diet", "travel",
          "documents", "language", "accessibility", "transport", "emergencies", "backups", "versions", "logging")


@dataclass
class ScriptedModel:
    """A deterministic fake LLM. ``answers`` maps question text -> "yes"/"no"/raw reply/exception, or is
    a rule ``Request -> reply``; ``questions_per_dimension`` sets how many questions it writes."""

    provider: str = "fake"
    answers: dict[str, Any] | Rule = field(default_factory=dict)
    questions_per_dimension: int = 2
    prefill: bool = False
    rules: dict[str, Rule] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    counters: dict[str, int] = field(default_factory=dict)
    max_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def model(self) -> str:
        return f"{self.provider}/judge"

    def calls_of(self, kind: str) -> int:
        return sum(r.kind == kind for r in self.requests)

    def register(self) -> ScriptedModel:
        """Serve model strings ``<provider>/...`` with this fake, in-process (litellm is not imported)."""
        from ..llm.transports import register_transport

        register_transport(self.provider, _Transport(self))
        return self

    # -- default replies ---------------------------------------------------------------------------------
    def reply(self, req: Request) -> Any:
        if req.kind in self.rules:
            return self.rules[req.kind](req)
        if req.kind == "requirements":
            return json.dumps({"requirements": [
                "The response states only facts supported by the input.",
                "The response covers the main point of the input.",
                "The response is well written.",
            ]})
        if req.kind == "questions":
            d = req.dimension
            return json.dumps({"questions": [
                {"requirement": f"{d} requirement {i}", "question": f"Does the response meet {d} check {i}?",
                 "no_example": f"A response that fails {d} check {i}."}
                for i in range(1, self.questions_per_dimension + 1)
            ]})
        if req.kind == "verdict":
            answer = self.answers(req) if callable(self.answers) else self.answers.get(req.question, "yes")
            if answer in ("yes", "no"):
                return answer if req.prefill is not None else json.dumps({"answer": answer})
            return answer
        if req.kind == "explanation":  # prefill: it continues the judge's "Because the response"
            text = f"scripted {req.answered} for: {req.question}"
            return f' is {text}"}}' if req.prefill is not None else json.dumps({"explanation": text})
        if req.kind == "lesson":
            m = re.search(r"^(?:The failed check \(.*?\)|The question): (.*)$", req.user, re.MULTILINE)
            return json.dumps({"lesson": f"Make sure that: {m.group(1).strip() if m else 'the check passes'}"})
        if req.kind.startswith("qworld_"):
            return self._qworld(req)
        if req.kind == "prompt_edit":
            # Surgical edit: the prompt's first plain line, with the lesson added after it.
            prompt = re.search(r"<prompt>\n(.*)\n</prompt>", req.user, re.DOTALL)
            lesson = re.search(r"<lesson>\n(.*)\n</lesson>", req.user, re.DOTALL)
            lines = [ln for ln in (prompt.group(1) if prompt else "").splitlines()
                     if ln.strip() and not ln.startswith("## ")]
            find = lines[0] if lines else "?"
            return json.dumps({"find": find, "replace": f"{find} {lesson.group(1).strip() if lesson else ''}"})
        return json.dumps({})

    @staticmethod
    def embed(text: str) -> list[float]:
        """The fake's embedding of a text: counts of its words hashed into 256 buckets (same words, same vector)."""
        import zlib

        vector = [0.0] * 256
        for word in re.findall(r"[a-z0-9]+", text.lower()):
            vector[zlib.crc32(word.encode()) % 256] += 1.0
        return vector

    def _next(self, kind: str) -> int:
        with self._lock:
            self.counters[kind] = self.counters.get(kind, 0) + 1
            return self.counters[kind]

    @staticmethod
    def node(level: str, n: int) -> dict[str, str]:
        """The fake's n-th scenario or perspective (1-based): ``Scenario 3`` / ``Perspective 3``, a distinct word."""
        word = TOPICS[(n - 1 + (0 if level == "scenario" else 17)) % len(TOPICS)]
        return {"name": f"{level.capitalize()} {n}", "description": f"The {word} case."}

    def criterion(self, n: int) -> dict[str, Any]:
        """The fake's n-th criterion (1-based): a distinct topic, points 10, 9, ..., 4, 10, ..."""
        topic = TOPICS[(n - 1) % len(TOPICS)]
        return {"question": f"Does the response cover {topic} (criterion {n})?", "points": 10 - (n - 1) % 7,
                "tag": "coverage"}

    def _qworld(self, req: Request) -> str:
        if req.kind in ("qworld_scenarios", "qworld_perspectives"):
            level = req.kind.removeprefix("qworld_").rstrip("s")
            return json.dumps({"items": [self.node(level, self._next(level)) for _ in range(req.count)]})
        if req.kind == "qworld_criteria":
            return json.dumps({"criteria": [self.criterion(self._next("criterion")) for _ in range(req.count)],
                               "penalties": []})
        if req.kind == "qworld_review_criterion":
            return json.dumps({"duplicates": [], "missing": {"criteria": [], "penalties": []}})
        if req.kind.startswith("qworld_review_"):
            return json.dumps({"duplicates": [], "missing": {"items": []}})
        if req.kind == "qworld_lite":
            return json.dumps({"scenarios": [
                {"name": f"Scenario {s}", "description": f"Situation number {s}.", "perspectives": [
                    {"name": f"Perspective {s}.{p}", "penalties": [],
                     "criteria": [self.criterion(self._next("criterion")) for _ in range(2)]}
                    for p in (1, 2)]}
                for s in (1, 2)]})
        return json.dumps({})

    def _respond(self, kind: str, messages: list[dict[str, str]], params: dict[str, Any]) -> tuple[str, float]:
        req = Request(kind, messages, params)
        with self._lock:
            self.requests.append(req)
        out = self.reply(req)
        delay = 0.0
        if isinstance(out, (int, float)) and not isinstance(out, bool):
            delay, out = float(out), "yes" if req.prefill is not None else json.dumps({"answer": "yes"})
        if isinstance(out, BaseException):
            raise out
        return str(out), delay


class ScriptedProviderError(Exception):
    """A provider error raised by a rule (any exception without an HTTP status), as a server error (HTTP 500)
    would be: classified transient, so retried (litellm reports an in-process provider's exceptions alike)."""

    status_code = 500


class _Transport:
    """The fake as an in-process transport (:mod:`pytest_bineval.llm.transports`): no litellm."""

    def __init__(self, fake: ScriptedModel) -> None:
        self.fake = fake
        self.continues_prefill = fake.prefill

    def kind_of(self, params: dict[str, Any], messages: list[Any]) -> str:
        last = messages[-1] if messages else {}
        if self.fake.prefill and last.get("role") == "assistant" and last.get("prefix"):
            return "explanation" if '"explanation": "' in str(last.get("content") or "") else "verdict"
        fmt = params.get("response_format") or {}
        return str((fmt.get("json_schema") or {}).get("name", "text")) if isinstance(fmt, dict) else "text"

    def build(self, text: str, messages: list[Any], params: dict[str, Any]) -> dict[str, Any]:
        fake = self.fake
        stop = params.get("stop") or []
        for x in [stop] if isinstance(stop, str) else stop:
            if x and x in text:
                text = text[: text.index(x)]
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}
        if params.get("logprobs"):
            last = messages[-1] if messages else {}
            prefilled = str(last.get("content") or "") if fake.prefill and last.get("prefix") else ""
            choice["logprobs"] = {"content": _fake_logprobs(prefilled + text, skip=len(prefilled))}
        n_in = sum(len(str(m.get("content", "")).split()) for m in messages)
        return {"object": "chat.completion", "model": fake.model, "choices": [choice],
                "usage": {"prompt_tokens": n_in, "completion_tokens": len(text.split()),
                          "total_tokens": n_in + len(text.split())}}

    async def acompletion(self, request: dict[str, Any]) -> dict[str, Any]:
        fake = self.fake
        messages = list(request.get("messages") or [])
        # what litellm hands a custom provider as its optional parameters
        params = {k: v for k, v in request.items() if k not in ("model", "messages", "api_base", "api_key")}
        with fake._lock:
            fake._in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake._in_flight)
        try:
            await asyncio.sleep(0.005)  # let concurrent requests overlap
            try:
                text, delay = fake._respond(self.kind_of(params, messages), messages, params)
            except Exception as exc:
                if isinstance(getattr(exc, "status_code", None), int) or isinstance(exc, asyncio.TimeoutError):
                    raise
                raise ScriptedProviderError(str(exc)) from exc
            if delay:
                await asyncio.sleep(delay)
            return self.build(text, messages, params)
        finally:
            with fake._lock:
                fake._in_flight -= 1

    async def aembedding(self, model: str, inputs: list[str]) -> list[list[float]]:
        fake = self.fake
        with fake._lock:
            fake.requests.append(Request("embedding", [{"role": "user", "content": str(t)} for t in inputs], {}))
        return [fake.embed(str(t)) for t in inputs]


def _fake_logprobs(text: str, skip: int = 0) -> list[dict[str, Any]]:
    """Token-ish logprobs for a reply: the answer word gets P=0.9 against its opposite. ``skip``: the
    length of a prefilled head that is not part of the reply (no entry for it)."""
    m = re.search(r'"answer"\s*:\s*"(yes|no)', text)
    if not m:
        return []
    head = text[: m.start(1)]
    word = m.group(1)
    other = "no" if word == "yes" else "yes"
    answer = {"token": word, "logprob": -0.10536, "bytes": None,
              "top_logprobs": [{"token": word, "logprob": -0.10536, "bytes": None},
                               {"token": other, "logprob": -2.302585, "bytes": None}]}
    if skip >= len(head):
        return [answer]
    return [{"token": head[skip:], "logprob": 0.0, "bytes": None, "top_logprobs": []}, answer]
