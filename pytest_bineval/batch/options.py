"""The options of ``--bineval-batch`` (and of ``bineval bench --batch``): their specs, parsers and checks.

A light module: :mod:`pytest_bineval.options` imports it to add the options.
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import UsageError
from ..settings import OptionSpec, choice

__all__ = ["BATCH_FAILURES", "BATCH_SPECS", "BatchOptions", "add_batch_arguments", "check_batch", "duration_value"]

BatchFailures = Literal["direct", "error"]
BATCH_FAILURES: tuple[BatchFailures, ...] = ("direct", "error")
DEFAULT_TIMEOUT = 24 * 3600.0  # the providers' completion window

_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([smhd]?)")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def duration_value(text: str) -> float:
    """Seconds of ``90``, ``90s``, ``30m``, ``6h`` or ``1d``; ``0``: submit the batch and do not wait."""
    match = _DURATION.fullmatch(text.strip().lower())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (seconds like 90, or 30m, 6h, 1d; 0 submits the "
                                         "batch without waiting)")
    return float(match.group(1)) * _UNIT[match.group(2)]


def failures_value(text: str) -> BatchFailures:
    return "error" if choice(BATCH_FAILURES)(text) == "error" else "direct"


@dataclass(frozen=True)
class BatchOptions:
    """What a batch run was asked for (picklable): how long to wait, and what a request the batch failed becomes."""

    timeout: float = DEFAULT_TIMEOUT
    failures: BatchFailures = "direct"


BATCH_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("batch", "batch", "send every judge request of the run through the provider's batch API (about half "
               "the price; results within 24 h, usually minutes): a first pass runs the tests to collect the requests "
               "(so the test bodies run twice, more when requests wait for earlier replies), the batches are "
               "submitted and awaited, their replies go into the reply cache, and the suite runs from it; an "
               "interrupted run resumes waiting for the same batches"),
    OptionSpec("batch-timeout", "batch_timeout", "with --bineval-batch, how long to wait for the batches before the "
               "run stops without judging (run it again to resume waiting): seconds, or 30m, 6h, 1d; 0 submits and "
               "stops", duration_value, "DURATION", "24h"),
    OptionSpec("batch-failures", "batch_failures", "with --bineval-batch, what a request the batch failed, let "
               "expire or answered unusably becomes: direct (asked once more directly, at the full price) or error "
               "(a judge error of its test)", failures_value, "MODE", "direct"),
)


def check_batch(batch: bool, cache: str) -> None:
    """UsageError when ``--bineval-batch`` cannot work with the cache mode ``cache``: the batch's replies are
    written into the reply cache, and the final pass reads them from there."""
    if batch and cache != "on":
        raise UsageError(f"--bineval-batch writes the batch's replies into the reply cache and judges from it: it "
                         f"needs --bineval-cache on (the default), not {cache}")


def add_batch_arguments(parser: argparse.ArgumentParser | Any) -> None:
    """``--batch``, ``--batch-timeout`` and ``--batch-failures`` (for ``bineval bench``)."""
    for spec in BATCH_SPECS:
        kwargs: dict[str, Any] = ({"type": spec.parse, "metavar": spec.metavar} if spec.parse is not None
                                  else {"action": "store_true"})
        parser.add_argument(f"--{spec.name}", dest=spec.attr, default=None,
                            help=spec.help_with_default().replace("--bineval-", "--"), **kwargs)


def batch_options(args: argparse.Namespace) -> BatchOptions | None:
    """The batch options of parsed ``add_batch_arguments`` (None: no --batch)."""
    if not getattr(args, "batch", None):
        return None
    return BatchOptions(timeout=args.batch_timeout if args.batch_timeout is not None else DEFAULT_TIMEOUT,
                        failures=args.batch_failures or "direct")
