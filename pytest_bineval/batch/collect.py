"""``assert_passes`` in a first pass of ``--bineval-batch``: the checklist and the verdicts are asked as in a normal
run (every request the seam cannot answer is recorded for the next batch and fails at once), nothing is recorded
for the run, and nothing is raised that a normal run might not raise: the test goes on to its next assertion, so
that one first pass collects the requests of every assertion of a test.

The one exception raised is a failure below threshold whose every question was answered (from replies an earlier
batch brought): the final pass will fail the test there too, and what follows the assertion is not needed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from ..errors import BinevalAssertionError, BinevalError
from ..models import Evaluation
from .seam import BatchSeam


class Assertion(Protocol):
    """What this module reads of an :class:`~pytest_bineval.assertions.AssertionRequest` (a dataclass)."""

    @property
    def scope(self) -> Any: ...
    @property
    def task(self) -> str | None: ...
    @property
    def model(self) -> str | None: ...


A = TypeVar("A", bound=Assertion)


async def collected(req: A, judge: Callable[[A], Awaitable[Evaluation]]) -> Evaluation:
    """``judge(req)`` in a first pass (see the module). When the run rewrites every pin
    (``--bineval-update-checklists=all``: the seam's ``rewrite_pins``), the first pass writes every checklist anew,
    as the final pass will (the test's context without its pin file). Returns the evaluation, or one without
    verdicts when it could not be judged yet."""
    engine = req.scope.engine
    seam = engine.batch
    rewrite_pins = isinstance(seam, BatchSeam) and seam.rewrite_pins
    if rewrite_pins and getattr(req.scope, "pin_path", None) is not None:
        req = dataclasses.replace(req, scope=dataclasses.replace(req.scope, pin_path=None))  # type: ignore[type-var]
    try:
        return await judge(req)
    except BinevalAssertionError:
        raise
    except BinevalError:  # not judged yet (its requests are recorded), or not judgeable: the final pass says
        return Evaluation(task=req.task or "", model=req.model or engine.settings.judge_model, dimensions=[],
                          verdicts=[])
