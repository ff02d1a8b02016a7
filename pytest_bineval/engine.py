"""The engine: settings, one cache, and the two operations (checklist generation, evaluation)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import os
from collections.abc import Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from . import checklist as _checklist
from . import judge as _judge
from .llm.cache import CACHE_MODES, CacheMode, ResponseCache
from .llm.client import LLMClient, ModelSettings
from .llm.providers import DEFAULT_MODEL, is_embedded
from .models import Checklist, Evaluation, Usage
from .prompting import Prompt, load_judge_prompt

T = TypeVar("T")


@dataclass(frozen=True)
class Settings:
    """Everything that shapes model calls. Picklable, holds no secret (keys stay in the environment)."""

    model: str | None = None
    checklist_model: str | None = None
    cache: CacheMode = "on"
    cache_dir: str = ".bineval_cache"
    concurrency: int = 8
    temperature: float = 0.0
    timeout: float = 120.0
    retries: int = 2
    api_base: str | None = None
    judge_prompt: str | None = None  # an evaluator prompt file of your own (default: the packaged judge.md)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.cache not in CACHE_MODES:
            raise ValueError(f"cache must be one of {CACHE_MODES}, not {self.cache!r}")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, not {self.concurrency}")
        if self.timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, not {self.timeout}")
        if self.retries < 0:
            raise ValueError(f"retries must be >= 0, not {self.retries}")
        if not 0.0 <= self.temperature <= 2.0:
            raise ValueError(f"temperature must be within [0, 2], not {self.temperature}")

    @property
    def judge_model(self) -> str:
        return self.model or DEFAULT_MODEL

    @property
    def generator_model(self) -> str:
        return self.checklist_model or self.judge_model

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


class Engine:
    """Generates checklists and evaluates outputs; keeps a running total of usage."""

    def __init__(self, settings: Settings | None = None, *, cache: ResponseCache | None = None) -> None:
        self.settings = settings or Settings()
        if cache is None and self.settings.cache != "off":
            cache = ResponseCache(Path(os.path.expanduser(self.settings.cache_dir)), self.settings.cache)
        self.cache = cache
        self.usage = Usage()
        self._judge_prompt: Prompt | None = None
        if self.settings.judge_prompt is not None:
            self._judge_prompt = load_judge_prompt(os.path.expanduser(self.settings.judge_prompt))

    def client(self, model: str) -> LLMClient:
        s = self.settings
        return LLMClient(
            ModelSettings(model=model, temperature=s.temperature, timeout=s.timeout, retries=s.retries,
                          api_base=s.api_base, extra=dict(s.extra)),
            self.cache,
        )

    async def achecklist(self, task: str, dimensions: _checklist.DimensionsArg = None, *,
                         model: str | None = None) -> Checklist:
        result, usage = await _checklist.generate(
            self.client(model or self.settings.generator_model), task, dimensions
        )
        self.usage += usage
        return result

    async def aevaluate(self, output: str, checklist: Checklist, source: str | None = None, *,
                        model: str | None = None, question_first: bool = False) -> Evaluation:
        name = model or self.settings.judge_model
        # The embedded model is one in-process instance: ask its questions back to back.
        concurrency = 1 if is_embedded(name) else self.settings.concurrency
        result = await _judge.judge(self.client(name), output, checklist, source, concurrency=concurrency,
                                    question_first=question_first, prompt=self._judge_prompt)
        self.usage += result.usage
        return result

    def checklist(self, task: str, dimensions: _checklist.DimensionsArg = None, *,
                  model: str | None = None) -> Checklist:
        return run_sync(self.achecklist(task, dimensions, model=model))

    def evaluate(self, output: str, checklist: Checklist, source: str | None = None, *,
                 model: str | None = None) -> Evaluation:
        _judge.check_output(output, source)
        return run_sync(self.aevaluate(output, checklist, source, model=model))

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine from sync code, also when an event loop is already running in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()
