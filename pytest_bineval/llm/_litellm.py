"""The one place that imports litellm (a leaf module: it imports nothing of this package).

litellm takes seconds of CPU to import (per process: every pytest-xdist worker, every shard). A process whose judge
is an OpenAI-compatible server that litellm does not know (the direct path, :mod:`.openai_compat`) never needs it:
what it asks of litellm is whether litellm knows a model (:func:`litellm_knows`: its packaged price list, read
without importing it) and how many tokens a text has (:func:`tiktoken_count`: the tokenizer litellm uses for a
model it does not know, from the files litellm ships).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Any

_IMPORTED: list[Any] = []  # litellm once imported and set up here: the process's, as sys.modules is


def import_litellm() -> Any:
    """Import litellm lazily and offline-safe (the set-up runs once per process; later calls return the module).

    litellm downloads a price list when it is imported unless ``LITELLM_LOCAL_MODEL_COST_MAP`` is set (and its
    Anthropic provider a beta-headers list unless ``LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS`` is), so they are set
    here, right before the import and only when the caller has not set it: importing
    pytest-bineval leaves the environment alone; only a process that reaches a model imports litellm.
    litellm is made quiet (:func:`quiet`) when this is its first import.
    """
    if _IMPORTED:
        return _IMPORTED[0]
    first = "litellm" not in sys.modules
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # and its Anthropic provider fetches a beta-headers list from GitHub at the first request unless told not to
    os.environ.setdefault("LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS", "True")
    # litellm's provider modules load lazily and pydantic warns about their ReadOnly TypedDicts: noise
    # for our users, filtered by its exact message (pytest applies the same filter through the plugin).
    warnings.filterwarnings("ignore", message=r".*ReadOnly.*qualifier", category=UserWarning)
    # litellm.acompletion runs part of a request in a thread that returns a coroutine; a request cancelled then
    # (the deadline of an evaluation, or its end after a context overflow) leaves that coroutine unawaited
    warnings.filterwarnings("ignore", message=r"coroutine '.*acompletion' was never awaited", category=RuntimeWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        import litellm

        # build the lazily-created response schemas now, inside this filter
        litellm.ModelResponse(choices=[{"message": {"role": "assistant", "content": ""}}])
    if first:  # a process that imported litellm itself keeps its own settings
        quiet(litellm)
    _IMPORTED.append(litellm)
    return litellm


def quiet(litellm: Any) -> None:
    """Nothing from litellm on stdout/stderr: no "Give Feedback / Get Help" or "Provider List" banners (it prints
    them on errors and on cost lookups of unknown models), no log lines below ERROR. Errors reach the user as
    pytest-bineval's own messages (judge errors with their cause)."""
    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        if logger.level < logging.ERROR:
            logger.setLevel(logging.CRITICAL)


def imported_litellm() -> Any | None:
    """litellm if this process has imported it (then models registered at run time count), else None."""
    return _IMPORTED[0] if _IMPORTED else sys.modules.get("litellm")


def _package() -> Path | None:
    spec = importlib.util.find_spec("litellm")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    return Path(locations[0]) if locations else None


@functools.cache
def _packaged_models() -> frozenset[str] | None:
    """The model names of litellm's packaged price list (``litellm.model_cost`` when it is imported offline, as
    :func:`import_litellm` imports it), or None when that is not what litellm would use (no such file, or
    ``LITELLM_LOCAL_MODEL_COST_MAP`` set otherwise: litellm would fetch its list)."""
    if os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP", "True").strip().lower() != "true":
        return None
    package = _package()
    if package is None:
        return None
    try:
        prices = json.loads((package / "model_prices_and_context_window_backup.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return frozenset(prices) if isinstance(prices, dict) else None


def litellm_knows(*names: str) -> bool:
    """Whether litellm has a price (and so model-specific rules) for any of ``names``: its ``model_cost`` when it
    is imported, else its packaged price list (litellm is imported to ask when that cannot be read)."""
    litellm = imported_litellm()
    known = _packaged_models() if litellm is None else None
    if known is None:
        litellm = litellm or import_litellm()
        return any(name in litellm.model_cost for name in names)
    return any(name in known for name in names)


@functools.cache
def _cl100k() -> Any:
    package = _package()
    if package is not None:  # the files litellm ships (and points tiktoken to when it is imported): no download
        os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(package / "litellm_core_utils" / "tokenizers"))
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def tiktoken_count(text: str) -> int:
    """The tokens of ``text`` as litellm counts them for a model it does not know (tiktoken's cl100k_base)."""
    return len(_cl100k().encode(text, disallowed_special=()))
