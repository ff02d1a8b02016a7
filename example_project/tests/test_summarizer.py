"""The summarizer's outputs, judged against a checklist of yes/no questions (BinEval).

The checklist of each test is pinned under __bineval__/test_summarizer/ and used verbatim; the judge
answers every question independently, and a dimension passes when its share of "yes" reaches its
threshold (set in pyproject.toml, see the comment there about the embedded judge).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from pytest_bineval import BinevalAssertionError, Evaluation, assert_passes

ARTICLES = sorted(path.stem for path in (Path(__file__).parent / "data").glob("*.txt"))

# A dimension of our own, next to three of the built-in ones (coherence, consistency, fluency, relevance).
BREVITY = (
    "The response is short: at most three sentences and about 80 words, with nothing repeated or padded."
)

# Module-level marker: every test here is judged on these dimensions; the task comes from the
# `bineval_task` fixture in conftest.py, the thresholds from [tool.pytest.ini_options].
pytestmark = pytest.mark.bineval(dimensions=["consistency", "relevance", "fluency", {"brevity": BREVITY}])


# prompt=: the generator prompt that made these outputs; `pytest --bineval-optimize` rewrites it with
# lessons from the failing questions of the train tests, measured on held-out ones (docs/optimize-and-align.md).
@pytest.mark.bineval(prompt="prompts/summarize.md")
@pytest.mark.parametrize("name", ARTICLES)
def test_summary(name: str, articles: dict[str, str], summary_of: Callable[[str], str]) -> None:
    article = articles[name]
    summary = summary_of(name)

    # Content: judged against the article (source=), so that "is every claim supported?" can be answered.
    assert_passes(summary, dimension=["consistency", "relevance"], source=article)

    # Form: the custom dimension and fluency, in a second call with its own verdicts.
    assert_passes(summary, dimension=["fluency", "brevity"], source=article)


UNRELATED = (
    "Preheat the oven to 200 degrees. Mix the flour, butter and sugar, then bake the biscuits for twelve "
    "minutes until golden."
)


def test_unrelated_text_is_rejected(articles: dict[str, str]) -> None:
    """A text that has nothing to do with the article must not pass as its summary.

    The explicit threshold (it wins over the marker and the ini option) asks for a "yes" to at least one
    of the two relevance questions. The embedded judge answers both "no" for this recipe (P(yes) 0.30 and
    0.40); it does NOT reliably catch subtler faults: a fluent summary with invented facts scored like the
    real ones, so that case is left to a capable judge.
    """
    with pytest.raises(BinevalAssertionError) as failure:
        assert_passes(
            UNRELATED, dimension="relevance", source=articles["ferry_strike"], threshold={"relevance": 0.5}
        )
    # The failure carries the Evaluation: scores per dimension, and every verdict with its explanation.
    evaluation = failure.value.evaluation
    assert isinstance(evaluation, Evaluation)
    assert evaluation.scores["relevance"] == 0.0
