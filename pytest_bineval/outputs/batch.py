"""The lines of the end-of-run summary that say what ``--bineval-batch`` did (from the report's ``batch``)."""

from __future__ import annotations

from typing import Any

from ..models import cost_text
from ..report.batch import BatchSummary
from ..report.comparison import RegressionReport

Line = tuple[str, dict[str, Any]]


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else plural or word + 's'}"


def duration_text(seconds: float) -> str:
    """``42s``, ``3m 05s``, ``2h 04m 00s``."""
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m {secs:02d}s" if hours else f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def batched_text(requests: int) -> str:
    """What the reports (job summary, PR comment) say of the requests sent through a batch API."""
    return (f"Of which through a batch API (`--bineval-batch`): {_n(requests, 'request')}, at its batch price "
            "(about half the normal price).")


def batch_lines(summary: BatchSummary, regressions: RegressionReport | None = None) -> list[Line]:
    """What was batched, what it cost at the batch price, how long the run waited, and every request that was
    not answered by a batch (asked directly at the full price, or made a judge error), the regression gate's
    re-asks of flipped questions (``regressions``: this run against its baseline) among them."""
    u = summary.usage
    if u.unpriced_requests and not u.cost_usd:
        cost = "unpriced (litellm has no batch price for the model)"
    else:
        cost = cost_text(u.cost_usd, u.unpriced_requests) + " at the batch price"
    sent = f"{_n(summary.submitted, 'request')} sent in {_n(summary.batches, 'batch', 'batches')}"
    if summary.resumed:
        sent += f", {_n(summary.resumed, 'batch', 'batches')} submitted earlier waited for"
    lines: list[Line] = []
    if summary.submitted or summary.resumed or summary.answered or summary.failed:
        lines.append((f"batch: {sent} ({_n(summary.rounds, 'round')}); {summary.answered} answered, "
                      f"{summary.failed} failed; waited {duration_text(summary.seconds)}; the replies fetched cost "
                      f"{cost}", {"bold": True}))
    direct = []
    if summary.retried:
        direct.append(f"{_n(summary.retried, 'request')} the batch failed asked again directly")
    if summary.missed:
        direct.append(f"{_n(summary.missed, 'request')} in no batch asked directly (an output that changed between "
                      "the two runs of its test, or a request after a failed one)")
    if summary.in_process:
        direct.append(f"{_n(summary.in_process, 'request')} of in-process models asked directly (no batch API)")
    confirmation = regressions.confirmation if regressions is not None else None
    if confirmation is not None and confirmation.requests:
        direct.append(f"the regression gate's {_n(confirmation.requests, 're-ask')} of flipped questions asked "
                      "directly after the tests (each waits for the answer before it)")
    if direct:
        lines.append(("batch: " + "; ".join(direct) + " (at the full price)", {"yellow": True}))
    if summary.unused:
        were = "was" if summary.unused == 1 else "were"
        lines.append((f"batch: {_n(summary.unused, 'reply', 'replies')} fetched by this run {were} not used by its "
                      "own tests (another worker or shard used them, or an output changed): counted here", {}))
    return lines


def progress_line(batches: int, finished: int, total: int, done: int, failed: int, seconds: float) -> str:
    """The line shown while a run waits for its batches."""
    return (f"bineval batch: {_n(batches, 'batch', 'batches')}, {finished} finished; {total} requests: submitted "
            f"{total}, in progress {max(0, total - done - failed)}, done {done}, failed {failed} "
            f"({duration_text(seconds)})")
