"""Provider prompt caching: where cache breakpoints must be sent, and how long a prefix must be to be cached.

The judge's prompt puts what every question of an assertion shares first (instructions, task, source, output)
and the question last. OpenAI (and Azure OpenAI) cache such a prefix on their own; Anthropic's models (directly,
on Bedrock, on Vertex AI) cache only up to a *breakpoint*: a content block marked
``"cache_control": {"type": "ephemeral"}``, which litellm passes on. :func:`with_breakpoints` marks the end of the
source and the end of the shared prefix of a request's messages that way, for the models of
:func:`needs_breakpoints` only.

Each provider caches only a prefix of at least :func:`cache_minimum` tokens (1024 for OpenAI's and Anthropic's
models, the lowest minimum they document; some models, e.g. Claude Haiku, need more). A shorter one is billed in
full at every question: the summary says so once per model, rather than guessing at savings.

A leaf module: it imports nothing of this package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CACHE_MINIMUM_TOKENS", "EPHEMERAL", "Points", "cache_minimum", "needs_breakpoints", "with_breakpoint",
           "with_breakpoints"]

CACHE_MINIMUM_TOKENS = 1024
EPHEMERAL: dict[str, str] = {"type": "ephemeral"}


def _claude(name: str) -> bool:
    name = name.lower()
    return "claude" in name or name.startswith("anthropic.") or ".anthropic." in name


def needs_breakpoints(model: str) -> bool:
    """Whether ``model``'s provider caches a prompt only up to a ``cache_control`` breakpoint: ``anthropic/...``,
    and Claude on ``bedrock/...`` and ``vertex_ai/...``."""
    provider, slash, name = model.partition("/")
    if not slash:
        return False
    if provider == "anthropic":
        return True
    return provider in ("bedrock", "vertex_ai") and _claude(name)


def cache_minimum(model: str, api_base: str | None) -> int | None:
    """The fewest prompt tokens ``model``'s provider caches (None: no known minimum, or no prompt caching known).
    ``openai/`` and ``azure/`` models count only without ``api_base``: an OpenAI-compatible server of one's own
    (llama.cpp, vLLM) has a cache of its own without such a minimum."""
    provider, slash, _ = model.partition("/")
    if not slash:
        return None
    if needs_breakpoints(model):
        return CACHE_MINIMUM_TOKENS
    if provider in ("openai", "azure") and api_base is None:
        return CACHE_MINIMUM_TOKENS
    return None


Points = tuple[tuple[int, int], ...]  # (message index, characters) where breakpoints go, in order


def with_breakpoint(messages: list[dict[str, Any]], at: tuple[int, int]) -> list[dict[str, Any]]:
    """``messages`` with a cache breakpoint after the first ``at[1]`` characters of message ``at[0]`` (its text
    split into two content blocks, the first marked ``cache_control``); unchanged when the split is out of range
    or the message's content is not text."""
    return with_breakpoints(messages, (at,))


def with_breakpoints(messages: list[dict[str, Any]], points: Points) -> list[dict[str, Any]]:
    """``messages`` with a cache breakpoint at each of ``points`` (see :func:`with_breakpoint`; a message split at
    several points becomes that many marked blocks and the rest). The judge sends two: after the source (shared by
    every assertion about that source: a suite judging many outputs of one input reads it from the cache) and
    after the output (shared by the questions of one assertion). Points out of range are left out."""
    by_message: dict[int, list[int]] = {}
    for index, chars in points:
        if 0 <= index < len(messages):
            by_message.setdefault(index, []).append(chars)
    out = list(messages)
    changed = False
    for index, cuts in by_message.items():
        content = messages[index].get("content")
        if not isinstance(content, str):
            continue
        cuts = sorted({c for c in cuts if 0 < c <= len(content)})
        if not cuts:
            continue
        blocks: list[dict[str, Any]] = []
        start = 0
        for cut in cuts:
            blocks.append({"type": "text", "text": content[start:cut], "cache_control": dict(EPHEMERAL)})
            start = cut
        if start < len(content):
            blocks.append({"type": "text", "text": content[start:]})
        out[index] = {**messages[index], "content": blocks}
        changed = True
    return out if changed else messages
