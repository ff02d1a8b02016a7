"""The parts of ``--bineval-batch`` without a pytest run or a server: options, reading a batch's output, prices,
the record of batches and its lock, the seam's answers and counts, the budget, the summary (its merge and lines)."""

from __future__ import annotations

import argparse
import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.batch.options import BatchOptions, check_batch, duration_value, failures_value
from pytest_bineval.batch.provider import BatchStatus, batch_line, chunks, read_results, reply_usage
from pytest_bineval.batch.registry import BatchEntry, DirRegistry
from pytest_bineval.batch.runner import BatchRunner, _explained
from pytest_bineval.batch.seam import DEFERRED, BatchSeam, Recorded, Stored, batch_key, group_of
from pytest_bineval.budget import Budget
from pytest_bineval.errors import CallError, UsageError
from pytest_bineval.llm.cache import ResponseCache
from pytest_bineval.llm.client import LLMClient, ModelSettings
from pytest_bineval.llm.parsing import ReplyParts
from pytest_bineval.llm.seam import Deferred
from pytest_bineval.models import Usage
from pytest_bineval.outputs.batch import batch_lines
from pytest_bineval.report.batch import BatchSummary
from pytest_bineval.report.ledger import RunLedger
from pytest_bineval.testing.faults import completion


# -- options ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "seconds"), [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("6h", 21600.0),
                                               ("1.5h", 5400.0), ("1d", 86400.0), ("0", 0.0)])
def test_durations(text: str, seconds: float) -> None:
    assert duration_value(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5", "5 weeks", "1h30m"])
def test_a_bad_duration_is_an_argparse_error(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration"):
        duration_value(text)


def test_failures_and_cache_mode() -> None:
    assert (failures_value("direct"), failures_value("error")) == ("direct", "error")
    with pytest.raises(argparse.ArgumentTypeError, match="invalid choice"):
        failures_value("retry")
    check_batch(True, "on")
    check_batch(False, "replay")
    with pytest.raises(UsageError, match="needs --bineval-cache on"):
        check_batch(True, "read-only")


# -- what a batch returns ---------------------------------------------------------------------------------------
def _line(key: str, status: int, body: dict[str, Any], error: Any = None) -> str:
    return json.dumps({"id": "r", "custom_id": key, "response": {"status_code": status, "body": body}, "error": error})


def test_results_replies_failures_malformed_and_missing() -> None:
    keys = ["a", "b", "c", "d", "e"]
    output = "\n".join([
        _line("a", 200, completion('{"answer": "yes"}')),
        '{"custom_id": "b", "response": {"status_code": 200, "bo',  # cut in half: malformed
        _line("zz", 200, completion("x")),  # not a request of this batch
        _line("a", 200, completion('{"answer": "no"}')),  # a second line for a: the first counts
        _line("e", 200, {"choices": []}),
    ]).encode()
    errors = "\n".join([
        _line("c", 400, {"error": {"message": "bad param"}}),
        json.dumps({"custom_id": "d", "response": None, "error": {"code": "batch_expired", "message": "too late"}}),
    ]).encode()
    r = read_results(output, errors, keys, BatchStatus("completed"))
    assert list(r.replies) == ["a"] and json.loads(r.replies["a"]["choices"][0]["message"]["content"]) == {
        "answer": "yes"}
    assert r.failures == {"c": "HTTP 400: bad param", "d": "batch_expired: too late",
                          "e": "the batch's reply to it has no choices",
                          "b": "the batch's output has no usable line for this request (a malformed line, or none)"}
    assert r.malformed == 2


@pytest.mark.parametrize(("status", "why"), [
    ("expired", "the batch expired (its 24-hour window ended) before this request was run"),
    ("cancelled", "the batch was cancelled before this request was run"),
    ("failed", "the batch failed as a whole: the file is not JSONL"),
])
def test_a_request_without_a_line_says_why_the_batch_ended(status: str, why: str) -> None:
    r = read_results(None, None, ["k"], BatchStatus(status, errors=["the file is not JSONL"]))
    assert r.failures == {"k": why}


def test_logprob_bytes_are_not_kept() -> None:
    body = completion('{"answer": "yes"}', logprobs={"content": [
        {"token": "yes", "logprob": -0.1, "bytes": [121, 101, 115],
         "top_logprobs": [{"token": "yes", "logprob": -0.1, "bytes": [1]}]}]})
    kept = read_results(_line("k", 200, body).encode(), None, ["k"], BatchStatus("completed")).replies["k"]
    entry = kept["choices"][0]["logprobs"]["content"][0]
    assert "bytes" not in entry and "bytes" not in entry["top_logprobs"][0] and entry["logprob"] == -0.1


def test_lines_are_cut_into_batches_within_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_bineval.batch.provider as provider

    monkeypatch.setattr(provider, "MAX_LINES", 3)
    lines = [batch_line(f"k{i}", {"model": "m", "messages": []}) for i in range(7)]
    assert [len(c) for c in chunks(lines)] == [3, 3, 1]
    monkeypatch.setattr(provider, "MAX_BYTES", 2 * len(json.dumps(lines[0])) + 2)
    assert [len(c) for c in chunks(lines)] == [2, 2, 2, 1]  # two lines fit in the bytes allowed


# -- prices -----------------------------------------------------------------------------------------------------
def test_a_reply_costs_the_batch_price_or_is_unpriced() -> None:
    from pytest_bineval.llm.client import import_litellm

    prices = import_litellm().model_cost["gpt-4o-mini"]
    body = completion("x")  # 10 prompt + 5 completion tokens
    priced = reply_usage(body, "openai/gpt-4o-mini")
    assert priced.cost_usd == pytest.approx(10 * prices["input_cost_per_token_batches"]
                                            + 5 * prices["output_cost_per_token_batches"])
    assert (priced.llm_calls, priced.batch_requests, priced.unpriced_requests) == (1, 1, 0)
    unknown = reply_usage(body, "openai/a-model-litellm-does-not-know")
    assert (unknown.cost_usd, unknown.unpriced_requests) == (None, 1)
    cached = {**body, "usage": {"prompt_tokens": 10, "completion_tokens": 5, "prompt_tokens_details": {
        "cached_tokens": 4}}}
    assert reply_usage(cached, "openai/gpt-4o-mini").cost_usd is None  # no batch price for cached tokens: unpriced
    assert reply_usage(cached, "openai/gpt-5-mini").unpriced_requests == 0  # it has one


def test_explained_replies_need_no_further_round() -> None:
    assert _explained('{"answer": "no", "explanation": "It omits the date."}')
    assert not _explained('{"answer": "no"}')
    assert not _explained('{"answer": "no", "explanation": " "}')
    assert not _explained("no JSON")
    assert not _explained(None)


# -- the record of batches ----------------------------------------------------------------------------------------
def test_the_record_knows_what_is_pending_and_prunes_old_batches(tmp_path: Path) -> None:
    registry = DirRegistry(tmp_path)
    assert registry.read().batches == {}
    with registry.edit() as data:
        data.batches["b1"] = BatchEntry(id="b1", provider="openai", model="openai/m", keys=["k1", "k2"],
                                        submitted=time.time())
        data.batches["b2"] = BatchEntry(id="b2", provider="openai", model="openai/m", keys=["k3"], state="fetched",
                                        fetched_at=time.time() - 30 * 86400)
    data = registry.read()
    assert data.pending() == {"k1": "b1", "k2": "b1"}
    assert list(data.batches) == ["b1"]  # fetched a month ago: pruned
    assert "api_key" not in (tmp_path / "batches" / "registry.json").read_text()
    with pytest.raises(RuntimeError), registry.edit() as data:  # a failed edit writes nothing
        data.batches.clear()
        raise RuntimeError("boom")
    assert list(registry.read().batches) == ["b1"]


def test_the_record_is_edited_by_one_process_at_a_time(tmp_path: Path) -> None:
    registry = DirRegistry(tmp_path)
    inside = threading.Event()
    order: list[str] = []

    def first() -> None:
        with registry.edit():
            inside.set()
            time.sleep(0.3)
            order.append("first")

    thread = threading.Thread(target=first)
    thread.start()
    inside.wait(5)
    with registry.edit():  # another open file description: it waits for the first to finish
        order.append("second")
    thread.join()
    assert order == ["first", "second"]


def test_an_unreadable_record_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "batches").mkdir()
    (tmp_path / "batches" / "registry.json").write_text("{not json")
    with pytest.raises(UsageError, match=r"cannot be read.*bineval batch status"):
        DirRegistry(tmp_path).read()


def test_workers_meet(tmp_path: Path) -> None:
    registry = DirRegistry(tmp_path)
    registry.arrive("run1", "gw0", 2)
    assert registry.meeting("run1").done == ["gw0"]  # type: ignore[union-attr]
    registry.arrive("run1", "gw1", 2, gave_up="timeout")
    meeting = registry.meeting("run1")
    assert meeting is not None and meeting.done == ["gw0", "gw1"] and meeting.gave_up == {"gw1": "timeout"}


# -- the seam ---------------------------------------------------------------------------------------------------
def _client(seam: BatchSeam) -> LLMClient:
    return LLMClient(ModelSettings(model="openai/gpt-4o-mini", api_base="http://127.0.0.1:9/v1"), None, batch=seam)


def _request(client: LLMClient, text: str) -> dict[str, Any]:
    return client.build_request([{"role": "user", "content": text}], schema_name="verdict",
                                schema={"type": "object"}, max_tokens=16)


def _read(parts: ReplyParts) -> str:
    return json.loads(parts.content)["answer"]  # type: ignore[no-any-return]


def _ask(client: LLMClient, request: dict[str, Any]) -> Any:
    return asyncio.run(client.send(request, _read, schema=("verdict", {"type": "object"})))


def test_a_first_pass_records_and_sends_nothing(tmp_path: Path) -> None:
    seam = BatchSeam(ResponseCache(tmp_path / "cache"))
    client = _client(seam)
    seam.collecting = True
    request = _request(client, "q1")
    for _ in range(2):  # asked twice, recorded once
        with pytest.raises(Deferred, match="recorded for the batch"):
            _ask(client, request)
    (recorded,) = seam.take_recorded()
    assert recorded.key == batch_key(client.key_of(request)) and seam.deferrals == 2
    assert recorded.group == group_of("openai/gpt-4o-mini", "http://127.0.0.1:9/v1")
    assert recorded.group.name == "gpt-4o-mini" and recorded.body["model"] == "gpt-4o-mini"
    assert "api_base" not in recorded.body and recorded.body["response_format"]["json_schema"]["name"] == "verdict"
    assert not recorded.checklist
    assert seam.take_recorded() == []


def test_a_kept_reply_is_counted_once_then_a_cache_hit(tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache")
    seam = BatchSeam(cache)
    client = _client(seam)
    request = _request(client, "q1")
    key = batch_key(client.key_of(request))
    cost = Usage(llm_calls=1, batch_requests=1, prompt_tokens=10, completion_tokens=5, cost_usd=0.5)
    seam.keep(key, Stored(completion('{"answer": "no"}'), cost))
    seam.collecting = True
    assert _ask(client, request)[0] == "no" and _ask(client, request)[2] == Usage()  # a first pass counts nothing
    seam.collecting = False
    assert _ask(client, request)[2] == cost  # the final pass counts it, once
    assert _ask(client, request)[2] == Usage(cache_hits=1, cost_usd=0.0)
    assert seam.take_uncounted() == (Usage(), Usage(), 0)
    # a reply another process fetched (in the reply cache only) is a cache hit here
    other = _request(client, "q2")
    cache.set(batch_key(client.key_of(other)), {"response": completion('{"answer": "yes"}'), "batch": "b"})
    assert _ask(client, other)[0] == "yes"
    assert _ask(client, other)[2] == Usage(cache_hits=1, cost_usd=0.0)


def test_replies_not_used_are_counted_at_the_end(tmp_path: Path) -> None:
    seam = BatchSeam(None)
    cost = Usage(llm_calls=1, batch_requests=1, cost_usd=0.25)
    seam.keep("a", Stored(completion("x"), cost))
    seam.keep("b", Stored(completion("x"), cost, checklist=True))
    seam.keep("c", Stored(completion("x"), None))  # fetched by another process: counted there
    judging, checklists, n = seam.take_uncounted()
    assert (judging.cost_usd, checklists.cost_usd, n) == (0.25, 0.25, 2)
    assert seam.take_uncounted() == (Usage(), Usage(), 0)


def test_a_failed_request_is_asked_directly_in_the_final_pass() -> None:
    seam = BatchSeam(None, "direct")
    client = _client(seam)
    request = _request(client, "q1")
    seam.fail(batch_key(client.key_of(request)), "the batch b failed it: HTTP 400")
    seam.collecting = True
    with pytest.raises(Deferred):  # a first pass does not record it again
        _ask(client, request)
    assert seam.take_recorded() == []
    seam.collecting = False
    assert asyncio.run(seam.answer(client, request, _read, schema=None, cache_prefix=None)) is None  # sent as usual
    assert seam.counts.retried == 1


def test_a_failed_request_is_a_judge_error_when_asked() -> None:
    seam = BatchSeam(None, "error")
    client = _client(seam)
    request = _request(client, "q1")
    seam.fail(batch_key(client.key_of(request)), "the batch b failed it: HTTP 400")
    with pytest.raises(CallError, match=r"HTTP 400 \(--bineval-batch-failures error: not asked again\)"):
        _ask(client, request)
    assert seam.counts.errors == 1


def test_an_unusable_reply_fails_its_request() -> None:
    seam = BatchSeam(None, "error")
    client = _client(seam)
    request = _request(client, "q1")
    seam.keep(batch_key(client.key_of(request)), Stored(completion("not json"), Usage(llm_calls=1)))
    with pytest.raises(CallError, match="the batch's reply could not be used"):
        _ask(client, request)
    assert seam.counts.unusable == 1


def test_a_request_no_batch_covered_is_sent_and_counted() -> None:
    seam = BatchSeam(None)
    client = _client(seam)
    assert asyncio.run(seam.answer(client, _request(client, "q"), _read, schema=None, cache_prefix=None)) is None
    assert seam.counts.missed == 1
    assert DEFERRED.startswith("recorded for the batch")


def test_in_process_models_are_asked_in_a_first_pass_and_counted_in_the_final_one(fake: Any) -> None:
    seam = BatchSeam(None)
    client = LLMClient(ModelSettings(model=fake.model), None, batch=seam)
    request = _request(client, "Question: Is the response short?")
    seam.collecting = True
    first = _ask(client, request)
    assert first[0] == "yes" and first[2] == Usage() and fake.calls_of("verdict") == 1
    seam.collecting = False
    final = _ask(client, request)
    assert final[0] == "yes" and final[2].llm_calls == 1 and fake.calls_of("verdict") == 1  # not asked again
    assert _ask(client, request)[2].cache_hits == 1


# -- the budget -------------------------------------------------------------------------------------------------
class _Engine:
    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.usage = Usage()
        self.settings = type("S", (), {"extra": {}, "timeout": 60.0, "confirm": 0})()


def test_the_budget_holds_a_batch_to_its_estimate(tmp_path: Path) -> None:
    seam = BatchSeam(None)
    engine = _Engine(Budget(500, "tokens"))
    runner = BatchRunner(engine, seam, DirRegistry(tmp_path), BatchOptions())  # type: ignore[arg-type]
    group = group_of("openai/gpt-4o-mini", None)
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "word " * 40}], "max_tokens": 100}
    recorded = [Recorded(f"k{i}", group, body) for i in range(5)]
    kept = runner._within_budget(group, recorded)
    assert 1 <= len(kept) < 5  # each line is estimated at its prompt and max_tokens
    assert set(seam.failed) == {r.key for r in recorded[len(kept):]}
    assert all("could pass the budget" in why for why in seam.failed.values())
    dollars = BatchRunner(_Engine(Budget(1.0, "usd")), BatchSeam(None), DirRegistry(tmp_path),  # type: ignore[arg-type]
                          BatchOptions())
    unknown = group_of("openai/unknown-model", None)
    assert dollars._within_budget(unknown, [Recorded("u", unknown, body)]) == []
    assert "no batch price for openai/unknown-model" in dollars.seam.failed["u"]


# -- the summary --------------------------------------------------------------------------------------------------
def test_the_summary_merges_over_workers_and_round_trips() -> None:
    a = BatchSummary(rounds=2, batches=1, submitted=9, answered=9, usage=Usage(llm_calls=9, cost_usd=0.1),
                     seconds=30.0)
    b = BatchSummary(rounds=1, resumed=1, failed=2, retried=2, seconds=45.0)
    merged = RunLedger(batch=a).merge(RunLedger(batch=b)).batch
    assert (merged.rounds, merged.batches, merged.resumed, merged.submitted, merged.failed, merged.seconds) == (
        2, 1, 1, 9, 2, 45.0)
    assert RunLedger.loads(RunLedger(batch=merged).dumps()).batch == merged
    assert not BatchSummary().used and merged.used


def test_the_summary_lines() -> None:
    lines = [text for text, _ in batch_lines(BatchSummary(
        rounds=1, batches=1, submitted=9, answered=7, failed=2, retried=2, missed=1, seconds=75.0,
        usage=Usage(llm_calls=9, cost_usd=0.0123)))]
    assert lines == [
        "batch: 9 requests sent in 1 batch (1 round); 7 answered, 2 failed; waited 1m 15s; the replies fetched "
        "cost $0.0123 at the batch price",
        "batch: 2 requests the batch failed asked again directly; 1 request in no batch asked directly (an output "
        "that changed between the two runs of its test, or a request after a failed one) (at the full price)"]
    unpriced = batch_lines(BatchSummary(rounds=1, batches=1, submitted=1, answered=1,
                                        usage=Usage(llm_calls=1, unpriced_requests=1)))
    assert unpriced[0][0].endswith("the replies fetched cost unpriced (litellm has no batch price for the model)")


def test_the_reports_mark_the_requests_sent_through_a_batch_api() -> None:
    """The JSON report's totals, the HTML report, the job summary and the PR comment each say how many requests went
    through a batch API; a run without the batch says nothing of it."""
    from pytest_bineval.outputs.github import step_summary
    from pytest_bineval.outputs.html import render_html
    from pytest_bineval.outputs.pr_comment import render
    from pytest_bineval.report.document import ReportSettings

    batched = RunLedger(usage=Usage(llm_calls=12, batch_requests=9),
                        batch=BatchSummary(rounds=1, batches=1, submitted=9, answered=9)).document(ReportSettings())
    direct = RunLedger(usage=Usage(llm_calls=12)).document(ReportSettings())
    assert batched.totals.batch_requests == 9 and batched.batch is not None and direct.batch is None
    said = "Of which through a batch API (`--bineval-batch`): 9 requests, at its batch price (about half the normal"
    assert said in step_summary(batched.evaluations, batched.totals) and said in render(batched)
    assert '<dt>through a batch API</dt><dd title="--bineval-batch' in render_html(batched)
    assert ">9 of the LLM calls</dd>" in render_html(batched)
    for text in (step_summary(direct.evaluations, direct.totals), render(direct), render_html(direct)):
        assert "batch API" not in text
