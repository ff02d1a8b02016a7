"""Run-wide state of a pytest session: options, the engine, pinned checklists, evaluation records."""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .checklist import DimensionsArg, resolve_dimensions
from .engine import Engine, Settings, run_sync
from .errors import BinevalError
from .llm.cache import CacheMode
from .models import Checklist, Evaluation, task_digest

if TYPE_CHECKING:
    from .assertions import TestContext

PIN_DIR = "__bineval__"
PIN_FORMAT = 1
SOURCE_IN_REPORT = 4000  # characters of the source kept in a report record


class PinError(BinevalError):
    """--bineval-strict: a test ran on a checklist that is not pinned, or whose pin is stale."""


@dataclass(frozen=True)
class Options:
    """The ``--bineval-*`` options, validated (picklable, for pytest-xdist)."""

    model: str | None = None
    checklist_model: str | None = None
    threshold: float | dict[str, float] | None = None
    cache: CacheMode = "on"
    cache_dir: str = ".bineval_cache"
    concurrency: int = 8
    timeout: float = 120.0
    update_checklists: bool = False
    strict: bool = False
    report: str | None = None
    optimize: bool = False
    judge_prompt: str | None = None

    def settings(self) -> Settings:
        return Settings(model=self.model, checklist_model=self.checklist_model, cache=self.cache,
                        cache_dir=self.cache_dir, concurrency=self.concurrency, timeout=self.timeout,
                        judge_prompt=self.judge_prompt)


def pin_path(module_path: Path, test_name: str) -> Path:
    """``__bineval__/<module stem>/<[Class.]test name without parameters>.json`` beside the test module."""
    base = re.sub(r"\[.*\]$", "", test_name).replace("::", ".")
    safe = re.sub(r"[^\w.-]", "_", base)
    return module_path.parent / PIN_DIR / module_path.stem / f"{safe}.json"


def _dims_key(dimensions: dict[str, str]) -> list[list[str]]:
    return sorted([name, definition] for name, definition in dimensions.items())


class PinFile:
    """The checklists pinned for one test: a JSON file meant to be reviewed and committed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.checklists: list[Checklist] = []
        if path.is_file():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                self.checklists = [Checklist.model_validate(c) for c in data["checklists"]]
            except Exception as exc:
                raise PinError(f"pinned checklist file {path} is unreadable: {exc}") from exc

    def find(self, task: str, dimensions: dict[str, str]) -> tuple[Checklist | None, bool]:
        """(exact match, whether a pin for the same dimensions exists but for another task text)."""
        digest = task_digest(task)
        stale = False
        for c in self.checklists:
            if _dims_key(c.dimensions) == _dims_key(dimensions):
                if c.task_digest == digest:
                    return c, False
                stale = True
        return None, stale

    def put(self, checklist: Checklist) -> None:
        key = _dims_key(checklist.dimensions)
        self.checklists = [c for c in self.checklists if _dims_key(c.dimensions) != key]
        self.checklists.append(checklist)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {"format": PIN_FORMAT, "checklists": [c.model_dump(mode="json") for c in self.checklists]}
        text = json.dumps(body, indent=2, ensure_ascii=False) + "\n"
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".pin-", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, self.path)


@dataclass
class BinevalService:
    """The ``bineval`` session fixture: configuration, cache, checklists and the run's records."""

    options: Options
    engine: Engine
    records: list[dict[str, Any]] = field(default_factory=list)
    pins_written: list[str] = field(default_factory=list)
    on_record: Callable[[dict[str, Any]], object] | None = None
    _memo: dict[tuple[Any, ...], Checklist] = field(default_factory=dict)

    @classmethod
    def create(cls, options: Options, rootpath: Path) -> BinevalService:
        cache_dir = Path(os.path.expanduser(options.cache_dir))
        if not cache_dir.is_absolute():
            cache_dir = rootpath / cache_dir
        judge_prompt = None
        if options.judge_prompt is not None:
            path = Path(os.path.expanduser(options.judge_prompt))
            judge_prompt = str(path if path.is_absolute() else rootpath / path)
        settings = options.settings().with_overrides(cache_dir=str(cache_dir), judge_prompt=judge_prompt)
        return cls(options=options, engine=Engine(settings))

    # -- public fixture API ------------------------------------------------------------------------------
    def checklist(self, task: str, dimensions: DimensionsArg = None) -> Checklist:
        """The (cached) checklist for a task; pinned files are used by tests, not by this call."""
        return run_sync(self._agenerate(task, resolve_dimensions(dimensions)))

    def evaluate(self, output: str, checklist: Checklist, source: str | None = None, *,
                 dimensions: list[str] | None = None, model: str | None = None) -> Evaluation:
        return self.engine.evaluate(output, checklist.select(dimensions), source, model=model)

    # -- used by assert_passes ---------------------------------------------------------------------------
    async def _agenerate(self, task: str, dims: dict[str, str]) -> Checklist:
        key = (task.strip(), tuple(sorted(dims.items())), self.engine.settings.generator_model)
        if key not in self._memo:
            self._memo[key] = await self.engine.achecklist(task, dims)
        return self._memo[key]

    async def achecklist_for(self, ctx: TestContext, task: str, dimensions: DimensionsArg) -> tuple[Checklist, str]:
        """The checklist of the current test and its pin status: pinned, written, unpinned or stale."""
        dims = resolve_dimensions(dimensions)
        if ctx.pin_path is None:
            return await self._agenerate(task, dims), "unpinned"
        pins = PinFile(ctx.pin_path)
        found, stale = pins.find(task, dims)
        if found is not None and not self.options.update_checklists:
            return found, "pinned"
        if self.options.strict and not self.options.update_checklists:
            why = "is stale (the task text changed since it was pinned)" if stale else "is not pinned"
            raise PinError(
                f"--bineval-strict: the checklist of {ctx.nodeid} {why}; review and pin it with "
                f"--bineval-update-checklists (file: {ctx.pin_path})"
            )
        checklist = await self._agenerate(task, dims)
        if self.options.update_checklists:
            if found is None or found.model_dump() != checklist.model_dump():
                pins.put(checklist)
                self.pins_written.append(str(ctx.pin_path))
            return checklist, "written"
        return checklist, "stale" if stale else "unpinned"

    def record(self, ctx: TestContext, evaluation: Evaluation, thresholds: dict[str, float], outcome: str,
               checklist: Checklist, pinned: str, output: str = "", source: str | None = None) -> None:
        """Keep what the report needs (JSON-able, so pytest-xdist workers can send it)."""
        rec = {
            "test": ctx.nodeid,
            "task": checklist.task,
            "prompt": ctx.prompt,
            "model": evaluation.model,
            "checklist_model": checklist.model,
            "checklist_status": pinned,
            "output": output,
            "source": source if source is None or len(source) <= SOURCE_IN_REPORT else
            source[:SOURCE_IN_REPORT] + f"… [{len(source) - SOURCE_IN_REPORT} more characters]",
            "dimensions": list(thresholds),
            "thresholds": thresholds,
            "scores": {d: evaluation.scores.get(d) for d in thresholds},
            "overall": evaluation.overall,
            "outcome": outcome,
            "verdicts": [v.model_dump(mode="json") for v in evaluation.verdicts],
            "questions": [q.model_dump(mode="json") for q in checklist.questions],
            "usage": evaluation.usage.model_dump(mode="json"),
        }
        ctx.records.append(rec)
        self.records.append(rec)
        if self.on_record is not None:
            self.on_record(rec)

    def close(self) -> None:
        self.engine.close()
