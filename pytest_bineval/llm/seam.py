"""The seam through which ``--bineval-batch`` (:mod:`pytest_bineval.batch`) meets the request path.

:meth:`~pytest_bineval.llm.client.LLMClient.send` asks a client's seam first: the seam answers the request with
a reply a batch brought (or an in-process model gave in the first pass), records it for the next batch and
raises :class:`~pytest_bineval.errors.CallError` (the first pass sends nothing), or returns None, and the request
is sent as usual. A leaf module: it imports nothing of this package but types.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from ..errors import CallError
from ..models import Usage
from .caching import Points
from .parsing import ReplyParts

R = TypeVar("R")


class Deferred(CallError):
    """A request recorded for the next batch in a first pass (nothing was sent): what waits for its reply cannot
    go on, but what does not depend on it can (the other dimensions' questions of a checklist)."""


class RequestSeam(Protocol):
    """What :class:`~pytest_bineval.llm.client.LLMClient` asks before it sends a request (see the module)."""

    @property
    def collecting(self) -> bool:
        """Whether this is a first pass of a batch run (requests are recorded, nothing is sent)."""
        ...

    async def answer(self, client: Any, request: dict[str, Any], read: Callable[[ReplyParts], R], *,
                     schema: tuple[str, dict[str, Any]] | None,
                     cache_prefix: Points | None) -> tuple[R, ReplyParts, Usage] | None:
        """``read``'s value of the reply to ``request`` (the logical request of ``client``, an
        :class:`~pytest_bineval.llm.client.LLMClient`), the reply and what it cost; None: send it as usual.
        Raises :class:`~pytest_bineval.errors.CallError` for a request recorded for a batch, or one a batch
        failed when such failures are judge errors."""
        ...
