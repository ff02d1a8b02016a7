"""Fixtures of the example suite: the articles, their summaries, and the task every test is judged against."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from summarizer import PROMPT_PATH, summarize

DATA = Path(__file__).parent / "data"

# What the summaries are made for, in plain words. The pinned checklists under __bineval__/ belong to this
# text (they record its digest): change it and --bineval-strict reports them stale until they are re-pinned.
SUMMARY_TASK = (
    "Summarize the news article in 2-3 sentences for a busy reader, using only facts from the article."
)


@pytest.fixture
def bineval_task() -> str:
    """The task of every test in this directory that does not name one in its bineval marker."""
    return SUMMARY_TASK


@pytest.fixture(scope="session")
def articles() -> dict[str, str]:
    """The articles under tests/data/, by file stem."""
    return {path.stem: path.read_text(encoding="utf-8").strip() for path in sorted(DATA.glob("*.txt"))}


@pytest.fixture(scope="session")
def summary_of(articles: dict[str, str]) -> Callable[[str], str]:
    """``summary_of(name)``: the app's summary of an article, made once per session and prompt text and shared by
    tests (``--bineval-optimize`` runs the tests again with a candidate prompt in the file)."""
    made: dict[tuple[str, str], str] = {}

    def get(name: str) -> str:
        key = (name, PROMPT_PATH.read_text(encoding="utf-8"))
        if key not in made:
            made[key] = summarize(articles[name])
        return made[key]

    return get
