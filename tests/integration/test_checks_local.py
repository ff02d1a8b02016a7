"""Checks that code answers, on the real embedded judge: only the judged questions are asked."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import MIXED_CHECKLIST as MIXED

from pytest_bineval.api import evaluate
from pytest_bineval.models import Checklist


@pytest.mark.local_model
def test_a_mixed_checklist_on_the_embedded_model_asks_only_the_judged_questions(tmp_path: Path) -> None:
    """The real embedded judge: one answer request per judged question (and one explanation per "no"), none for
    the checked ones, whatever the model would have said about them."""
    from pytest_bineval import DEFAULT_MODEL

    checklist = Checklist.model_validate(MIXED)
    output = '{"name": "Central Library", "opens": 2027, "floors": 3}'
    result = evaluate(output, checklist, "The town builds a library with 3 floors, to open in 2027.",
                      model=DEFAULT_MODEL, cache_dir=str(tmp_path / "cache"))
    assert result.model == DEFAULT_MODEL and result.errors == []
    judged = [v for v in result.verdicts if v.decided_by == "judge"]
    assert [v.question_id for v in judged] == ["relevance-1"] and judged[0].p_yes is not None
    assert result.usage.llm_calls == 1 + sum(v.answer == "no" for v in judged)
    assert [(v.answer, v.explanation) for v in result.verdicts if v.decided_by == "code"] == [
        ("yes", "1 sentence; the limit is 2"), ("yes", "valid JSON (dict)")]
