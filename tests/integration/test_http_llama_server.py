"""A real OpenAI-compatible judge over HTTP: llama.cpp's own server (``python -m llama_cpp.server``, from
``llama-cpp-python[server]``) serving the embedded GGUF on 127.0.0.1, reached as ``openai/smollm2`` with
``--bineval-api-base`` (the direct path: a model litellm does not know, over pooled httpx clients). It rejects
``json_schema`` (HTTP 500), takes ``json_object`` with a schema, and returns logprobs: the negotiation, the parser and
P(yes) are tested against it as it is.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support import SUPPORT_CHAT, SUPPORT_CHECKLIST

from pytest_bineval import Checklist, Question, Settings
from pytest_bineval.engine import Engine
from pytest_bineval.llm.server import SERVER_ALIAS
from pytest_bineval.models import Evaluation, Usage
from pytest_bineval.report.document import ReportDocument

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.local_model, pytest.mark.http_server]

ALIAS = SERVER_ALIAS


ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros and took three years to build."
CHECKLIST = Checklist(
    task="Summarize the article in one sentence.",
    dimensions={"consistency": "The summary states only facts from the article."},
    questions=[
        Question(id="consistency-1", dimension="consistency", text="Does the summary name the city in the article?"),
        Question(id="consistency-2", dimension="consistency", text="Is every number in the summary in the article?"),
        Question(id="consistency-3", dimension="consistency", text="Does the summary avoid facts not in the article?"),
    ],
)


def check_evaluation(result: Evaluation, stream: str) -> None:
    """What one evaluation of CHECKLIST by the server, in a fresh engine, must be in each stream mode."""
    assert [v.answer for v in result.verdicts if v.answer == "error"] == [], [v.error for v in result.verdicts]
    assert all(v.answer in ("yes", "no") for v in result.verdicts)
    # P(yes) from the server's own logprobs
    assert all(v.p_yes is not None and 0.0 <= v.p_yes <= 1.0 for v in result.verdicts)
    # json_schema was refused (HTTP 500), json_object used from then on, and said once
    assert result.usage.structured_output == {f"openai/{ALIAS}": "json_object"}
    explained = [v for v in result.verdicts if v.explanation]
    noes = sum(v.answer == "no" for v in result.verdicts)
    assert [v.answer for v in explained] == ["no"] * noes
    if stream == "auto":
        # one streamed request per question (the first asked alone: the refused json_schema request is its only
        # extra); each "yes" closed after its answer, its tokens estimated; each "no" read on to its explanation
        assert result.usage.llm_calls == 3 + 1 and result.usage.failed_requests == 1
        assert result.usage.estimated_requests == 3 - noes
        assert result.usage.not_streamed == {}
    else:
        # 3 answers, an explanation per "no" (explain=failing), and 1-3 refused json_schema requests (the three
        # questions are asked concurrently, so each may have been sent before the first refusal came back)
        refused = result.usage.llm_calls - 3 - len(explained)
        assert 1 <= refused <= 3
        assert result.usage.failed_requests == refused
        assert result.usage.estimated_requests == 0
    assert result.usage.prompt_tokens > 0 and result.usage.cost_usd is None  # tokens counted, cost unknown
    # every request to a model litellm has no price for is unpriced, the refused ones included
    assert result.usage.unpriced_requests == result.usage.llm_calls


def test_engine_against_llama_cpp_server_on_the_two_request_path(llama_server: str) -> None:
    """``--bineval-stream off``; the streamed path is the first evaluation of
    test_one_client_serves_the_run_and_the_refused_form_is_remembered."""
    engine = Engine(Settings(model=f"openai/{ALIAS}", api_base=llama_server, cache="off", concurrency=3,
                             timeout=120.0, stream="off"))
    try:
        result = engine.evaluate("Lyon opened a 40 million euro bridge.", CHECKLIST, ARTICLE)
    finally:
        engine.close()
    check_evaluation(result, "off")


def test_a_support_chat_over_http(llama_server: str) -> None:
    """A conversation judged by the server: each assistant turn's question with the turns before it, the tool checks
    with no request."""
    engine = Engine(Settings(model=f"openai/{ALIAS}", api_base=llama_server, cache="off", concurrency=3,
                             timeout=120.0))
    try:
        result = engine.evaluate(SUPPORT_CHAT, Checklist.model_validate(SUPPORT_CHECKLIST))
    finally:
        engine.close()
    judged = [v for v in result.verdicts if v.decided_by == "judge"]
    assert [v.turn for v in judged] == [None, 3, 5, 7, 9]
    assert all(v.answer in ("yes", "no") and v.p_yes is not None for v in judged), [v.error for v in judged]
    assert [(v.turn, v.answer) for v in result.verdicts if v.question_id == "helpfulness-3"] == [
        (3, "yes"), (5, "no"), (7, "yes"), (9, "yes")]
    # one streamed request per judged question (the first asked alone: the refused json_schema request is its only
    # extra); the six code-decided verdicts sent nothing
    assert result.usage.llm_calls == len(judged) + 1 and result.usage.failed_requests == 1


PROJECT = f'''
import pytest
from pytest_bineval import Checklist, assert_passes

CHECKLIST = Checklist.model_validate_json({CHECKLIST.model_dump_json()!r})
ARTICLE = {ARTICLE!r}

@pytest.mark.parametrize("summary", ["Lyon opened a 40 million euro bridge.", "Paris built a tunnel in 2020."])
def test_summary(summary):
    ev = assert_passes(summary, checklist=CHECKLIST, source=ARTICLE, threshold=0.0)
    assert all(v.p_yes is not None for v in ev.verdicts)
'''


def test_assert_passes_through_the_plugin_then_from_the_cache(pytester: pytest.Pytester, llama_server: str) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_real=PROJECT)
    # a generous timeout: on a loaded machine the server answers its queued requests one by one, and a request
    # that waits past the default 120 s is retried (one more request than the count below)
    args = [f"--bineval-model=openai/{ALIAS}", f"--bineval-api-base={llama_server}", "--bineval-concurrency=3",
            "--bineval-cache-dir=cache", "--bineval-timeout=900"]
    # in-process: the worker's litellm and plugin modules are already imported (no subject here needs a fresh process)
    first = pytester.runpytest_inprocess(*args, "--bineval-report=first.json")
    first.assert_outcomes(passed=2)
    first.stdout.fnmatch_lines([f"judge openai/{ALIAS}: structured output (json_schema) not supported, using "
                                "json_object"])
    report = ReportDocument.load(pytester.path / "first.json")
    assert report.totals.judge_errors == 0 and report.totals.questions == 6
    # one streamed request per question, and the refused json_schema request (the first question is asked alone)
    assert report.totals.llm_calls == 6 + 1
    assert all(v.p_yes is not None for e in report.evaluations for v in e.verdicts)

    again = pytester.runpytest_inprocess(*args, "--bineval-report=again.json")
    again.assert_outcomes(passed=2)
    rerun = ReportDocument.load(pytester.path / "again.json")
    assert (rerun.totals.llm_calls, rerun.totals.cache_hits) == (0, 6)
    again.stdout.fnmatch_lines(["*requests: 0, cache hits: 6*"])

    def answers(doc: ReportDocument) -> list[tuple[str, str, str, float | None]]:
        return sorted((e.test, v.question_id, v.answer, v.p_yes) for e in doc.evaluations for v in e.verdicts)

    assert answers(report) == answers(rerun)
    assert json.loads((pytester.path / "again.json").read_text())["evaluations"][0]["verdicts"][0]["cached"]


def test_one_client_serves_the_run_and_the_refused_form_is_remembered(llama_server: str, tmp_path: Path) -> None:
    """The direct path against the real server: one HTTP client (keep-alive) per engine for all its evaluations,
    closed at the end; the json_schema refusal learned in one run is read from the reply cache by the next (issues
    32 and 33, item 17). The second run needs one evaluation only: what it shows is its first request."""
    def run(*outputs: str) -> list[Evaluation]:
        engine = Engine(Settings(model=f"openai/{ALIAS}", api_base=llama_server, cache_dir=str(tmp_path),
                                 concurrency=3, timeout=120.0))
        try:
            evaluations = [engine.evaluate(text, CHECKLIST, ARTICLE) for text in outputs]
            assert engine.http.made["httpx"] == 1 and engine.http.made.get("ssl", 0) == 0
        finally:
            engine.close()
        assert engine.http.open_clients() == 0
        return evaluations

    evaluations = run("Lyon opened a 40 million euro bridge.", "Lyon opened a 40 million euro bridge. It is new.")
    check_evaluation(evaluations[0], "auto")  # the streamed path of a fresh engine: the refusal, then a stream each
    first = Usage.total([e.usage for e in evaluations])
    assert first.failed_requests == 1 and first.llm_calls == 6 + 1
    second = Usage.total([e.usage for e in run("Lyon built a bridge for 40 million euros.")])  # asked again
    assert (second.llm_calls, second.failed_requests, second.cache_hits) == (3, 0, 0)
    assert second.structured_output == {f"openai/{ALIAS}": "json_object"}


def test_the_direct_path_and_litellm_give_the_same_verdicts(llama_server: str) -> None:
    """The same questions through the direct path (``openai/<alias>``: a model litellm does not know, over the
    engine's pooled httpx client) and through litellm (``hosted_vllm/<alias>``: a provider the direct path never
    takes, over litellm's own HTTP client), at temperature 0 against the same server: the same verdicts, every
    request counted on both. One output (its three questions) is enough for the comparison: the one whose facts are
    not the article's, so that the judge has a reason to say "no" (an explanation request on each path too)."""
    def judge(model: str) -> tuple[list[str], Engine]:
        engine = Engine(Settings(model=model, api_base=llama_server, cache="off", concurrency=1, timeout=120.0,
                                 stream="off", temperature=0.0))
        try:
            answers = [v.answer for v in engine.evaluate("Paris built a tunnel in 2020.", CHECKLIST, ARTICLE).verdicts]
        finally:
            engine.close()
        return answers, engine

    direct, engine = judge(f"openai/{ALIAS}")
    assert engine.http.made["httpx"] == 1  # the direct path: one pooled client
    through_litellm, other = judge(f"hosted_vllm/{ALIAS}")
    assert other.http.made.get("httpx", 0) == 0  # litellm's own client, not the direct path's
    assert "error" not in direct and len(direct) == 3
    assert through_litellm == direct
    for e in (engine, other):
        assert e.usage.llm_calls >= 3 and e.usage.prompt_tokens > 0
