"""In-process providers: the embedded model (``bineval/...``), any litellm handler a user registers, and the
transports of :mod:`.transports` (the scripted fakes), which litellm never sees.

litellm keeps its custom providers in ``litellm.custom_provider_map``; this module adds to it, once
per provider name, so that ``litellm.completion(model="<provider>/<name>")`` reaches the handler
through litellm's ordinary code path. A model served by a transport needs no set-up and imports no litellm.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from typing import Any

from ..errors import BinevalError
from ._litellm import import_litellm, imported_litellm
from .local import DEFAULT_MODEL, EMBEDDED_CONTEXT, EMBEDDED_PROVIDER, is_embedded, make_embedded_handler
from .transports import transport_for, unregister_transport

__all__ = ["DEFAULT_MODEL", "aembedding", "continues_prefill", "embedded_model", "ensure_provider", "is_embedded",
           "register_provider", "registered_handler", "warm_up"]


def register_provider(name: str, handler: Any) -> None:
    """Register (or replace) an in-process litellm provider ``name`` served by ``handler`` (it replaces a
    transport of that name, too)."""
    unregister_transport(name)
    litellm = import_litellm()
    entries = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != name]
    entries.append({"provider": name, "custom_handler": handler})
    litellm.custom_provider_map = entries
    from litellm.utils import custom_llm_setup

    custom_llm_setup()  # type: ignore[no-untyped-call]


def registered_handler(name: str) -> Any | None:
    """The in-process handler registered in litellm as provider ``name``, or None (litellm not imported: none)."""
    litellm = imported_litellm()
    if litellm is None:
        return None
    for entry in litellm.custom_provider_map or []:
        if entry.get("provider") == name:
            return entry["custom_handler"]
    return None


def ensure_provider(model: str) -> None:
    """Make sure the provider a model string names is reachable (registers the embedded one lazily; a transport
    needs nothing)."""
    if transport_for(model) is not None:
        return
    if is_embedded(model) and registered_handler(EMBEDDED_PROVIDER) is None:
        handler = make_embedded_handler()
        register_provider(EMBEDDED_PROVIDER, handler)
        litellm_logger = logging.getLogger("LiteLLM")  # it warns that a free local model has no cache pricing
        level = litellm_logger.level
        litellm_logger.setLevel(logging.ERROR)
        try:
            _register_embedded_model_info(import_litellm())
        finally:
            litellm_logger.setLevel(level)


def continues_prefill(model: str) -> bool:
    """Whether ``model``'s provider continues a final assistant message marked ``"prefix": True`` instead
    of answering it: in-process providers say so with a ``continues_prefill`` attribute of their handler
    (the embedded model's is True); hosted providers are not assumed to."""
    if is_embedded(model):
        return True
    transport = transport_for(model)
    if transport is not None:
        return bool(getattr(transport, "continues_prefill", False))
    ensure_provider(model)
    handler = registered_handler(model.split("/", 1)[0]) if "/" in model else None
    return bool(getattr(handler, "continues_prefill", False))


# litellm modules its request path imports at the first real request (service-timing logger); loaded by warm_up too
_FIRST_REQUEST_MODULES = ("litellm._service_logger", "litellm.integrations.prometheus_services")


def warm_up(model: str, api_base: str | None) -> None:
    """Load litellm's code for ``model``'s provider now, not inside its first request (where it takes a second or
    more of a cold process, on a busy machine as long as a short timeout): a request and a streamed one answered by
    litellm's own ``mock_response``, which send nothing, and the modules its HTTP path loads at the first request.
    The caller's event loop waits meanwhile, as for any set-up, so that no concurrent request starts before it.
    In-process providers need none; a failure is ignored (the real request says what is wrong)."""
    if is_embedded(model) or transport_for(model) is not None:
        return
    if "/" in model and registered_handler(model.split("/", 1)[0]) is not None:
        return
    litellm = import_litellm()
    request: dict[str, Any] = {"model": model, "messages": [{"role": "user", "content": "warm-up"}],
                               "mock_response": '{"answer": "yes"}', "api_key": "bineval-warm-up",
                               "api_base": api_base, "max_tokens": 8, "drop_params": True}
    with contextlib.suppress(Exception):
        litellm.completion(**request)
        for _ in litellm.completion(**request, stream=True, stream_options={"include_usage": True}):
            pass
    for name in _FIRST_REQUEST_MODULES:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


async def aembedding(model: str, inputs: list[str], *, api_base: str | None = None,
                     timeout: float = 120.0) -> list[list[float]]:
    """One embedding vector per input from ``model``: its transport's, else ``litellm.aembedding``'s."""
    transport = transport_for(model)
    if transport is not None:
        return [list(v) for v in await transport.aembedding(model, list(inputs))]
    litellm = import_litellm()
    kwargs: dict[str, Any] = {"model": model, "input": list(inputs), "timeout": timeout}
    if api_base:
        kwargs["api_base"] = api_base
    response = await litellm.aembedding(**kwargs)
    data = sorted(response.data, key=lambda d: d["index"] if isinstance(d, dict) else d.index)
    return [list(d["embedding"] if isinstance(d, dict) else d.embedding) for d in data]


def _register_embedded_model_info(litellm: Any) -> None:
    litellm.register_model(
        {
            DEFAULT_MODEL: {
                "max_input_tokens": EMBEDDED_CONTEXT,
                "max_output_tokens": EMBEDDED_CONTEXT,
                "max_tokens": EMBEDDED_CONTEXT,
                "input_cost_per_token": 0.0,
                "output_cost_per_token": 0.0,
                "litellm_provider": EMBEDDED_PROVIDER,
                "mode": "chat",
            }
        }
    )


def embedded_model() -> Any:
    """The process's embedded :class:`~pytest_bineval.llm.local.EmbeddedModel` (loaded on first use)."""
    ensure_provider(DEFAULT_MODEL)
    handler = registered_handler(EMBEDDED_PROVIDER)
    if handler is None:  # pragma: no cover - ensure_provider registers it or raises
        raise BinevalError("the embedded model provider could not be registered")
    return handler.embedded
