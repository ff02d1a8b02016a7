"""A check run inside an evaluation: bounded like a judge request, off the event loop.

A check runs in a thread of its own, so the event loop goes on with the judge's requests meanwhile (a ``regex``
check releases the GIL while it matches). It may take ``seconds``: a pattern is matched with that time limit (the
``regex`` package stops the match), and the evaluation waits no longer than that and a grace second for any check
(one that still runs then is left to finish in its daemon thread, and the question is an error all the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import CheckTimeout
from .catalogue import Check, CheckResult, parse_check

if TYPE_CHECKING:
    from ..conversation import Conversation

GRACE_SECONDS = 1.0  # beyond its bound, the time a check's thread is given to end (a pattern ends at the bound)


async def arun_check(spec: Mapping[str, Any] | Check, output: str | Conversation, seconds: float) -> CheckResult:
    """The result of the check ``spec`` on ``output``, within ``seconds``: :class:`CheckTimeout` naming the bound
    when it takes longer; the check's own errors (a missing extra) are raised as they are."""
    check = parse_check(spec)
    loop = asyncio.get_running_loop()
    done: asyncio.Future[CheckResult] = loop.create_future()

    def settle(result: CheckResult | None, error: BaseException | None) -> None:
        if done.done():  # waited no longer (the evaluation moved on)
            return
        if error is not None:
            done.set_exception(error)
        else:
            assert result is not None
            done.set_result(result)

    def work() -> None:
        result: CheckResult | None = None
        error: BaseException | None = None
        try:
            result = check.run(output, seconds)
        except BaseException as exc:  # handed to the waiting evaluation, which raises it there
            error = exc
        with contextlib.suppress(RuntimeError):  # the event loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=work, name=f"bineval-check-{check.kind.name}", daemon=True).start()
    try:
        return await asyncio.wait_for(done, seconds + GRACE_SECONDS)
    except asyncio.TimeoutError:
        size = f"{len(output):,} characters" if isinstance(output, str) else f"a conversation of {len(output)} turns"
        raise CheckTimeout(f"the check {check.kind.name!r} did not finish within {seconds:g} s on the response "
                           f"({size})") from None
