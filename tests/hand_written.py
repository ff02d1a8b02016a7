"""A hand-written checklist for the tests that run the real embedded judge (no generation call): the 135M
model's own checklists are generic, and a pinned hand-written one keeps those runs short and reproducible."""

from __future__ import annotations

from typing import Any

REAL_CHECKLIST: dict[str, Any] = {
    "task": "Summarize the article in one sentence.",
    "dimensions": {"consistency": "The summary states only facts from the article."},
    "requirements": ["The summary states only facts from the article."],
    "questions": [
        {"id": "consistency-1", "dimension": "consistency", "text": "Does the summary name the city mentioned in "
         "the article?", "no_example": "", "requirement": ""},
        {"id": "consistency-2", "dimension": "consistency", "text": "Is every number in the summary also in the "
         "article?", "no_example": "", "requirement": ""},
        {"id": "consistency-3", "dimension": "consistency", "text": "Does the summary say when the bridge "
         "opened?", "no_example": "", "requirement": ""},
    ],
    "model": "hand-written",
    "prompt_version": "1",
}
