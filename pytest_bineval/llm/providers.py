"""In-process litellm providers: the embedded model (``bineval/...``) and any handler a user registers.

litellm keeps its custom providers in ``litellm.custom_provider_map``; this module adds to it, once
per provider name, so that ``litellm.completion(model="<provider>/<name>")`` reaches the handler
through litellm's ordinary code path.
"""

from __future__ import annotations

import logging
from typing import Any

from ..errors import BinevalError
from ._litellm import import_litellm
from .local import DEFAULT_MODEL, EMBEDDED_CONTEXT, EMBEDDED_PROVIDER, is_embedded, make_embedded_handler

__all__ = ["DEFAULT_MODEL", "continues_prefill", "embedded_model", "ensure_provider", "is_embedded",
           "register_provider", "registered_handler"]


def register_provider(name: str, handler: Any) -> None:
    """Register (or replace) an in-process litellm provider ``name`` served by ``handler``."""
    litellm = import_litellm()
    entries = [e for e in (litellm.custom_provider_map or []) if e.get("provider") != name]
    entries.append({"provider": name, "custom_handler": handler})
    litellm.custom_provider_map = entries
    from litellm.utils import custom_llm_setup

    custom_llm_setup()  # type: ignore[no-untyped-call]


def registered_handler(name: str) -> Any | None:
    for entry in import_litellm().custom_provider_map or []:
        if entry.get("provider") == name:
            return entry["custom_handler"]
    return None


def ensure_provider(model: str) -> None:
    """Make sure the provider a model string names is reachable (registers the embedded one lazily)."""
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
    ensure_provider(model)
    handler = registered_handler(model.split("/", 1)[0]) if "/" in model else None
    return bool(getattr(handler, "continues_prefill", False))


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
