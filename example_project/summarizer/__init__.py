"""A small LLM app: summarize a news article through litellm.

The prompt is a file (``prompts/summarize.md``), so that changing it is a reviewed change like any other;
the model is any litellm model string, the embedded offline model of pytest-bineval by default.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

from pytest_bineval import DEFAULT_MODEL, ensure_provider

__all__ = ["PROMPT_PATH", "EmptySummaryError", "prompt_template", "render_prompt", "summarize"]

PROMPT_PATH = Path(__file__).resolve().parent.parent / "prompts" / "summarize.md"
MAX_TOKENS = 160  # 2-3 sentences fit easily; a runaway reply is cut here
_ARTICLE_TAG = re.compile(r"</?\s*article\s*>", re.IGNORECASE)
_SECTION = re.compile(r"^## (system|user)\s*$", re.MULTILINE)


class EmptySummaryError(RuntimeError):
    """The model replied with nothing (or only whitespace)."""


@cache
def prompt_template() -> tuple[tuple[str, str], ...]:
    """The (role, text) turns of ``prompts/summarize.md``: a ``## system`` and a ``## user`` section."""
    parts = _SECTION.split(PROMPT_PATH.read_text(encoding="utf-8"))
    turns = tuple((parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2))
    if [role for role, _ in turns] != ["system", "user"] or "{{article}}" not in turns[1][1]:
        raise ValueError(f"{PROMPT_PATH} needs a '## system' and a '## user' section with {{{{article}}}}")
    return turns


def render_prompt(article: str) -> list[dict[str, str]]:
    """The chat messages for one article; the article cannot close its own <article> markers."""
    safe = _ARTICLE_TAG.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), article.strip())
    return [{"role": role, "content": text.replace("{{article}}", safe)} for role, text in prompt_template()]


def summarize(article: str, *, model: str | None = None) -> str:
    """A 2-3 sentence summary of ``article``.

    ``model``: a litellm model string; else ``$SUMMARIZER_MODEL``; else the embedded offline model.
    """
    if not article.strip():
        raise ValueError("article is empty")
    model = model or os.environ.get("SUMMARIZER_MODEL") or DEFAULT_MODEL
    # litellm downloads a price list when it is imported unless told not to: this app must run offline.
    # (Imported here, not at the top: it takes seconds, and `pytest --collect-only` should not wait for it.)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    ensure_provider(model)  # registers the embedded model with litellm; no-op for hosted models
    response = litellm.completion(
        model=model,
        messages=render_prompt(article),
        temperature=0,
        max_tokens=MAX_TOKENS,
    )
    text = (response.choices[0].message.content or "").strip()
    if not text:
        raise EmptySummaryError(f"{model} returned an empty summary")
    return text
