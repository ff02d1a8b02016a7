"""What ``--bineval-batch`` did in a run: :class:`BatchSummary`, a field of the run's ledger and of its report.

The batch's requests are also in the run's usage (its totals): the batch's replies were fetched into the reply
cache, and each of those replies is counted once, by the run that fetched it, at the batch price (litellm's
``*_batches`` prices; "unpriced" where litellm has none). The final pass of the run reads them from the cache.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..models import Usage


class BatchSummary(BaseModel):
    """Counts of one run's batch work (merged over pytest-xdist workers and shards: counts add, the waiting time
    and the rounds are the longest of them)."""

    rounds: int = Field(default=0, description="first passes that found requests to send (a request that depends "
                                               "on an earlier reply, an explanation after a no, waits a round)")
    batches: int = Field(default=0, description="batches this run submitted")
    resumed: int = Field(default=0, description="batches submitted earlier (an interrupted run, another worker or "
                                                "shard sharing the cache) that this run waited for instead")
    submitted: int = Field(default=0, description="requests this run put into batches")
    answered: int = Field(default=0, description="replies this run fetched from finished batches into the cache")
    failed: int = Field(default=0, description="requests a batch failed or let expire, or whose reply was unusable")
    retried: int = Field(default=0, description="of those, asked directly (--bineval-batch-failures direct)")
    missed: int = Field(default=0, description="requests the final pass asked directly because no batch had them "
                                               "(an output that changed between the two passes, or a request "
                                               "after a failed one)")
    unused: int = Field(default=0, description="replies this run fetched that its final pass did not use (another "
                                               "worker or shard used them, or an output changed): counted all the "
                                               "same")
    in_process: int = Field(default=0, description="requests of in-process models (the embedded model), which have "
                                                   "no batch API: asked directly")
    usage: Usage = Field(default_factory=Usage, description="what the replies this run fetched cost, at the batch "
                                                            "price (part of the run's totals)")
    seconds: float = Field(default=0.0, description="time spent waiting for batches (submission to last fetch)")

    @property
    def used(self) -> bool:
        """Whether the run did any batch work (a run without --bineval-batch has nothing to say)."""
        return self != BatchSummary()

    def __add__(self, other: BatchSummary) -> BatchSummary:
        return BatchSummary(
            rounds=max(self.rounds, other.rounds), batches=self.batches + other.batches,
            resumed=self.resumed + other.resumed, submitted=self.submitted + other.submitted,
            answered=self.answered + other.answered, failed=self.failed + other.failed,
            retried=self.retried + other.retried, missed=self.missed + other.missed,
            unused=self.unused + other.unused, in_process=self.in_process + other.in_process,
            usage=self.usage + other.usage, seconds=max(self.seconds, other.seconds))
