"""Checklist generation and evaluation against a scripted fake model served through litellm.

The fake is a litellm custom provider (``pytest_bineval.testing.ScriptedModel``), so every test here takes
the same path as a real model: cache lookup, ``litellm.acompletion``, tolerant JSON parsing, retries.
"""

from __future__ import annotations

import concurrent.futures
import json
import re
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import (
    BinevalCacheWarning,
    Checklist,
    ChecklistGenerationError,
    Engine,
    InputTooLargeError,
    Question,
    Settings,
    Usage,
    UsageError,
    aevaluate,
    agenerate_checklist,
    evaluate,
    generate_checklist,
    prompt_version,
)
from pytest_bineval.cli import main
from pytest_bineval.llm.cache import cache_key
from pytest_bineval.testing import Request, ScriptedModel

TASK = "Summarize the news article in 2-3 sentences for a busy reader."
ARTICLE = "The town council voted 7-2 on Monday to build a new library by 2027."
SUMMARY = "The council approved a new library, due in 2027."
DEFAULT = ScriptedModel()  # never registered: its default replies, for rules that change only some of them


def make_checklist(n: int = 4, dimensions: tuple[str, ...] = ("consistency", "fluency")) -> Checklist:
    questions = [Question(id=f"{d}-{i}", dimension=d, text=f"Is {d} check {i} met by the response?",
                          no_example=f"fails {d} {i}")
                 for d in dimensions for i in range(1, n // len(dimensions) + 1)]
    return Checklist(task=TASK, dimensions={d: f"definition of {d}" for d in dimensions}, questions=questions)


def opts(fake: ScriptedModel, cache_dir: Path, **more: Any) -> dict[str, Any]:
    return {"model": fake.model, "cache_dir": str(cache_dir), **more}


def verdict_json(answer: str, explanation: str = "because") -> str:
    return json.dumps({"answer": answer, "explanation": explanation})


def questions_reply(*texts: str) -> str:
    return json.dumps({"questions": [{"requirement": "r", "question": t, "no_example": "n"} for t in texts]})


# -- checklist generation ------------------------------------------------------------------------------------

def test_generation_is_two_steps_requirements_then_questions_per_dimension(fake: ScriptedModel,
                                                                           cache_dir: Path) -> None:
    checklist = generate_checklist(TASK, ["consistency", {"tone": "The response is neutral and factual."}],
                                   **opts(fake, cache_dir))
    assert [r.kind for r in fake.requests] == ["requirements", "questions", "questions"]
    assert TASK in fake.requests[0].user
    step2 = fake.requests[1:]
    assert [r.dimension for r in step2] == ["consistency", "tone"]
    for r in step2:  # step 2 sees the task and step 1's requirements
        assert TASK in r.user
        assert "- The response covers the main point of the input." in r.user
    assert "Definition: The response is neutral and factual." in step2[1].user
    assert checklist.requirements == json.loads(DEFAULT.reply(Request("requirements", [], {})))["requirements"]
    assert checklist.dimensions == {
        "consistency": checklist.dimensions["consistency"], "tone": "The response is neutral and factual."}
    assert "factually aligned" in checklist.dimensions["consistency"]  # the built-in definition
    groups = checklist.by_dimension()
    assert {d: [q.id for q in qs] for d, qs in groups.items()} == {
        "consistency": ["consistency-1", "consistency-2"], "tone": ["tone-1", "tone-2"]}
    assert groups["tone"][0].text == "Does the response meet tone check 1?"
    assert groups["tone"][0].no_example == "A response that fails tone check 1."
    assert groups["tone"][0].requirement == "tone requirement 1"
    assert (checklist.task, checklist.model, checklist.prompt_version) == (TASK, fake.model, prompt_version())


def test_all_four_builtin_dimensions_by_default(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = generate_checklist(TASK, **opts(fake, cache_dir))
    assert list(checklist.dimensions) == ["coherence", "consistency", "fluency", "relevance"]
    assert all(len(qs) >= 1 for qs in checklist.by_dimension().values())
    assert fake.calls_of("questions") == 4


def test_prompt_version_is_the_packaged_version_file() -> None:
    version_file = Path(__import__("pytest_bineval").__file__).parent / "prompts" / "VERSION"
    assert prompt_version() == version_file.read_text("utf-8").strip() != ""


def test_duplicate_questions_are_removed_within_and_across_dimensions(fake: ScriptedModel,
                                                                       cache_dir: Path) -> None:
    replies = {
        "consistency": questions_reply("Is every claim supported by the input?",
                                       "is every claim supported by the input",  # same after normalising
                                       "Are the numbers the same as in the input?"),
        "relevance": questions_reply("Is every claim supported by the input?",  # a duplicate of consistency's
                                     "Does the response give the main point?"),
    }
    fake.rules = {"questions": lambda r: replies[r.dimension]}
    checklist = generate_checklist(TASK, ["consistency", "relevance"], **opts(fake, cache_dir))
    assert [(q.id, q.text) for q in checklist.questions] == [
        ("consistency-1", "Is every claim supported by the input?"),
        ("consistency-2", "Are the numbers the same as in the input?"),
        ("relevance-1", "Does the response give the main point?"),
        ("relevance-check-1", "Does the response have between 2 and 3 sentences?"),  # from the task, by code
    ]


def test_a_dimension_with_only_duplicate_questions_is_a_clear_error(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules = {"questions": lambda r: questions_reply("Is every claim supported by the input?")}
    with pytest.raises(ChecklistGenerationError, match=r"'relevance'.*duplicate"):
        generate_checklist(TASK, ["consistency", "relevance"], **opts(fake, cache_dir))


def test_a_dimension_whose_replies_are_unusable_is_an_error_naming_it(fake: ScriptedModel,
                                                                      cache_dir: Path) -> None:
    def questions(r: Request) -> Any:
        return '{"questions": []}' if r.dimension == "tone" else DEFAULT.reply(r)

    fake.rules = {"questions": questions}
    with pytest.raises(ChecklistGenerationError, match=r"dimension 'tone'.*no usable question"):
        generate_checklist(TASK, ["consistency", {"tone": "Neutral."}], **opts(fake, cache_dir, retries=2))
    assert [r.dimension for r in fake.requests if r.kind == "questions"] == ["consistency"] + ["tone"] * 3


def test_step_one_failure_is_a_checklist_generation_error(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules = {"requirements": lambda r: "I cannot help with that."}
    with pytest.raises(ChecklistGenerationError, match="step 1"):
        generate_checklist(TASK, ["fluency"], **opts(fake, cache_dir, retries=1))
    assert fake.calls_of("requirements") == 2
    assert fake.calls_of("questions") == 0


def test_questions_are_cleaned_up(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.rules = {"questions": lambda r: questions_reply("Is it?", "Does the response name the town.")}
    checklist = generate_checklist(TASK, ["fluency"], **opts(fake, cache_dir))
    assert [q.text for q in checklist.questions] == ["Does the response name the town?"]


def test_generation_schemas_keep_strings_closed() -> None:
    """A string pattern that admits a raw quote lets a grammar-constrained model close the JSON string early
    and smuggle in items past maxItems; the patterns admit neither quotes nor backslashes."""
    from pytest_bineval.checklist import QUESTIONS_SCHEMA, REQUIREMENTS_SCHEMA

    requirement = REQUIREMENTS_SCHEMA["properties"]["requirements"]["items"]["pattern"]
    question = QUESTIONS_SCHEMA["properties"]["questions"]["items"]["properties"]["question"]["pattern"]
    assert re.fullmatch(requirement, "The response names the town and the year.")
    assert re.fullmatch(question, "Does the response name the town and the year?")
    assert not re.fullmatch(requirement, 'The response is short.", "The response is clear.')
    assert not re.fullmatch(question, 'Is it short?", "question": "Is it clear?')
    assert not re.fullmatch(requirement, "The response is short \\ and clear.")
    assert not re.fullmatch(requirement, "The response is short\nand clear.")


@pytest.mark.parametrize(("dimensions", "message"), [
    (["consistancy"], "unknown dimension 'consistancy'"),
    ("helpfulness", "unknown dimension 'helpfulness'"),
    ({"bad name!": "A definition."}, "dimension names are identifiers"),
    ({"tone": "   "}, "needs a non-empty definition"),
    ([], "at least one dimension"),
])
def test_bad_dimensions_are_a_value_error_before_any_call(fake: ScriptedModel, cache_dir: Path,
                                                           dimensions: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        generate_checklist(TASK, dimensions, **opts(fake, cache_dir))
    assert fake.requests == []


def test_bad_task_is_rejected_before_any_call(fake: ScriptedModel, cache_dir: Path) -> None:
    with pytest.raises(ValueError, match="task is empty"):
        generate_checklist("   ", **opts(fake, cache_dir))
    with pytest.raises(TypeError, match="task must be a string"):
        generate_checklist(None, **opts(fake, cache_dir))  # type: ignore[arg-type]
    assert fake.requests == []


def test_generation_is_cached(fake: ScriptedModel, cache_dir: Path) -> None:
    engine = Engine(Settings(**opts(fake, cache_dir)))
    first = engine.checklist(TASK, ["consistency"])
    assert engine.usage.llm_calls == 2
    n = len(fake.requests)
    second = engine.checklist(TASK, ["consistency"])
    engine.close()
    assert second == first
    assert len(fake.requests) == n
    assert (engine.usage.llm_calls, engine.usage.cache_hits) == (2, 2)


# -- evaluation ----------------------------------------------------------------------------------------------

def test_every_question_is_answered_with_explanation_and_p_yes(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(4)
    fake.answers = {"Is consistency check 2 met by the response?": "no"}
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    # answer first: one answer request per question, an explanation request for the one "no" (explain=failing)
    assert (fake.calls_of("verdict"), fake.calls_of("explanation")) == (4, 1)
    assert [r.output for r in fake.requests] == [SUMMARY] * 5
    assert all(ARTICLE in r.user or r.kind == "explanation" for r in fake.requests)
    assert all(ARTICLE in r.messages[1]["content"] and TASK in r.messages[1]["content"] for r in fake.requests)
    assert [(v.question_id, v.answer) for v in result.verdicts] == [
        ("consistency-1", "yes"), ("consistency-2", "no"), ("fluency-1", "yes"), ("fluency-2", "yes")]
    assert result.verdicts[1].explanation == "scripted no for: Is consistency check 2 met by the response?"
    assert [v.explanation for v in result.verdicts if v.answer == "yes"] == ["", "", ""]
    assert {v.explain for v in result.verdicts} == {"failing"}
    assert result.verdicts[0].p_yes == pytest.approx(0.9, abs=1e-6)  # from the reply's logprobs
    assert result.verdicts[1].p_yes == pytest.approx(0.1, abs=1e-6)
    assert result.scores == {"consistency": 0.5, "fluency": 1.0}
    assert result.overall == 0.75
    assert result.errors == []
    assert (result.task, result.model, result.dimensions) == (TASK, fake.model, ["consistency", "fluency"])
    assert result.usage.llm_calls == 5 and result.usage.cache_hits == 0
    assert result.usage.prompt_tokens > 0 and result.usage.completion_tokens > 0


def test_evaluate_a_subset_of_dimensions(fake: ScriptedModel, cache_dir: Path) -> None:
    result = evaluate(SUMMARY, make_checklist(4), ARTICLE, dimensions="fluency", **opts(fake, cache_dir))
    assert [v.dimension for v in result.verdicts] == ["fluency", "fluency"]
    assert fake.calls_of("verdict") == 2
    with pytest.raises(UsageError, match=r"'tone' requested but not in the checklist .* it has 'consistency'"):
        evaluate(SUMMARY, make_checklist(4), ARTICLE, dimensions=["tone"], **opts(fake, cache_dir))


def test_tolerant_parsing_and_no_p_yes_without_logprobs(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2, ("fluency",))
    fake.answers = {
        "Is fluency check 1 met by the response?": 'Sure.\n```json\n{"answer": "no", "explanation": "typo"}\n```',
        # answer in capitals: the fake's logprobs cannot find it, so there is no P(yes)
        "Is fluency check 2 met by the response?": '{"explanation": "fine", "answer": "YES"}',
    }
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, retries=0, explain="all"))
    assert [(v.answer, v.explanation) for v in result.verdicts] == [("no", "typo"), ("yes", "fine")]
    assert result.verdicts[0].p_yes == pytest.approx(0.1, abs=1e-6)
    assert result.verdicts[1].p_yes is None
    # an explanation given with the answer is used: no explanation request
    assert (fake.calls_of("verdict"), fake.calls_of("explanation")) == (2, 0)


def test_malformed_reply_is_retried_then_an_error_verdict(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2, ("consistency",))
    bad = "Is consistency check 1 met by the response?"
    fake.answers = {bad: "The answer is yes, definitely."}
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, retries=2))
    asked = [r for r in fake.requests if r.question == bad]
    assert len(asked) == 3  # 1 + 2 retries
    assert "That reply was not valid" in asked[1].messages[-1]["content"]
    assert asked[1].messages[-2] == {"role": "assistant", "content": "The answer is yes, definitely."}
    error = result.verdicts[0]
    assert (error.answer, error.p_yes, error.explanation) == ("error", None, "")
    assert error.error is not None and "unparseable reply" in error.error
    assert result.errors == [error]
    assert result.verdicts[1].answer == "yes"
    assert result.scores == {"consistency": 1.0}  # over the answered question only
    assert result.usage.llm_calls == 4


def test_an_answer_that_is_neither_yes_nor_no_is_an_error_verdict(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(1, ("fluency",))
    fake.answers = {"Is fluency check 1 met by the response?": verdict_json("maybe")}
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, retries=1))
    assert result.verdicts[0].answer == "error"
    assert "'maybe'" in (result.verdicts[0].error or "")
    assert result.scores == {"fluency": None} and result.overall is None
    assert fake.calls_of("verdict") == 2


def test_malformed_then_valid_recovers_by_retry(fake: ScriptedModel, cache_dir: Path) -> None:
    attempts: dict[str, int] = {}

    def answer(r: Request) -> Any:
        attempts[r.question] = attempts.get(r.question, 0) + 1
        return '{"answer": "no", "explanation": ' if attempts[r.question] == 1 else verdict_json("no", "fixed")

    fake.answers = answer
    result = evaluate(SUMMARY, make_checklist(2), ARTICLE, **opts(fake, cache_dir, retries=1))
    assert [(v.answer, v.explanation) for v in result.verdicts] == [("no", "fixed")] * 2
    assert result.errors == []
    assert result.usage.llm_calls == 4
    assert set(attempts.values()) == {2}


def test_provider_exception_is_an_error_verdict_with_its_cause(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2, ("consistency",))
    fake.answers = {"Is consistency check 1 met by the response?": RuntimeError("provider exploded")}
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, retries=0))
    error = result.verdicts[0]
    assert error.answer == "error"
    assert "provider exploded" in (error.error or "")
    assert result.verdicts[1].answer == "yes"
    assert result.scores == {"consistency": 1.0}
    assert result.errors == [error]


def test_transient_provider_error_is_retried(fake: ScriptedModel, cache_dir: Path) -> None:
    calls = []

    def answer(r: Request) -> Any:
        calls.append(r.question)
        return RuntimeError("503 try again") if len(calls) == 1 else "yes"

    fake.answers = answer
    result = evaluate(SUMMARY, make_checklist(1, ("fluency",)), ARTICLE, **opts(fake, cache_dir, retries=1))
    assert [v.answer for v in result.verdicts] == ["yes"]
    assert len(calls) == 2


def test_timeout_is_an_error_verdict(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2, ("consistency",))
    evaluate("warm-up", checklist, **opts(fake, cache_dir, cache="off"))  # litellm's first call is slow
    fake.answers = {"Is consistency check 1 met by the response?": 5.0}  # the fake sleeps 5 s
    started = time.perf_counter()
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, timeout=0.5, retries=0))
    assert time.perf_counter() - started < 4.0
    slow, fast = result.verdicts
    assert slow.answer == "error"
    assert "no reply within 0.5 s" in (slow.error or "")
    assert fast.answer == "yes"
    assert result.scores == {"consistency": 1.0}


def test_context_window_exceeded_is_input_too_large(fake: ScriptedModel, cache_dir: Path) -> None:
    from pytest_bineval.llm.client import import_litellm

    litellm = import_litellm()
    fake.answers = lambda r: litellm.ContextWindowExceededError(
        message="prompt of 9000 tokens exceeds the context of 8192 tokens", model="judge",
        llm_provider=fake.provider)
    with pytest.raises(InputTooLargeError, match=r"context window of fake\d+/judge.*9000 tokens.*8192"):
        evaluate(SUMMARY * 100, make_checklist(2), ARTICLE, **opts(fake, cache_dir))
    # not retried (retrying cannot help); the other question is asked only if it was started before the error
    assert 1 <= fake.calls_of("verdict") <= 2


@pytest.mark.asyncio
@pytest.mark.parametrize("concurrency", [1, 8])
async def test_input_too_large_on_one_question_leaves_no_question_running_and_counts_every_request(
        fake: ScriptedModel, cache_dir: Path, concurrency: int) -> None:
    """One question too large among several: the error is raised once the questions in flight have finished
    (no task left behind, none asked after the error), and its usage, like the engine's total, counts every
    request that was made, the failed one and the answered ones alike."""
    import asyncio

    from pytest_bineval.llm.client import import_litellm

    litellm = import_litellm()
    checklist = make_checklist(4, ("consistency",))
    too_large = checklist.questions[1].text

    def answers(req: Request) -> Any:
        if req.question == too_large:
            return litellm.ContextWindowExceededError(message="prompt of 9000 tokens exceeds the context of 8192",
                                                      model="judge", llm_provider=fake.provider)
        return 0.2  # the other questions are still being answered when the error comes

    fake.answers = answers
    engine = Engine(Settings(**opts(fake, cache_dir, cache="off", concurrency=concurrency, explain="none")))
    try:
        with pytest.raises(InputTooLargeError, match="9000 tokens") as info:
            await engine.aevaluate(SUMMARY, checklist, ARTICLE)
    finally:
        engine.close()
    running = [t for t in asyncio.all_tasks() if "judge.<locals>.ask" in t.get_coro().__qualname__]
    assert running == [] and fake._in_flight == 0
    asked = [r.question for r in fake.requests]
    # one question at a time: the questions after the one too large are not asked; else all four were in flight
    assert asked == [q.text for q in checklist.questions[: 2 if concurrency == 1 else 4]]
    usage = info.value.usage
    assert (usage.llm_calls, usage.failed_requests) == (len(asked), 1)
    assert usage.completion_tokens == 2 * (len(asked) - 1)  # the answered questions' replies, {"answer": "yes"}
    assert (engine.usage.llm_calls, engine.usage.failed_requests) == (len(asked), 1)


@pytest.mark.asyncio
async def test_input_too_large_in_one_repeat_leaves_no_repeat_running_and_counts_every_request(
        fake: ScriptedModel, cache_dir: Path) -> None:
    """With repeats, one question too large: the error is raised once every repeat has finished (no repeat left
    sending requests in the background), and the engine's total, like the error's usage, counts every request
    of every repeat, the failed ones included."""
    import asyncio

    from pytest_bineval.llm.client import import_litellm

    litellm = import_litellm()
    checklist = make_checklist(4, ("consistency",))
    too_large = checklist.questions[1].text

    first_answers: list[Request] = []

    def answers(req: Request) -> Any:
        if req.question == too_large:
            return litellm.ContextWindowExceededError(message="prompt of 9000 tokens exceeds the context of 8192",
                                                      model="judge", llm_provider=fake.provider)
        # one repeat's first question is answered at once (that repeat raises first); the other repeats are still
        # waiting for theirs when it does
        first_answers.append(req)
        return 0.01 if len(first_answers) == 1 else 0.3

    fake.answers = answers
    engine = Engine(Settings(**opts(fake, cache_dir, cache="off", concurrency=8, repeats=3, explain="none")))
    try:
        with pytest.raises(InputTooLargeError, match="9000 tokens") as info:
            await engine.aevaluate(SUMMARY, checklist, ARTICLE)
        ours = ("aevaluate.<locals>", "judge.<locals>")
        pending = [t.get_coro().__qualname__ for t in asyncio.all_tasks()
                   if not t.done() and any(n in t.get_coro().__qualname__ for n in ours)]
        in_flight = fake._in_flight
        await asyncio.sleep(0.5)  # a repeat left running would go on asking
    finally:
        engine.close()
    assert pending == [] and in_flight == 0
    asked = len(fake.requests)
    assert asked >= 3  # every repeat asked, the question too large among them
    assert (engine.usage.llm_calls, engine.usage.failed_requests) == (asked, 3)
    assert (info.value.usage.llm_calls, info.value.usage.failed_requests) == (asked, 3)


def test_empty_output_is_still_asked_every_question(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.answers = lambda r: "no" if r.output == "" else "yes"
    result = evaluate("", make_checklist(4), ARTICLE, **opts(fake, cache_dir))
    assert fake.calls_of("verdict") == 4
    assert [v.answer for v in result.verdicts] == ["no"] * 4
    assert result.overall == 0.0


@pytest.mark.parametrize("output", [None, b"bytes", 42, {"role": "user"}])  # a list is a conversation
def test_non_str_output_is_a_type_error_before_any_call(fake: ScriptedModel, cache_dir: Path,
                                                         output: Any) -> None:
    with pytest.raises(TypeError, match="must be a str"):
        evaluate(output, make_checklist(2), ARTICLE, **opts(fake, cache_dir))
    with pytest.raises(TypeError, match="source must be a str, a list of documents or None"):
        evaluate(SUMMARY, make_checklist(2), 3.5 if output is None or isinstance(output, list) else output,
                 **opts(fake, cache_dir))
    assert fake.requests == []


def test_no_source_is_judged_on_its_own(fake: ScriptedModel, cache_dir: Path) -> None:
    result = evaluate(SUMMARY, make_checklist(2), **opts(fake, cache_dir))
    assert [v.answer for v in result.verdicts] == ["yes", "yes"]
    assert all("no input was given" in r.user for r in fake.requests)


# -- cache ---------------------------------------------------------------------------------------------------

def test_identical_evaluation_is_served_from_cache(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(4)
    fake.answers = {"Is fluency check 1 met by the response?": "no"}
    first = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    n = len(fake.requests)
    second = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert len(fake.requests) == n
    assert second.usage.llm_calls == 0
    assert second.usage.cache_hits == 4
    assert second.usage.prompt_tokens == 0
    assert all(v.cached for v in second.verdicts) and not any(v.cached for v in first.verdicts)
    strip = [v.model_copy(update={"cached": False}) for v in second.verdicts]
    assert strip == first.verdicts  # same answers, explanations and p_yes
    assert second.scores == first.scores
    # a different output is a different request
    third = evaluate(SUMMARY + " It cost 5 million.", checklist, ARTICLE, **opts(fake, cache_dir))
    assert third.usage.llm_calls == 4 + 1 and third.usage.cache_hits == 0  # 4 answers, 1 explanation


def test_error_verdicts_are_not_cached(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2, ("fluency",))
    fake.answers = {"Is fluency check 1 met by the response?": "garbage"}
    first = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, retries=0))
    assert [v.answer for v in first.verdicts] == ["error", "yes"]
    fake.answers = {}
    second = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, retries=0))
    assert [v.answer for v in second.verdicts] == ["yes", "yes"]
    assert (second.usage.llm_calls, second.usage.cache_hits) == (1, 1)


def test_prompt_version_is_part_of_the_cache_key(fake: ScriptedModel, cache_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    checklist = make_checklist(2)
    assert evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir)).usage.llm_calls == 2
    monkeypatch.setattr("pytest_bineval.llm.client.prompt_version", lambda: "999-test")
    changed = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert (changed.usage.llm_calls, changed.usage.cache_hits) == (2, 0)
    monkeypatch.undo()
    back = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert (back.usage.llm_calls, back.usage.cache_hits) == (0, 2)


def test_corrupt_cache_database_warns_and_results_stay_correct(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2)
    fake.answers = {"Is fluency check 1 met by the response?": "no"}
    first = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    (cache_dir / "cache.db").write_bytes(b"this is not a sqlite database\x00" * 200)
    with pytest.warns(BinevalCacheWarning, match="cannot open the cache .*: its database was moved aside to "
                                                 "cache.db.corrupt-"):
        again = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert [(v.answer, v.explanation) for v in again.verdicts] == [(v.answer, v.explanation) for v in first.verdicts]
    assert again.usage.llm_calls == 2 + 1  # 2 answers, 1 explanation
    assert list(cache_dir.glob("cache.db.corrupt-*"))  # moved aside, not deleted
    with warnings.catch_warnings():
        warnings.simplefilter("error", BinevalCacheWarning)  # the fresh database works again
        third = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert third.usage.cache_hits == 2


def _rewrite_entries(cache_dir: Path, value: Any) -> int:
    import diskcache

    with diskcache.Cache(str(cache_dir)) as cache:
        keys = list(cache.iterkeys())
        for key in keys:
            cache.set(key, value(key))
    return len(keys)


def test_corrupt_cache_entry_warns_and_is_recomputed(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2)
    evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert _rewrite_entries(cache_dir, lambda key: '{"key": "trunc') == 2
    with pytest.warns(BinevalCacheWarning, match="corrupt cache entry"):
        again = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert [v.answer for v in again.verdicts] == ["yes", "yes"]
    assert (again.usage.llm_calls, again.usage.cache_hits) == (2, 0)
    # an entry moved under another key is not served either
    assert _rewrite_entries(cache_dir, lambda key: json.dumps({"key": "0" * 64, "value": {"content": "{}"}})) == 2
    with pytest.warns(BinevalCacheWarning):
        assert evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir)).usage.llm_calls == 2


def test_cache_entry_that_no_longer_validates_is_recomputed(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2)
    evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    _rewrite_entries(cache_dir, lambda key: json.dumps({"key": key, "value": {"content": verdict_json("perhaps")}}))
    again = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert [v.answer for v in again.verdicts] == ["yes", "yes"]
    assert again.usage.llm_calls == 2


def test_read_only_cache_reads_but_never_writes(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = make_checklist(2)
    ro = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, cache="read-only"))
    assert ro.usage.llm_calls == 2
    assert not cache_dir.exists() or _rewrite_entries(cache_dir, lambda key: "") == 0
    evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))  # "on" fills it
    served = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir, cache="read-only"))
    assert (served.usage.llm_calls, served.usage.cache_hits) == (0, 2)
    miss = evaluate("Another summary.", checklist, ARTICLE, **opts(fake, cache_dir, cache="read-only"))
    assert miss.usage.llm_calls == 2
    again = evaluate("Another summary.", checklist, ARTICLE, **opts(fake, cache_dir, cache="read-only"))
    assert again.usage.llm_calls == 2  # the miss was not written


def test_cache_off_touches_no_disk(fake: ScriptedModel, cache_dir: Path) -> None:
    evaluate(SUMMARY, make_checklist(2), ARTICLE, **opts(fake, cache_dir, cache="off"))
    second = evaluate(SUMMARY, make_checklist(2), ARTICLE, **opts(fake, cache_dir, cache="off"))
    assert second.usage.llm_calls == 2
    assert not cache_dir.exists()


def test_no_secret_in_cache_keys_or_files(fake: ScriptedModel, cache_dir: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-ENVSECRET456")
    checklist = generate_checklist(TASK, ["fluency"], **opts(fake, cache_dir, extra={"api_key": "sk-SECRET123"}))
    evaluate(SUMMARY, checklist, ARTICLE,
             **opts(fake, cache_dir, extra={"api_key": "sk-SECRET123", "extra_headers": {"X-Key": "sk-HEADER789"}}))
    files = [p for p in cache_dir.rglob("*") if p.is_file()]
    assert files
    for path in files:
        data = path.read_bytes()
        for secret in (b"sk-SECRET123", b"sk-ENVSECRET456", b"sk-HEADER789"):
            assert secret not in data, f"{secret!r} found in {path}"
    # the secret is not part of the key: the same request without it is a cache hit
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert (result.usage.llm_calls, result.usage.cache_hits) == (0, len(checklist.questions))
    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    assert cache_key({**base, "api_key": "sk-1", "headers": {"Authorization": "Bearer x"}}) == cache_key(base)
    assert cache_key({**base, "temperature": 0.5}) != cache_key(base)


# -- concurrency ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("concurrency", [1, 2, 8])
def test_concurrency_limit_is_respected(fake: ScriptedModel, cache_dir: Path, concurrency: int) -> None:
    fake.answers = lambda r: 0.05  # every reply takes 50 ms
    result = evaluate(SUMMARY, make_checklist(8), ARTICLE, **opts(fake, cache_dir, concurrency=concurrency))
    assert len(result.verdicts) == 8 and result.errors == []
    assert fake.max_in_flight <= concurrency
    if concurrency > 1:
        assert fake.max_in_flight > 1  # requests do overlap up to the limit


# -- async twins, event loops, engine ------------------------------------------------------------------------

@pytest.mark.asyncio
async def test_async_twins(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = await agenerate_checklist(TASK, ["fluency", "relevance"], **opts(fake, cache_dir))
    assert [q.id for q in checklist.questions] == ["fluency-1", "fluency-2", "relevance-1", "relevance-2",
                                                   "relevance-check-1"]  # TASK's "in 2-3 sentences", by code
    result = await aevaluate(SUMMARY, checklist, ARTICLE, dimensions=["relevance"], **opts(fake, cache_dir))
    assert [v.question_id for v in result.verdicts] == ["relevance-1", "relevance-2", "relevance-check-1"]
    assert result.scores == {"relevance": 2 / 3}  # SUMMARY is one sentence
    with pytest.raises(TypeError):
        await aevaluate(b"bytes", checklist, **opts(fake, cache_dir))  # type: ignore[arg-type]


@pytest.mark.asyncio
async def test_sync_api_works_inside_a_running_event_loop(fake: ScriptedModel, cache_dir: Path) -> None:
    checklist = generate_checklist(TASK, ["fluency"], **opts(fake, cache_dir))
    result = evaluate(SUMMARY, checklist, ARTICLE, **opts(fake, cache_dir))
    assert [v.answer for v in result.verdicts] == ["yes", "yes"]


def test_engine_keeps_a_running_total(fake: ScriptedModel, cache_dir: Path) -> None:
    engine = Engine(Settings(**opts(fake, cache_dir)))
    try:
        checklist = engine.checklist(TASK, ["coherence"])
        engine.evaluate(SUMMARY, checklist, ARTICLE)
        engine.evaluate(SUMMARY, checklist, ARTICLE)
    finally:
        engine.close()
    assert (engine.usage.llm_calls, engine.usage.cache_hits) == (2 + 2, 2)


def test_engine_total_counts_every_evaluation_of_concurrent_threads(fake: ScriptedModel, cache_dir: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """assert_passes may run in several threads of one test, each with its own event loop: the engine's running
    total is the sum of every evaluation's usage (no request, token or cache hit lost to a racing update)."""
    add = Usage.__add__

    def slow_add(self: Usage, other: Usage) -> Usage:  # widens the read-modify-write window of an unlocked update
        time.sleep(0.002)
        return add(self, other)

    monkeypatch.setattr(Usage, "__add__", slow_add)
    checklist = make_checklist(2)
    engine = Engine(Settings(**opts(fake, cache_dir)))
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
            # 4 distinct outputs, each judged 4 times: requests and cache hits both
            results = list(pool.map(lambda i: engine.evaluate(f"{SUMMARY} ({i % 4})", checklist, ARTICLE),
                                    range(16)))
    finally:
        engine.close()
    total = Usage.total(r.usage for r in results)
    counts = ("llm_calls", "failed_requests", "cache_hits", "prompt_tokens", "completion_tokens")
    assert {c: getattr(engine.usage, c) for c in counts} == {c: getattr(total, c) for c in counts}
    assert total.llm_calls + total.cache_hits == 16 * 2 and total.llm_calls >= 4 * 2
    assert total.llm_calls == len(fake.requests)  # every request the model received


@pytest.mark.parametrize(("field", "value"), [
    ("cache", "sometimes"), ("concurrency", 0), ("timeout", 0), ("retries", -1), ("temperature", 3.0)])
def test_bad_settings_are_value_errors(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field):
        Settings(**{field: value})


# That litellm is imported lazily (not by ``import pytest_bineval``, by the first model call) and offline-safe
# (LITELLM_LOCAL_MODEL_COST_MAP set first: no price list download) is tests/unit/test_package.py's
# test_the_first_cache_miss_imports_litellm_offline_safe (one subprocess that imports litellm, for both).


# -- CLI -----------------------------------------------------------------------------------------------------

def test_cli_checklist_then_eval_print_json(fake: ScriptedModel, cache_dir: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--model", fake.model, "--cache-dir", str(cache_dir)]
    assert main(["checklist", "--task", TASK, "--dimension", "consistency",
                 "--dimension", "tone=The response is neutral.", *common]) == 0
    out = capsys.readouterr().out
    checklist = Checklist.model_validate_json(out)
    assert checklist.dimensions["tone"] == "The response is neutral."
    assert [q.id for q in checklist.questions] == ["consistency-1", "consistency-2", "tone-1", "tone-2"]

    (tmp_path / "checklist.json").write_text(out, encoding="utf-8")
    (tmp_path / "summary.txt").write_text(SUMMARY, encoding="utf-8")
    (tmp_path / "article.txt").write_text(ARTICLE, encoding="utf-8")
    fake.answers = {"Does the response meet tone check 2?": "no"}
    assert main(["eval", "--checklist", str(tmp_path / "checklist.json"), "--output", str(tmp_path / "summary.txt"),
                 "--source", str(tmp_path / "article.txt"), *common]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["scores"] == {"consistency": 1.0, "tone": 0.5}
    assert data["overall"] == 0.75
    assert data["errors"] == 0
    assert [v["answer"] for v in data["verdicts"]] == ["yes", "yes", "yes", "no"]
    assert all(ARTICLE in r.user for r in fake.requests if r.kind == "verdict")


def test_cli_eval_with_error_verdicts_exits_2(fake: ScriptedModel, cache_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "checklist.json").write_text(make_checklist(2).model_dump_json(), encoding="utf-8")
    (tmp_path / "summary.txt").write_text(SUMMARY, encoding="utf-8")
    fake.answers = {"Is consistency check 1 met by the response?": "not json"}
    code = main(["eval", "--checklist", str(tmp_path / "checklist.json"), "--output", str(tmp_path / "summary.txt"),
                 "--model", fake.model, "--cache-dir", str(cache_dir)])
    data = json.loads(capsys.readouterr().out)
    assert code == 2
    assert data["errors"] == 1
    assert data["verdicts"][0]["answer"] == "error"


def test_cli_reports_bad_input_on_stderr(fake: ScriptedModel, cache_dir: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["checklist", "--task", TASK, "--dimension", "helpfulness", "--model", fake.model,
                 "--cache-dir", str(cache_dir)])
    captured = capsys.readouterr()
    assert code == 2
    assert "bineval: error: unknown dimension 'helpfulness'" in captured.err
    assert captured.out == ""


def test_the_provider_set_up_does_not_count_against_the_deadline(fake: ScriptedModel, cache_dir: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 20, item 9: a cold provider set-up (litellm's import took 14 s on a loaded machine) longer than the
    whole budget of the evaluation (timeout 0.5 s, no retry: 1.5 s) still leaves the question its time."""
    from pytest_bineval.llm import client

    real, slow = client.ensure_provider, [1.7]

    def cold_set_up(model: str) -> None:
        if slow:
            time.sleep(slow.pop())  # the first set-up only, as an import is
        real(model)

    monkeypatch.setattr(client, "ensure_provider", cold_set_up)
    result = evaluate(SUMMARY, make_checklist(2), ARTICLE, **opts(fake, cache_dir, cache="off", timeout=0.5,
                                                                  retries=0, concurrency=2))
    assert [v.answer for v in result.verdicts] == ["yes", "yes"], [v.error for v in result.verdicts]
    assert result.usage.llm_calls == 2 and not slow
