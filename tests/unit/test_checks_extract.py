"""The extractor on written task phrasings, and the code questions it adds to generated checklists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.api import evaluate, generate_checklist
from pytest_bineval.checklist import code_questions
from pytest_bineval.checks.extract import extract_checks
from pytest_bineval.testing import ScriptedModel

PHRASINGS: list[tuple[str, list[dict[str, Any]]]] = [
    ("Summarize the article in 2-3 sentences.", [{"kind": "sentences_between", "min": 2, "max": 3}]),
    ("Answer in under 100 words.", [{"kind": "max_words", "value": 99}]),
    ("Write at most 50 words and at least 2 sentences.",
     [{"kind": "max_words", "value": 50}, {"kind": "min_sentences", "value": 2}]),
    ("Write a blog post with 400 or more words.", [{"kind": "min_words", "value": 400}]),
    ("Keep it between 100 and 120 words.", [{"kind": "words_between", "min": 100, "max": 120}]),
    ("Reply as JSON.", [{"kind": "json"}]),
    ("Wrap your entire output in JSON format.", [{"kind": "json"}]),
    ("Write the report to report.json on disk.", []),  # a file name, not a format
    ("Answer in French, no other language is allowed.", [{"kind": "language", "language": "fr"}]),
    ("Your entire response should be in Hindi.", [{"kind": "language", "language": "hi"}]),
    ("List the steps as exactly 4 bullet points.", [{"kind": "exact_bullets", "value": 4}]),
    ("Do not use commas.", [{"kind": "no_commas"}]),
    ("Make sure you don't use any commas.", [{"kind": "no_commas"}]),
    ("Your answer must be in all lowercase letters.", [{"kind": "letter_case", "case": "lower"}]),
    ("Write it in all capital letters, no lowercase letters allowed.", [{"kind": "letter_case", "case": "upper"}]),
    ("Include at least 3 words in all capital letters.", [{"kind": "min_capital_words", "value": 3}]),
    ('Include the keywords "climate" and "energy".', [{"kind": "includes_keywords", "words": ["climate", "energy"]}]),
    ("Do not include the words 'sad' or 'crazy' in the response.",
     [{"kind": "forbidden_words", "words": ["sad", "crazy"]}]),
    ('The word "river" should appear at least 3 times.', [{"kind": "keyword_count", "keyword": "river", "min": 3}]),
    ("Make sure the letter q appears less than 5 times.", [{"kind": "letter_count", "keyword": "q", "max": 4}]),
    ('Finish your response with this exact phrase "Any other questions?".',
     [{"kind": "ends_with", "text": "Any other questions?"}]),
    ("Wrap your entire response with double quotation marks.", [{"kind": "quoted"}]),
    ("Add a title wrapped in double angular brackets, i.e. <<title>>.", [{"kind": "title"}]),
    ("At the end, add a postscript starting with P.P.S", [{"kind": "postscript", "marker": "P.P.S"}]),
    ("Include at least 2 placeholders in square brackets, such as [name].",
     [{"kind": "min_placeholders", "value": 2}]),
    ("Highlight at least 3 sections with markdown, i.e. *highlighted section*.",
     [{"kind": "min_highlights", "value": 3}]),
    ("There should be 3 paragraphs. Paragraphs are separated with the markdown divider: ***",
     [{"kind": "exact_paragraphs", "value": 3, "separator": "***"}]),
    ("Your response must have 2 sections. Mark the beginning of each section with SECTION X.",
     [{"kind": "min_sections", "value": 2, "marker": "SECTION"}]),
    ("Each line should contain exactly one sentence.", []),  # a count per line, not the response's
    ("Write a friendly note to a colleague.", []),
]


@pytest.mark.parametrize(("task", "expected"), PHRASINGS, ids=[p[0][:40] for p in PHRASINGS])
def test_extractor_phrasings(task: str, expected: list[dict[str, Any]]) -> None:
    assert [c.spec() for c in extract_checks(task)] == expected


def test_code_questions_go_to_the_form_dimension_and_only_there() -> None:
    task = "Summarize it in 2-3 sentences, as JSON."
    qs = code_questions(task, {"consistency": "c", "relevance": "r"})
    assert [(q.id, q.dimension, q.check) for q in qs] == [
        ("relevance-check-1", "relevance", {"kind": "sentences_between", "min": 2, "max": 3}),
        ("relevance-check-2", "relevance", {"kind": "json"})]
    assert qs[0].text == "Does the response have between 2 and 3 sentences?"
    assert [q.dimension for q in code_questions(task, {"relevance": "r", "format": "f"})] == ["format", "format"]
    assert code_questions(task, {"consistency": "c", "fluency": "f"}) == []  # a length is not about these


def test_a_generated_checklist_carries_the_task_checks_and_the_judge_never_sees_them(
        fake: ScriptedModel, cache_dir: Path) -> None:
    task = "Summarize the article in at most two sentences, without commas."
    checklist = generate_checklist(task, ["relevance"], model=fake.model, cache_dir=str(cache_dir))
    checked = [q for q in checklist.questions if q.check]
    assert [q.check for q in checked] == [{"kind": "max_sentences", "value": 2}, {"kind": "no_commas"}]
    fake.requests.clear()
    result = evaluate("One, two. Three. Four.", checklist, "An article.", model=fake.model,
                      cache_dir=str(cache_dir))
    judged = [q for q in checklist.questions if not q.check]
    assert fake.calls_of("verdict") == len(judged)
    assert {r.question for r in fake.requests} == {q.text for q in judged}
    by_id = {v.question_id: v for v in result.verdicts}
    assert [(by_id[q.id].answer, by_id[q.id].explanation) for q in checked] == [
        ("no", "3 sentences; the limit is 2"), ("no", "1 comma(s); none allowed")]


def test_checks_whose_library_is_missing_stay_out_of_generated_checklists(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pysbd" else real(name, *a))
    qs = code_questions("Answer in 2-3 sentences and under 50 words.", {"relevance": "r"})
    assert [q.check for q in qs] == [{"kind": "max_words", "value": 49}]  # the sentence count stays with the judge


def test_a_written_question_that_restates_a_task_constraint_gets_its_check(fake: ScriptedModel,
                                                                          cache_dir: Path) -> None:
    """The generator's own question about the task's length is decided by code (no separate code question for the
    same constraint); a question whose check the task does not state stays a judge question."""
    written = ["Is the response at most 2 sentences long?", "Is the response under 30 words?",
               "Does the response name the city?"]
    fake.rules = {"questions": lambda r: json.dumps({"questions": [
        {"requirement": "r", "question": t, "no_example": "n"} for t in written]})}
    checklist = generate_checklist("Summarize the article in at most 2 sentences, without commas.", ["relevance"],
                                   model=fake.model, cache_dir=str(cache_dir))
    assert [(q.id, q.text, q.check) for q in checklist.questions] == [
        ("relevance-1", "Is the response at most 2 sentences long?", {"kind": "max_sentences", "value": 2}),
        ("relevance-2", "Is the response under 30 words?", None),  # the task says nothing of words
        ("relevance-3", "Does the response name the city?", None),
        ("relevance-check-1", "Does the response avoid commas?", {"kind": "no_commas"}),
    ]
