"""Answer first, explain only where the explain mode asks (``--bineval-explain``), with the scripted fake judge.

Both request shapes are exercised: ``turns`` (a hosted model: an answer-only JSON request, then an explanation
request that repeats the same messages plus the answer) and ``prefill`` (a provider that continues an assistant
prefill, like the embedded model: ``{"answer": "`` + one token, then ``... "explanation": "`` + text).
The same behaviour on the real embedded model is tested in ``test_local_model.py``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from support import logprobs_entry, scripted_logprobs

from pytest_bineval import Checklist, Question, evaluate
from pytest_bineval.engine import run_sync
from pytest_bineval.judge import (
    ANSWER_MAX_TOKENS,
    ANSWER_PREFILL,
    explanation_prefill,
    judge,
    judge_messages,
    verdict_key,
)
from pytest_bineval.llm.cache import ResponseCache
from pytest_bineval.llm.client import LLMClient, ModelSettings, p_yes_at
from pytest_bineval.models import EXPLAIN_MODES, ExplainMode
from pytest_bineval.testing import ScriptedModel

pytest_plugins = ["pytester"]

TASK = "Summarize the news article in 2-3 sentences for a busy reader."
ARTICLE = "The town council voted 7-2 on Monday to build a new library by 2027."
SUMMARY = "The council approved a new library, due in 2027."
ANSWERS = {"Is check 1 met?": "yes", "Is check 2 met?": "no", "Is check 3 met?": "no", "Is check 4 met?": "yes"}
CHECKLIST = Checklist(task=TASK, dimensions={"consistency": "c"},
                      questions=[Question(id=f"consistency-{i}", dimension="consistency", text=q)
                                 for i, q in enumerate(ANSWERS, 1)])
EXPLAINED = {"failing": {"Is check 2 met?", "Is check 3 met?"}, "all": set(ANSWERS), "none": set()}


@pytest.fixture(params=["turns", "prefill"])
def shape(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def model(fake: ScriptedModel, shape: str) -> ScriptedModel:
    """The fake judge in either request shape (``prefill``: it continues an assistant prefill)."""
    fake.prefill = shape == "prefill"
    fake.register()  # the handler reads whether it continues a prefill when it is made
    fake.answers = ANSWERS
    return fake


def run(fake: ScriptedModel, cache_dir: Path, explain: ExplainMode, **more: Any) -> Any:
    return evaluate(SUMMARY, CHECKLIST, ARTICLE, model=fake.model, cache_dir=str(cache_dir), explain=explain,
                    **more)


@pytest.mark.parametrize("explain", EXPLAIN_MODES)
def test_explanations_exactly_where_the_mode_asks(model: ScriptedModel, cache_dir: Path, explain: ExplainMode) -> None:
    result = run(model, cache_dir, explain)
    assert [v.answer for v in result.verdicts] == list(ANSWERS.values())
    explained = {v.question for v in result.verdicts if v.explanation}
    assert explained == EXPLAINED[explain]
    for v in result.verdicts:  # prefill: the judge's head "Because the response" + the fake's " is scripted ..."
        if v.explanation:
            assert v.explanation in (f"scripted {v.answer} for: {v.question}",
                                     f"Because the response is scripted {v.answer} for: {v.question}")
    assert {v.explain for v in result.verdicts} == {explain}
    # P(yes) comes from the answer token's logprobs in both shapes (the fake gives 0.9 to its answer)
    assert [round(v.p_yes or 0, 6) for v in result.verdicts] == [0.9, 0.1, 0.1, 0.9]
    # requests: one answer request per question, one explanation request per explained verdict
    assert model.calls_of("verdict") == 4
    assert model.calls_of("explanation") == len(EXPLAINED[explain])
    assert len(model.requests) == 4 + len(EXPLAINED[explain])
    # usage counts both kinds of call
    assert result.usage.llm_calls == len(model.requests)
    assert result.usage.completion_tokens > 0 and result.usage.cache_hits == 0


def test_turns_shape_answer_only_then_the_same_prefix_plus_the_answer(fake: ScriptedModel, cache_dir: Path) -> None:
    model = fake
    model.answers = ANSWERS
    run(model, cache_dir, "failing")
    (answer,) = [r for r in model.requests if r.kind == "verdict" and r.question == "Is check 2 met?"]
    (explanation,) = [r for r in model.requests if r.kind == "explanation" and r.question == "Is check 2 met?"]
    assert answer.params["max_tokens"] == ANSWER_MAX_TOKENS
    assert answer.params["logprobs"] is True and answer.params["top_logprobs"] >= 5
    schema = answer.params["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]) == {"answer"}
    # the explanation request repeats the answer request's messages (prompt caching), then the answer
    assert explanation.messages[: len(answer.messages)] == answer.messages
    assert explanation.messages[len(answer.messages)] == {"role": "assistant", "content": '{"answer": "no"}'}
    assert explanation.messages[-1]["role"] == "user" and "Explain" in explanation.messages[-1]["content"]
    assert "logprobs" not in explanation.params


def test_prefill_shape_one_token_then_continue_into_the_explanation(fake: ScriptedModel, cache_dir: Path) -> None:
    model = fake
    model.prefill = True
    model.register()
    model.answers = ANSWERS
    run(model, cache_dir, "failing")
    (answer,) = [r for r in model.requests if r.kind == "verdict" and r.question == "Is check 2 met?"]
    (explanation,) = [r for r in model.requests if r.kind == "explanation" and r.question == "Is check 2 met?"]
    assert answer.messages[-1] == {"role": "assistant", "content": ANSWER_PREFILL, "prefix": True}
    assert answer.params["max_tokens"] == 1 and answer.params["top_logprobs"] >= 5
    assert "response_format" not in answer.params  # no grammar for the answer step
    # the explanation request is the same conversation, prefilled up to the explanation's value
    assert explanation.messages[:-1] == answer.messages[:-1]
    assert explanation.messages[-1] == {"role": "assistant", "content": explanation_prefill("no"), "prefix": True}
    assert explanation.params["stop"] == ['"'] and explanation.params["min_tokens"] == 1


def test_prefill_answer_token_that_is_neither_yes_nor_no_is_an_error_verdict(fake: ScriptedModel,
                                                                             cache_dir: Path) -> None:
    fake.prefill = True
    fake.register()
    fake.answers = {"Is check 1 met?": "maybe", "Is check 2 met?": "yes"}
    result = evaluate(SUMMARY, CHECKLIST.model_copy(update={"questions": CHECKLIST.questions[:2]}), ARTICLE,
                      model=fake.model, cache_dir=str(cache_dir), explain="none", retries=0)
    first, second = result.verdicts
    assert first.answer == "error" and first.error is not None and "neither yes nor no" in first.error
    assert (second.answer, second.p_yes) == ("yes", pytest.approx(0.9))


def test_p_yes_at_sums_the_spellings_of_yes_and_no() -> None:
    """The prefill answer is the likelier of yes and no over all their spellings, not the top token alone."""
    entry = {"token": "Yes", "logprob": math.log(0.4), "top_logprobs": [
        {"token": "Yes", "logprob": math.log(0.4)}, {"token": "no", "logprob": math.log(0.3)},
        {"token": " No", "logprob": math.log(0.2)}, {"token": "maybe", "logprob": math.log(0.1)}]}
    assert p_yes_at(entry) == pytest.approx(0.4 / 0.9)
    assert p_yes_at({"token": "x", "logprob": 0.0, "top_logprobs": [{"token": "x", "logprob": 0.0}]}) is None


def test_answer_at_reads_a_neither_token_only_above_the_yes_no_floor() -> None:
    from pytest_bineval.llm.parsing import MIN_YES_NO_MASS, answer_at

    assert MIN_YES_NO_MASS == 0.1
    # the judge chose "maybe" with yes and no far below it: not a confident yes (0.04 / 0.07 = 0.57)
    with pytest.raises(ValueError, match=r"neither yes nor no.*'maybe'.*0\.070.*below 0\.1"):
        answer_at("maybe", logprobs_entry("maybe", ("maybe", 0.9), ("yes", 0.04), ("no", 0.03)))
    # yes and no together outweigh the chosen token: the likelier of the two
    assert answer_at("The", logprobs_entry("The", ("The", 0.3), ("yes", 0.28), ("No", 0.25))) == (
        "yes", pytest.approx(0.28 / 0.53))
    # the embedded judge's "The" with yes and no at 0.26 (the least measured on the example project): answered
    assert answer_at("The", logprobs_entry("The", ("The", 0.5), ("yes", 0.06), ("no", 0.2))) == (
        "no", pytest.approx(0.06 / 0.26))
    # a yes/no token is the answer whatever the mass; P(yes) sums the spellings
    assert answer_at("yes", logprobs_entry("yes", ("yes", 0.2), ("no", 0.15), ("No", 0.1))) == (
        "no", pytest.approx(0.2 / 0.45))
    assert answer_at("no", None) == ("no", None)
    with pytest.raises(ValueError, match="neither yes nor no"):
        answer_at("maybe", None)


MALFORMED = {
    "non-numeric logprob": logprobs_entry("yes", ("yes", "high"), ("no", 0.1)),
    "missing logprob": {"token": "yes", "logprob": -0.1, "top_logprobs": [{"token": "yes"}, {"token": "no",
                                                                                           "logprob": -2.3}]},
    "missing token": logprobs_entry("yes", (None, 0.1), ("no", 0.2)),
    "nan logprob": logprobs_entry("yes", ("yes", math.nan), ("no", 0.1)),
    "positive logprob": logprobs_entry("yes", ("yes", 5.0), ("no", 0.1)),  # log(5): a probability above 1
    "top_logprobs not a list": {"token": "yes", "logprob": -0.1, "top_logprobs": 5},
    "entry not an object": "yes",
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_answer_logprobs_are_an_error_verdict(fake: ScriptedModel, cache_dir: Path,
                                                        monkeypatch: pytest.MonkeyPatch, case: str) -> None:
    """Never an uncaught exception, never a yes/no guessed from what could be read: an error verdict that says
    why, and a failed request in the usage."""
    fake.prefill = True
    fake.register()
    fake.answers = {"Is check 1 met?": "yes"}
    scripted_logprobs(monkeypatch, {"yes": MALFORMED[case]})
    result = evaluate(SUMMARY, CHECKLIST.model_copy(update={"questions": CHECKLIST.questions[:1]}), ARTICLE,
                      model=fake.model, cache_dir=str(cache_dir), explain="none", retries=0)
    (verdict,) = result.verdicts
    assert verdict.answer == "error" and verdict.p_yes is None
    assert verdict.error is not None and "malformed logprobs" in verdict.error
    assert (result.usage.llm_calls, result.usage.failed_requests) == (1, 1)


def test_prefill_answer_neither_yes_nor_no_below_the_floor_is_an_error_verdict(
        fake: ScriptedModel, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake.prefill = True
    fake.register()
    fake.answers = {"Is check 1 met?": "maybe", "Is check 2 met?": "The"}
    scripted_logprobs(monkeypatch, {
        "maybe": logprobs_entry("maybe", ("maybe", 0.9), ("yes", 0.04), ("no", 0.03)),
        "The": logprobs_entry("The", ("The", 0.3), ("yes", 0.28), ("No", 0.25))})
    result = evaluate(SUMMARY, CHECKLIST.model_copy(update={"questions": CHECKLIST.questions[:2]}), ARTICLE,
                      model=fake.model, cache_dir=str(cache_dir), explain="none", retries=0)
    below, above = result.verdicts
    assert below.answer == "error" and below.p_yes is None
    assert below.error is not None and "neither yes nor no" in below.error and "'maybe'" in below.error
    assert (above.answer, above.p_yes) == ("yes", pytest.approx(0.28 / 0.53))
    assert result.errors == [below]
    # both requests counted, the one without a usable answer as failed
    assert (result.usage.llm_calls, result.usage.failed_requests) == (2, 1)
    again = evaluate(SUMMARY, CHECKLIST.model_copy(update={"questions": CHECKLIST.questions[:2]}), ARTICLE,
                     model=fake.model, cache_dir=str(cache_dir), explain="none", retries=0)
    assert again.verdicts[0].answer == "error" and again.usage.cache_hits == 1  # the error verdict is not cached


def test_cache_keys_differ_by_explain_mode(model: ScriptedModel, cache_dir: Path) -> None:
    client = LLMClient(ModelSettings(model=model.model), None)
    messages = judge_messages(TASK, ARTICLE, SUMMARY, CHECKLIST.questions[0])
    keys = {verdict_key(client, messages, mode) for mode in EXPLAIN_MODES}
    assert len(keys) == 3
    first = run(model, cache_dir, "failing")
    n = len(model.requests)
    other = run(model, cache_dir, "none")  # another mode: nothing served from the failing run's entries
    assert other.usage.cache_hits == 0 and other.usage.llm_calls == 4
    assert not any(v.explanation for v in other.verdicts)
    again = run(model, cache_dir, "failing")
    assert again.usage.llm_calls == 0 and again.usage.cache_hits == 4
    assert len(model.requests) == n + 4
    assert [(v.answer, v.explanation, v.p_yes, v.explain) for v in again.verdicts] == [
        (v.answer, v.explanation, v.p_yes, v.explain) for v in first.verdicts]
    assert all(v.cached for v in again.verdicts)


def test_usage_counts_the_answer_and_the_explanation_calls(model: ScriptedModel, cache_dir: Path) -> None:
    answers_only = run(model, cache_dir / "a", "none")
    explained = run(model, cache_dir / "b", "all")
    assert explained.usage.llm_calls == answers_only.usage.llm_calls + 4
    assert explained.usage.prompt_tokens > answers_only.usage.prompt_tokens
    assert explained.usage.completion_tokens > answers_only.usage.completion_tokens


def test_a_failed_explanation_keeps_the_answer_and_says_why(model: ScriptedModel, cache_dir: Path) -> None:
    model.rules = {"explanation": lambda req: ValueError("explanations are down")}
    result = run(model, cache_dir, "failing", retries=0)
    no = result.verdicts[1]
    assert (no.answer, no.explanation) == ("no", "")
    assert no.error is not None and "no explanation" in no.error and "explanations are down" in no.error
    assert "explanations are down" in no.reason()
    assert result.errors == []  # the answer stands: not a judge error
    # every request is counted, the failed explanation request too
    assert (result.usage.llm_calls, result.usage.failed_requests) == (4 + 2, 2)  # 4 answers, 2 failed explanations
    model.rules = {}
    again = run(model, cache_dir, "failing")  # not cached: asked again, now explained
    assert again.verdicts[1].explanation and again.usage.llm_calls == 2 + 2


def test_a_retried_answer_request_is_counted(fake: ScriptedModel, cache_dir: Path) -> None:
    """The answer-only request goes through the client's one request path: an unusable reply is retried and both
    requests are counted (one of them failed)."""
    seen: list[str] = []

    def answers(req: Any) -> str:
        seen.append(req.question)
        if req.question == "Is check 1 met?" and seen.count(req.question) == 1:
            return "I think so"  # no JSON object: retried
        return str(ANSWERS[req.question])

    fake.answers = answers
    result = run(fake, cache_dir, "failing", retries=1)
    assert [v.answer for v in result.verdicts] == ["yes", "no", "no", "yes"]
    assert (result.usage.llm_calls, result.usage.failed_requests) == (4 + 1 + 2, 1)  # answers, retry, 2 explanations


def test_invalid_explain_mode_is_a_usage_error() -> None:
    from pytest_bineval import Settings, UsageError

    with pytest.raises(UsageError, match="explain: invalid choice: 'some'"):
        Settings(explain="some")  # type: ignore[arg-type]


# -- the plugin: option, ini, report ---------------------------------------------------------------------------




def test_cached_verdict_lookup_needs_no_provider(fake: ScriptedModel, cache_dir: Path) -> None:
    """The verdict is looked up before the provider is touched: a cached verdict of a model whose provider
    is not registered in this process is served."""
    fake.answers = ANSWERS
    first = run(fake, cache_dir, "failing")
    cache = ResponseCache(cache_dir)
    client = LLMClient(ModelSettings(model="unregistered-provider/judge"), cache)
    with_key = LLMClient(ModelSettings(model=fake.model), cache)
    for q in CHECKLIST.questions:
        key = verdict_key(with_key, judge_messages(TASK, ARTICLE, SUMMARY, q), "failing")
        entry = cache.get(key)
        assert entry is not None
        cache.set(verdict_key(client, judge_messages(TASK, ARTICLE, SUMMARY, q), "failing"), entry)
    again = run_sync(judge(client, SUMMARY, CHECKLIST, ARTICLE, explain="failing"))
    cache.close()
    assert [v.answer for v in again.verdicts] == [v.answer for v in first.verdicts]
    assert again.usage.llm_calls == 0 and again.usage.cache_hits == 4
