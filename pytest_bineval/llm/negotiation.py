"""Structured-output negotiation: which form of ``response_format`` a model's provider accepts.

A request first asks for ``json_schema``. A provider that rejects it (an error that names
``response_format`` / ``json_schema``, as llama.cpp's server does with HTTP 500) is asked for
``json_object`` (with the schema alongside, which llama.cpp and others enforce), and one that rejects that too
gets no ``response_format`` at all: the prompt asks for JSON and the reply parser reads it. What a model
accepts is learned once per :class:`FormatNegotiator` (the engine keeps one per session) and remembered; with the
reply cache on, a form learned by a refusal is also kept in the cache (keyed by model and API base:
:func:`form_key`), so that the next run starts from it and a server that refuses ``json_schema`` costs one failed
request once, not once per run. The cache key of a reply is that of the logical request, so a cached reply is
served whatever form made it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Literal

from ..models import STRUCTURED_OUTPUT_FORMS
from .accounting import TokenCounter
from .cache import cache_key
from .streaming import StreamNegotiator

Form = Literal["json_schema", "json_object", "prompt"]
FORMS: tuple[Form, ...] = ("json_schema", "json_object", "prompt")
assert FORMS == STRUCTURED_OUTPUT_FORMS


def response_format(name: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The strict ``json_schema`` form (what the cache key is computed from)."""
    return {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}


def format_for(form: Form, name: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The ``response_format`` parameter of ``form`` (None: send none)."""
    if form == "json_schema":
        return response_format(name, schema)
    if form == "json_object":
        return {"type": "json_object", "schema": schema}
    return None


_MARKERS = ("response_format", "json_schema", "json_object", "response format", "structured output")


def rejects_format(exc: BaseException) -> bool:
    """Whether a provider error says the structured-output request itself is what it cannot take."""
    text = str(exc).lower()
    return any(marker in text for marker in _MARKERS)


def initial_form(model: str) -> Form:
    """``json_schema``, unless litellm knows this model and says it takes no schema (then ``json_object``) or no
    ``response_format`` at all (then ``prompt``). A model litellm does not know, and an in-process provider, are
    asked for ``json_schema`` (a transport of :mod:`.transports` without importing litellm)."""
    from ._litellm import import_litellm, imported_litellm, litellm_knows
    from .transports import transport_for

    if transport_for(model) is not None:
        return "json_schema"  # an in-process transport (a scripted fake) takes what it is given
    if imported_litellm() is None and not litellm_knows(model, model.split("/", 1)[-1]):
        return "json_schema"  # (no provider is registered in a litellm not imported: its price list is all)
    litellm = import_litellm()
    provider = model.split("/", 1)[0] if "/" in model else ""
    if any(entry.get("provider") == provider for entry in litellm.custom_provider_map or []):
        return "json_schema"  # an in-process provider (the embedded model, a test fake) takes what it is given
    try:
        if model not in litellm.model_cost and model.split("/", 1)[-1] not in litellm.model_cost:
            return "json_schema"
        params = litellm.get_supported_openai_params(model=model) or []
        if "response_format" not in params:
            return "prompt"
        if not litellm.supports_response_schema(model=model):
            return "json_object"
    except Exception:
        return "json_schema"
    return "json_schema"


def form_key(model: str, api_base: str | None) -> str:
    """The reply-cache key under which the form ``model`` at ``api_base`` takes is remembered across runs."""
    return cache_key({"kind": "structured-output form", "model": model, "api_base": api_base})


def remembered_form(entry: dict[str, Any] | None) -> Form | None:
    """The form of a :func:`form_key` entry (None: none, or not a form)."""
    form = (entry or {}).get("form")
    return next((f for f in FORMS if f == form), None)


class FormatNegotiator:
    """Per model, the structured-output form to ask for, and (``streaming``) whether it streams; thread- and
    task-safe (requests run concurrently). Also what the session knows of each provider's replies: ``tokens``
    (token estimates) and what was done once per model (:meth:`first`)."""

    def __init__(self) -> None:
        self.streaming = StreamNegotiator()
        self.tokens = TokenCounter()
        self._forms: dict[str, Form] = {}
        self._once: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def form(self, model: str, remembered: Callable[[str], Form | None] | None = None) -> Form:
        """The form to ask ``model`` for: learned this session, else ``remembered`` (from an earlier run), else
        :func:`initial_form`."""
        with self._lock:
            known = self._forms.get(model)
        if known is not None:
            return known
        first = (remembered(model) if remembered is not None else None) or initial_form(model)
        with self._lock:
            return self._forms.setdefault(model, first)

    def first(self, what: str, model: str) -> bool:
        """True the first time ``what`` is asked for ``model`` (something done or said once per model: its
        impossible usage said, its provider's code warmed up)."""
        with self._lock:
            if (what, model) in self._once:
                return False
            self._once.add((what, model))
            return True

    def downgrade(self, model: str, rejected: Form) -> tuple[Form | None, bool]:
        """After ``rejected`` was refused: (the form to use now or None when none is left, whether this call
        changed it). Concurrent requests that were refused the same form move on together, once."""
        with self._lock:
            current = self._forms.get(model, rejected)
            if FORMS.index(current) > FORMS.index(rejected):
                return current, False  # another request already moved past it
            if rejected == FORMS[-1]:
                return None, False
            new = FORMS[FORMS.index(rejected) + 1]
            self._forms[model] = new
            return new, True

    def downgraded(self) -> dict[str, str]:
        """Models that do not take ``json_schema`` -> the form used instead."""
        with self._lock:
            return {m: f for m, f in self._forms.items() if f != "json_schema"}
