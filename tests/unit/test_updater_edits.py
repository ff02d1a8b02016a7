"""The prompt updater's surgical edits: the reply format its prompt shows (a worked example, no placeholder values
a small model copies), edits that copy the updater's own prompt (discarded), and edits that do not apply (refused,
with the reason)."""

from __future__ import annotations

import json
import re

import pytest
from support import NEWS_LINE, NEWS_PROMPT

from pytest_bineval.optimize.lessons import apply_edit, template_problem
from pytest_bineval.prompting import load_prompt

PROMPT = NEWS_PROMPT
LINE = NEWS_LINE
LESSON = "Copy every number exactly as the article gives it."


def shown_reply() -> dict[str, str]:
    """The reply the updater prompt shows the model (its one JSON object)."""
    system = load_prompt("updater").turns[0][1]
    (shown,) = re.findall(r"\{\"find\".*?\"\}", system)
    reply = json.loads(shown)
    assert isinstance(reply, dict)
    return reply


# -- the reply format the updater prompt shows ---------------------------------------------------------------


def test_the_updater_prompt_shows_a_worked_edit_not_placeholder_values() -> None:
    """The old template showed {"find": "exact passage from the prompt", "replace": "the rewritten passage"}, and
    SmolLM2-135M copied those words into its edits. The format is a worked example now: a real sentence, and the
    same sentence with a real lesson added."""
    reply = shown_reply()
    system = load_prompt("updater").turns[0][1]
    assert f'sentence "{reply["find"]}"' in system  # the sentence the example's prompt holds
    lesson = re.search(r'the lesson "([^"]+)"', system)
    assert lesson is not None and reply["replace"] == f'{reply["find"]} {lesson.group(1)}'
    for value in reply.values():
        assert "passage" not in value and "rewritten" not in value and "prompt" not in value


def test_a_verbatim_copy_of_the_worked_example_is_discarded() -> None:
    reply = shown_reply()
    problem = template_problem(reply["find"], reply["replace"], PROMPT, LESSON)
    assert problem is not None and "words of the updater's own prompt" in problem


# -- edits that copy the updater's own prompt: discarded ------------------------------------------------------


@pytest.mark.parametrize(("find", "replace", "reason"), [
    # the old template's placeholder values, as the embedded model wrote them in the real session
    ("exact passage from the prompt", "the rewritten passage", "'find' 'exact passage from the prompt' is a "
                                                              "placeholder: it describes a passage"),
    # a real sentence replaced by a placeholder value: apply_edit alone would write "the rewritten passage" in
    (LINE, "the rewritten passage", "'replace' 'the rewritten passage' is a placeholder"),
    # the key names, as the model wrote them under a JSON grammar
    ("replace", "find", "'find' 'replace' is words of the updater's own prompt"),
    # a real sentence with the worked example's lesson instead of this one
    (LINE, f"{LINE} Give the price of the trip.", "'replace' copies words of the updater's own prompt ('give "
                                                  "the price of the'"),
    # a bracketed placeholder the prompt does not hold
    (LINE, f"{LINE} Say what happened in [city].", "'replace' holds a placeholder ('[city]')"),
    ("The event happened in [city] on [date].", "x", "'find' holds a placeholder ('[city]')"),
])
def test_an_edit_that_copies_the_updater_prompt_is_discarded(find: str, replace: str, reason: str) -> None:
    problem = template_problem(find, replace, PROMPT, LESSON)
    assert problem is not None and reason in problem


@pytest.mark.parametrize(("find", "replace"), [
    (LINE, f"{LINE} {LESSON}"),
    (LINE, "You summarize news articles for a busy reader, and you copy every number exactly."),
    ("Summarize the article above in 2-3 sentences.", "Summarize the article above in 2-3 sentences; keep the "
                                                      "names of the places."),
    ("<article>\n{{article}}\n</article>", "<article>\n{{article}}\n</article>\nRead the article to the end."),
])
def test_a_real_edit_is_not_taken_for_a_copy(find: str, replace: str) -> None:
    assert template_problem(find, replace, PROMPT, LESSON) is None
    assert apply_edit(PROMPT, find, replace)[1] is None


def test_words_the_prompt_itself_holds_are_not_a_copy() -> None:
    """A prompt that holds "..." or the example's words itself may be edited with them."""
    prompt = PROMPT.replace(LINE, f"{LINE} Give the price of the trip ... if there is one.")
    find = "Give the price of the trip ... if there is one."
    assert template_problem(find, f"{find} Round it.", prompt, LESSON) is None


# -- edits that do not apply: refused, with the reason --------------------------------------------------------


@pytest.mark.parametrize(("find", "replace", "reason"), [
    # not a substring of the prompt: the passage is quoted and the rule said
    ("You are a sports editor.", "You are a sports editor. Be brief.",
     "passage not found in the prompt: 'You are a sports editor.' is not a substring of it (an edit must copy its "
     "passage from the prompt character for character)"),
    ("You summarize news articles  for a busy reader.", "x y", "is not a substring of it"),  # spacing differs
    # a piece of a header line or of a placeholder: the whole prompt is checked, not only the passage
    ("system", "system prompt", "the passage 'system' is part of a section header line"),
    ("{article", "{story", "the passage '{article' is part of a placeholder"),
    # a rewrite without words deletes the passage
    (LINE, "{ ", "the rewrite '{' has no words: it would delete the passage"),
])
def test_an_edit_that_does_not_apply_is_refused_with_the_reason(find: str, replace: str, reason: str) -> None:
    text, why = apply_edit(PROMPT, find, replace)
    assert text == PROMPT
    assert why is not None and reason in why


def test_a_long_passage_that_is_not_found_is_quoted_clipped_on_one_line() -> None:
    find = "The article was about a new policy\nthat will allow people to find the best deals " * 3
    why = apply_edit(PROMPT, find, "x")[1]
    assert why is not None and "\n" not in why
    assert "'The article was about a new policy that will allow people to...' is not a substring" in why
