"""A scripted fake model for tests, served to litellm as an in-process provider.

It takes the very code path of real models (``litellm.acompletion`` -> custom provider), so tests of
caching, retries, parsing and scoring exercise the real machinery::

    fake = ScriptedModel(answers={"Is the response accurate?": "no"})
    fake.register()                      # provider "fake"; model string fake.model == "fake/judge"
    evaluate(summary, checklist, model=fake.model)
    assert fake.calls_of("verdict") == 3

Replies are chosen by the structured-output schema name of the request (``requirements``,
``questions``, ``verdict``, and the optimizer's ``lesson`` and ``prompt_edit``); anything a rule
returns that is an ``Exception`` is raised (a provider error), a ``float`` is slept (seconds, to test
timeouts) before the default reply, a ``str`` is sent raw.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
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


@dataclass
class ScriptedModel:
    """A deterministic fake LLM. ``answers`` maps question text -> "yes"/"no"/raw reply/exception, or is
    a rule ``Request -> reply``; ``questions_per_dimension`` sets how many questions it writes."""

    provider: str = "fake"
    answers: dict[str, Any] | Rule = field(default_factory=dict)
    questions_per_dimension: int = 2
    rules: dict[str, Rule] = field(default_factory=dict)
    requests: list[Request] = field(default_factory=list)
    max_in_flight: int = 0
    _in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def model(self) -> str:
        return f"{self.provider}/judge"

    def calls_of(self, kind: str) -> int:
        return sum(r.kind == kind for r in self.requests)

    def register(self) -> ScriptedModel:
        from .llm.providers import register_provider

        register_provider(self.provider, _make_handler(self))
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
                return json.dumps({"answer": answer, "explanation": f"scripted {answer} for: {req.question}"})
            return answer
        if req.kind == "lesson":
            m = re.search(r"^(?:The failed check \(.*?\)|The question): (.*)$", req.user, re.MULTILINE)
            return json.dumps({"lesson": f"Make sure that: {m.group(1).strip() if m else 'the check passes'}"})
        if req.kind == "prompt_edit":
            # Surgical edit: the prompt's first plain line, with the lesson added after it.
            prompt = re.search(r"<prompt>\n(.*)\n</prompt>", req.user, re.DOTALL)
            lesson = re.search(r"<lesson>\n(.*)\n</lesson>", req.user, re.DOTALL)
            lines = [ln for ln in (prompt.group(1) if prompt else "").splitlines()
                     if ln.strip() and not ln.startswith("## ")]
            find = lines[0] if lines else "?"
            return json.dumps({"find": find, "replace": f"{find} {lesson.group(1).strip() if lesson else ''}"})
        return json.dumps({})

    def _respond(self, kind: str, messages: list[dict[str, str]], params: dict[str, Any]) -> tuple[str, float]:
        req = Request(kind, messages, params)
        with self._lock:
            self.requests.append(req)
        out = self.reply(req)
        delay = 0.0
        if isinstance(out, (int, float)) and not isinstance(out, bool):
            delay, out = float(out), json.dumps({"answer": "yes", "explanation": "slow"})
        if isinstance(out, BaseException):
            raise out
        return str(out), delay


def _make_handler(fake: ScriptedModel) -> Any:
    from .llm._litellm import import_litellm

    import_litellm()
    from litellm.llms.custom_llm import CustomLLM
    from litellm.types.utils import ModelResponse

    def kind_of(params: dict[str, Any]) -> str:
        fmt = params.get("response_format") or {}
        return str((fmt.get("json_schema") or {}).get("name", "text")) if isinstance(fmt, dict) else "text"

    def build(text: str, messages: list[Any], params: dict[str, Any]) -> Any:
        choice: dict[str, Any] = {"index": 0, "finish_reason": "stop",
                                  "message": {"role": "assistant", "content": text}}
        if params.get("logprobs"):
            choice["logprobs"] = {"content": _fake_logprobs(text)}
        n_in = sum(len(str(m.get("content", "")).split()) for m in messages)
        return ModelResponse(model=fake.model, choices=[choice],
                             usage={"prompt_tokens": n_in, "completion_tokens": len(text.split()),
                                    "total_tokens": n_in + len(text.split())})

    class FakeHandler(CustomLLM):
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            params = dict(kwargs.get("optional_params") or {})
            messages = list(kwargs.get("messages") or [])
            text, delay = fake._respond(kind_of(params), messages, params)
            if delay:
                time.sleep(delay)
            return build(text, messages, params)

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            params = dict(kwargs.get("optional_params") or {})
            messages = list(kwargs.get("messages") or [])
            with fake._lock:
                fake._in_flight += 1
                fake.max_in_flight = max(fake.max_in_flight, fake._in_flight)
            try:
                await asyncio.sleep(0.005)  # let concurrent requests overlap
                text, delay = fake._respond(kind_of(params), messages, params)
                if delay:
                    await asyncio.sleep(delay)
                return build(text, messages, params)
            finally:
                with fake._lock:
                    fake._in_flight -= 1

    return FakeHandler()


def _fake_logprobs(text: str) -> list[dict[str, Any]]:
    """Token-ish logprobs for a reply: the answer word gets P=0.9 against its opposite."""
    m = re.search(r'"answer"\s*:\s*"(yes|no)', text)
    if not m:
        return []
    head = text[: m.start(1)]
    word = m.group(1)
    other = "no" if word == "yes" else "yes"
    return [
        {"token": head, "logprob": 0.0, "bytes": None, "top_logprobs": []},
        {"token": word, "logprob": -0.10536, "bytes": None,
         "top_logprobs": [{"token": word, "logprob": -0.10536, "bytes": None},
                          {"token": other, "logprob": -2.302585, "bytes": None}]},
    ]
