"""In-process transports: providers that answer a request inside this process without litellm.

A transport registered under a provider name (``register_transport("fake", t)``) serves every model string
``fake/...``: :class:`~pytest_bineval.llm.client.LLMClient` hands it the request it would have given
``litellm.acompletion`` (model, messages, decoding parameters, ``response_format`` ...; the timeout is the
client's) and reads the OpenAI-shaped chat completion it returns (a dict or an object) with the same parser as
any other reply; every request is counted the same way, failed ones too. A transport's replies are unpriced
(cost unknown) and nothing about them imports litellm. The scripted fakes of :mod:`pytest_bineval.testing` are
transports; the embedded model, OpenAI-compatible servers and hosted models go through litellm.

The registry is the process's, as litellm's ``custom_provider_map`` is: a provider is code, not run state.
A leaf module: it imports nothing of this package.
"""

from __future__ import annotations

import threading
from typing import Any, Protocol, runtime_checkable

__all__ = ["Transport", "register_transport", "transport_for", "unregister_transport"]


@runtime_checkable
class Transport(Protocol):
    """What an in-process provider implements. ``continues_prefill``: whether it continues a final assistant
    message marked ``"prefix": True`` (as the embedded model does) instead of answering it."""

    continues_prefill: bool

    async def acompletion(self, request: dict[str, Any]) -> Any:
        """An OpenAI-shaped chat completion (``{"choices": [{"message": {"content": ...}}], "usage": ...}``) for
        ``request``; an exception is a failed request (classified like any provider error)."""
        ...

    async def aembedding(self, model: str, inputs: list[str]) -> list[list[float]]:
        """One vector per input, in order."""
        ...


_lock = threading.Lock()
_transports: dict[str, Transport] = {}


def register_transport(provider: str, transport: Transport) -> None:
    """Serve model strings ``<provider>/...`` with ``transport`` (replacing any transport of that name)."""
    with _lock:
        _transports[provider] = transport


def unregister_transport(provider: str) -> None:
    with _lock:
        _transports.pop(provider, None)


def transport_for(model: str) -> Transport | None:
    """The transport serving ``model`` (``<provider>/<name>``), or None (then litellm serves it)."""
    provider, slash, _ = model.partition("/")
    if not slash:
        return None
    with _lock:
        return _transports.get(provider)
