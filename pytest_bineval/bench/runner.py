"""Running a benchmark: load the items and run each method over them (one model, one cache).

The result is a plain :class:`BenchRun` (per-item results of every method); the figures and the report
are computed from it by :mod:`.report`, which this module does not import.

Every model call goes through the engine's reply cache, so rerunning the same command is served from
the cache and an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from ..engine import Engine, Settings
from ..errors import BinevalError
from ..llm.providers import is_embedded
from ..models import Checklist, Usage
from . import datasets as ds
from .methods import ItemResult, Method, make_method
from .specs import CUSTOM, DATASETS, METHODS, CustomData, DatasetSpec, dataset_names
from .turns import TurnsMethod

__all__ = ["BenchConfig", "BenchRun", "MethodRun", "load_items", "run_bench"]


@dataclass
class BenchConfig:
    dataset: str
    settings: Settings
    methods: Sequence[str] = METHODS
    limit: int | None = None
    docs: int | None = None
    seed: int = 0
    bootstrap: int = 1000
    data_dir: str | None = None
    dimensions: Sequence[str] = ()
    checklist: Checklist | None = None
    custom: CustomData | None = None
    quiet: bool = False
    command: str = ""

    @property
    def model(self) -> str:
        return self.settings.judge_model


@dataclass
class MethodRun:
    """One method over all items: per-item results, cost, and why it did not run (if it did not)."""

    name: str
    results: list[ItemResult] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    prepare_usage: Usage = field(default_factory=Usage)
    wall_seconds: float = 0.0
    status: str = "ok"
    reason: str | None = None
    notes: dict[str, Any] = field(default_factory=dict)


@dataclass
class BenchRun:
    """A finished run: what was asked (``config``), on what (``spec``, ``items``) and each method's results."""

    config: BenchConfig
    spec: DatasetSpec
    items: list[ds.Item]
    runs: list[MethodRun]
    wall_seconds: float


# --------------------------------------------------------------------------------------------------
# data


def load_items(config: BenchConfig) -> tuple[DatasetSpec, list[ds.Item]]:
    """The dataset's spec (restricted to ``config.dimensions``) and its items (``--limit`` / ``--docs``)."""
    if config.limit is not None and config.docs is not None:
        raise ValueError("give --limit or --docs, not both")
    if config.dataset == CUSTOM:
        if config.custom is None:
            raise ValueError("the custom dataset needs --data, --source-key, --output-key, --score-key and --task")
        spec, items = config.custom.load(limit=config.limit, docs=config.docs)
    elif config.dataset in DATASETS:
        spec = DATASETS[config.dataset]
        items = spec.load(config.data_dir, limit=config.limit, docs=config.docs)
    else:
        raise ValueError(f"unknown dataset {config.dataset!r}; expected one of {', '.join(dataset_names())}")
    spec = spec.select(list(config.dimensions))
    missing = [d for d in spec.dimension_names if any(d not in it.human for it in items)]
    if missing:
        raise ValueError(f"some items have no human score for {missing}")
    return spec, items


# --------------------------------------------------------------------------------------------------
# running


def _progress(quiet: bool) -> Any:
    if quiet or not sys.stderr.isatty():
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=False,
    )


async def _run_method(method: Method, items: list[ds.Item], concurrency: int, progress: Any, label: str) -> MethodRun:
    run = MethodRun(method.name)
    if method.unavailable is not None:
        run.status, run.reason = "n/a", method.unavailable
        run.results = [await method.score(item) for item in items]
        return run
    task = progress.add_task(label, total=len(items)) if progress is not None else None
    started = time.perf_counter()
    try:
        await method.prepare()
    except BinevalError as exc:
        run.status, run.reason = "error", f"{type(exc).__name__}: {exc}"
        run.prepare_usage = method.prepare_usage
        run.wall_seconds = time.perf_counter() - started
        run.results = [ItemResult() for _ in items]
        if progress is not None:
            progress.update(task, completed=len(items))
        return run
    run.prepare_usage = method.prepare_usage
    semaphore = asyncio.Semaphore(max(1, concurrency))

    async def one(item: ds.Item) -> ItemResult:
        async with semaphore:
            result = await method.score(item)
        if progress is not None:
            progress.advance(task)
        return result

    if concurrency <= 1:  # in order: consecutive items share their source (prefix reuse)
        run.results = [await one(item) for item in items]
    else:
        run.results = list(await asyncio.gather(*(one(item) for item in items)))
    run.wall_seconds = time.perf_counter() - started
    run.usage = Usage.total(r.usage for r in run.results)
    run.notes = dict(method.notes)
    return run


async def run_methods(config: BenchConfig, spec: DatasetSpec, items: list[ds.Item], engine: Engine) -> list[MethodRun]:
    """Run every requested method; methods that do not apply to the dataset are reported as n/a."""
    runs: list[MethodRun] = []
    concurrency = 1 if is_embedded(config.model) else config.settings.concurrency
    progress = _progress(config.quiet)
    ctx: AbstractContextManager[Any] = progress if progress is not None else nullcontext()
    with ctx:
        for name in config.methods:
            if name not in spec.methods:
                runs.append(MethodRun(name, status="n/a", reason=f"not applicable to {spec.name}"))
                continue
            method = (TurnsMethod(engine, config.model, spec, config.checklist) if name == "bineval-turns"
                      else make_method(name, engine, config.model, spec, config.checklist))
            run = await _run_method(method, items, concurrency, progress, f"{spec.name} {name}")
            if name == "bineval" and getattr(method, "checklist", None) is not None:
                run.notes["checklist"] = method.checklist.model_dump(mode="json")  # type: ignore[attr-defined]
            runs.append(run)
    return runs


async def run_bench(config: BenchConfig) -> BenchRun:
    """Run the benchmark described by ``config``: every requested method over the selected items."""
    spec, items = load_items(config)
    if not items:
        raise ValueError("no items selected")
    engine = Engine(config.settings)
    started = time.perf_counter()
    try:
        runs = await run_methods(config, spec, items, engine)
    finally:
        engine.close()
    return BenchRun(config, spec, items, runs, wall_seconds=time.perf_counter() - started)
