"""A small LLM app: summarize a news article, and answer a reader's question about it, through litellm.

The prompts are files (``prompts/summarize.md``, ``prompts/answer.md``), so that changing one is a reviewed
change like any other; the model is any litellm model string, the embedded offline model of pytest-bineval by
default.
"""

from __future__ import annotations

import os
import re
from functools import cache
from pathlib import Path

from pytest_bineval import DEFAULT_MODEL, ensure_provider

__all__ = ["ANSWER_PROMPT_PATH", "PROMPT_PATH", "EmptySummaryError", "answer_question", "prompt_template",
           "render_prompt", "summarize"]

PROMPT_PATH = Path(__file__).resolve().parent.parent / "prompts" / "summarize.md"
ANSWER_PROMPT_PATH = PROMPT_PATH.with_name("answer.md")
MAX_TOKENS = 160  # 2-3 sentences fit easily; a runaway reply is cut here
ANSWER_MAX_TOKENS = 200
# Longer free-form replies of a small model fall into repeating one sentence: penalise repeated tokens.
ANSWER_SAMPLING = {"frequency_penalty": 0.6, "presence_penalty": 0.6}
_ARTICLE_TAG = re.compile(r"</?\s*article\s*>", re.IGNORECASE)
_SECTION = re.compile(r"^## (system|user)\s*$", re.MULTILINE)


class EmptySummaryError(RuntimeError):
    """The model replied with nothing (or only whitespace)."""


def prompt_template(path: Path = PROMPT_PATH) -> tuple[tuple[str, str], ...]:
    """The (role, text) turns of a prompt file: a ``## system`` and a ``## user`` section with {{article}}.

    Read at every call (parsed once per text): ``pytest --bineval-optimize`` measures a candidate prompt by writing
    it into the file and running the tests again in the same session."""
    return _parse_template(str(path), path.read_text(encoding="utf-8"))


@cache
def _parse_template(path: str, source: str) -> tuple[tuple[str, str], ...]:
    parts = _SECTION.split(source)
    turns = tuple((parts[i], parts[i + 1].strip()) for i in range(1, len(parts) - 1, 2))
    if [role for role, _ in turns] != ["system", "user"] or "{{article}}" not in turns[1][1]:
        raise ValueError(f"{path} needs a '## system' and a '## user' section with {{{{article}}}}")
    return turns


def render_prompt(article: str, path: Path = PROMPT_PATH, **values: str) -> list[dict[str, str]]:
    """The chat messages for one article (and the prompt's other placeholders); the article cannot close its
    own <article> markers."""
    safe = _ARTICLE_TAG.sub(lambda m: m.group(0).replace("<", "&lt;").replace(">", "&gt;"), article.strip())
    messages = []
    for role, text in prompt_template(path):
        for name, value in values.items():
            text = text.replace("{{" + name + "}}", value.strip())
        messages.append({"role": role, "content": text.replace("{{article}}", safe)})
    return messages


def summarize(article: str, *, model: str | None = None) -> str:
    """A 2-3 sentence summary of ``article``.

    ``model``: a litellm model string; else ``$SUMMARIZER_MODEL``; else the embedded offline model.
    """
    if not article.strip():
        raise ValueError("article is empty")
    return _complete(render_prompt(article), model, MAX_TOKENS)


def answer_question(article: str, question: str, *, model: str | None = None) -> str:
    """A few sentences answering a reader's ``question`` about ``article`` (same models as :func:`summarize`)."""
    if not article.strip() or not question.strip():
        raise ValueError("article and question must not be empty")
    return _complete(render_prompt(article, ANSWER_PROMPT_PATH, question=question), model, ANSWER_MAX_TOKENS,
                     **ANSWER_SAMPLING)


def _complete(messages: list[dict[str, str]], model: str | None, max_tokens: int, **sampling: float) -> str:
    model = model or os.environ.get("SUMMARIZER_MODEL") or DEFAULT_MODEL
    # litellm downloads a price list when it is imported unless told not to: this app must run offline.
    # (Imported here, not at the top: it takes seconds, and `pytest --collect-only` should not wait for it.)
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    ensure_provider(model)  # registers the embedded model with litellm; no-op for hosted models
    response = litellm.completion(
        model=model,
        messages=messages,
        temperature=0,
        max_tokens=max_tokens,
        **sampling,
    )
    text = (response.choices[0].message.content or "").strip()
    if not text:
        raise EmptySummaryError(f"{model} returned an empty reply")
    return text
