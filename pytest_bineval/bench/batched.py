"""``bineval bench --batch``: a benchmark's model requests through the provider's batch API (about half the price).

The same rounds as a ``--bineval-batch`` pytest run (:mod:`pytest_bineval.batch`): the methods run over the items
with the engine's seam collecting (nothing is sent, nothing derived is cached, what they spent is put back), the
recorded requests go out as batches and their replies into the reply cache, a request that depends on an earlier
reply waits for the next round, and then the benchmark runs as usual, its requests answered from the batches'
replies (each counted once, at the batch price, in the method that used it). The data set's items are read once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import time
from collections.abc import Callable

from ..batch.options import BatchOptions, check_batch
from ..batch.passes import check_batch_api
from ..batch.registry import registry_for
from ..batch.runner import BatchError, BatchRunner
from ..batch.seam import BatchSeam, first_pass_of
from ..engine import Engine
from ..errors import UsageError
from ..outputs.batch import batch_lines
from ..report.batch import BatchSummary
from .runner import BenchConfig, BenchRun, load_items, run_methods

__all__ = ["run_bench_batched"]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def run_bench_batched(config: BenchConfig, options: BatchOptions,
                      show: Callable[[str], None] = _stderr) -> tuple[BenchRun, BatchSummary]:
    """Run the benchmark of ``config`` through batches (see the module): the run, and what the batches did.
    UsageError when the cache cannot hold the replies or the provider has no batch API; a batch not finished
    within ``options.timeout`` stops the benchmark (BatchError): run the same command again to resume waiting."""
    check_batch(True, config.settings.cache)
    spec, items = load_items(config)
    if not items:
        raise ValueError("no items selected")
    engine = Engine(config.settings)
    try:
        seam = BatchSeam(engine.cache, options.failures)
        engine.batch = seam
        check_batch_api(engine)
        s = engine.settings
        runner = BatchRunner(engine, seam, registry_for(s.cache_dir, s.cache_url, s.cache_prefix), options,
                             show=show)
        quiet = dataclasses.replace(config, quiet=True)

        def collect() -> None:
            with first_pass_of(engine):
                asyncio.run(run_methods(quiet, spec, items, engine))

        started = time.perf_counter()
        try:
            runner.run(collect)
        except BatchError as exc:
            raise UsageError(str(exc)) from None
        runs = asyncio.run(run_methods(config, spec, items, engine))
        summary = runner.finish()
        for note in runner.notes:
            show(note)
        for text, _ in batch_lines(summary):
            show(text)
        return BenchRun(config, spec, items, runs, wall_seconds=time.perf_counter() - started), summary
    finally:
        engine.close()
