"""A reader's open-ended question about an article, answered by the app and judged with question-specific
criteria (Qworld): what a good answer must contain depends on the question, so the criteria are written for
this question, each with importance points, and the score is points-weighted.

The criteria are pinned under __bineval__/test_answers/, one entry per question, with the tree they came from
(scenarios, perspectives, criteria, points, merges). With the embedded 135M model they were written by hand in
that format (see README.md): re-pin them with a capable model to see the method at work.
"""

from __future__ import annotations

import pytest
from pytest_bineval import assert_passes

from summarizer import answer_question

READER_QUESTION = (
    "I live on Skarra and take the ferry to my job in Port Ellin every morning. What should I do on Thursday "
    "and Friday?"
)


def question_with_context(article: str) -> str:
    """What the criteria are written for, and what the judge reads as the input: the question and its context."""
    return f"A reader asks about this news article.\n\nArticle:\n{article}\n\nReader's question: {READER_QUESTION}"


# criteria="qworld": criteria written for the question given as source= (not one checklist for the task);
# score="points": points earned minus penalties, over the positive points. THE THRESHOLD IS FOR THE TOY
# OFFLINE JUDGE (see pyproject.toml and README.md; it scores this answer 0.09 points, its answers being
# noise around P(yes) 0.5): with a capable judge use ~0.7.
@pytest.mark.bineval(
    task="Answer a reader's question about a news article, using the facts of the article.",
    criteria="qworld",
    score="points",
    threshold=0.05,
)
def test_reader_question(articles: dict[str, str]) -> None:
    article = articles["ferry_strike"]
    answer = answer_question(article, READER_QUESTION)
    assert_passes(answer, source=question_with_context(article))
