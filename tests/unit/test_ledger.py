"""The run ledger: one field-driven merge (xdist workers, separate runs) and a JSON round trip."""

from __future__ import annotations

import sys
import threading
from dataclasses import fields

from pytest_bineval.engine import Engine
from pytest_bineval.models import ConfirmCost, Evaluation, Question, Usage, Verdict
from pytest_bineval.report.batch import BatchSummary
from pytest_bineval.report.comparison import KeptInput
from pytest_bineval.report.document import PinAction
from pytest_bineval.report.ledger import RunLedger, per_test
from pytest_bineval.report.record import Asked, EvaluationRecord, UnscoredTest
from pytest_bineval.report.relay import WorkerRelay
from pytest_bineval.settings import Settings


def _record(test: str) -> EvaluationRecord:
    q = Question(id="fluency-1", dimension="fluency", text="Is it fluent?")
    verdict = Verdict(question_id=q.id, dimension="fluency", question=q.text, answer="yes")
    ev = Evaluation(task="T", model="m", dimensions=["fluency"], verdicts=[verdict])
    return EvaluationRecord.build(Asked(), ev, [q], thresholds={"fluency": 0.5}, status="pinned", test=test)


def _ledger(name: str, calls: int) -> RunLedger:
    return RunLedger(records=[_record(f"t.py::{name}")], usage=Usage(llm_calls=calls, prompt_tokens=10 * calls),
                     checklist_usage=Usage(llm_calls=1, prompt_tokens=calls), checklists_generated=1,
                     pins_written=[f"pin-{name}"], unpinned={f"u-{name}", "shared"},
                     pin_actions=[PinAction(action="created", path=f"__bineval__/t/{name}.json", task="T")],
                     unscored=[UnscoredTest.build(f"t.py::{name}-x", "NoTaskError", "no task")],
                     failed_tests={f"t.py::{name}"}, ran_tests={f"t.py::{name}"},
                     collected_tests={f"t.py::{name}", "t.py::deselected"}, rerun_evaluations=calls,
                     budget_refused=calls, cache_rejected=calls,
                     dimensions_checked={name}, dimensions_defined={f"d-{name}"}, marker_threshold_keys={f"k-{name}"},
                     notes=[f"note {name}"], kept_inputs=[KeptInput(key=f"t.py::{name}", output="o", source=None)],
                     confirm_cost=ConfirmCost(questions=2 * calls, reasked=calls, reasks=calls,
                                              usage=Usage(llm_calls=calls)),
                     batch=BatchSummary(rounds=calls, submitted=calls, usage=Usage(batch_requests=calls)))


def test_merge_adds_every_field_of_the_other_ledger() -> None:
    merged = _ledger("a", 1).merge(_ledger("b", 2))
    assert [r.test for r in merged.records] == ["t.py::a", "t.py::b"]
    assert (merged.usage.llm_calls, merged.usage.prompt_tokens) == (3, 30)
    assert (merged.checklist_usage.llm_calls, merged.checklists_generated) == (2, 2)
    assert merged.pins_written == ["pin-a", "pin-b"]
    assert merged.unpinned == {"u-a", "u-b", "shared"}
    assert [u.test for u in merged.unscored] == ["t.py::a-x", "t.py::b-x"]
    assert merged.failed_tests == merged.ran_tests == {"t.py::a", "t.py::b"}
    assert merged.collected_tests == {"t.py::a", "t.py::b", "t.py::deselected"}
    assert [a.path for a in merged.pin_actions] == ["__bineval__/t/a.json", "__bineval__/t/b.json"]
    assert merged.rerun_evaluations == merged.budget_refused == merged.cache_rejected == 3
    assert merged.dimensions_checked == {"a", "b"}
    assert merged.marker_threshold_keys == {"k-a", "k-b"}
    assert merged.dimensions_defined == {"d-a", "d-b"}
    assert merged.notes == ["note a", "note b"]
    assert [k.key for k in merged.kept_inputs] == ["t.py::a", "t.py::b"]
    assert (merged.confirm_cost.questions, merged.confirm_cost.reasks, merged.confirm_cost.usage.llm_calls) == (6, 3, 3)
    assert (merged.batch.rounds, merged.batch.submitted, merged.batch.usage.batch_requests) == (2, 3, 3)
    for f in fields(RunLedger):  # a field added later is merged too, or this test names it
        assert getattr(merged, f.name) != getattr(RunLedger(), f.name), f.name


def test_json_round_trip_keeps_every_field_and_an_older_payload_reads() -> None:
    ledger = _ledger("a", 4)
    again = RunLedger.loads(ledger.dumps())
    assert again == ledger
    assert RunLedger.from_json({"records": []}) == RunLedger()  # a field it lacks keeps its empty default


def _both(a: object, b: object) -> object:
    """What merging a per-test field of two ledgers gives: a list extended, a set united."""
    return a | b if isinstance(a, set) and isinstance(b, set) else [*a, *b]  # type: ignore[misc]


def test_every_field_survives_serialisation_the_per_test_relay_and_the_merge() -> None:
    """The one test of how the ledger travels (it replaces whole xdist runs per feature): each field, filled, must
    come through the JSON round trip, a worker's test-by-test reports to the controller (the per-test fields from
    each test's own entries, the others from the worker's latest running counts), and the merge of two ledgers. A
    new field that is not filled in ``_ledger``, or not carried by one of these, fails it."""
    a, b = _ledger("a", 1), _ledger("b", 2)
    for f in fields(RunLedger):
        assert getattr(a, f.name) != getattr(RunLedger(), f.name), f"_ledger leaves {f.name} empty"

    again = RunLedger.loads(a.dumps())  # serialisation (workeroutput)
    for f in fields(RunLedger):
        assert getattr(again, f.name) == getattr(a, f.name), f.name

    merged = _ledger("a", 1).merge(b)  # the merge (xdist, shards): both sides' value in each field
    for f in fields(RunLedger):
        assert getattr(merged, f.name) not in (getattr(a, f.name), getattr(b, f.name)), f.name

    # the entries of single tests, sent test by test (a field of a test's own is added here, on purpose)
    assert {f.name for f in fields(RunLedger) if per_test(f)} == {"records", "unscored", "failed_tests", "ran_tests",
                                                                        "kept_inputs"}
    # the relay: worker w reports test one twice (a re-run: the last attempt counts), then test two, and ends
    # without sending its ledger (Ctrl-C, a crash)
    worker, first, one, two = _ledger("w", 5), _ledger("first-attempt", 7), _ledger("one", 3), _ledger("two", 4)
    relay = WorkerRelay()
    relay.note("gw0", WorkerRelay.progress("t.py::one", _ledger("earlier", 1), first))
    relay.note("gw0", WorkerRelay.progress("t.py::one", _ledger("earlier", 2), one))
    relay.note("gw0", WorkerRelay.progress("t.py::two", worker, two))
    relayed = RunLedger()
    relay.merge_unfinished(relayed)
    assert relayed.notes[-1].startswith("bineval: pytest-xdist worker gw0 ended before sending its results")
    relayed.notes.pop()
    for f in fields(RunLedger):
        want = _both(getattr(one, f.name), getattr(two, f.name)) if per_test(f) else getattr(worker, f.name)
        assert getattr(relayed, f.name) == want, f.name
    assert relay.reported == {}

    relay.note("gw1", WorkerRelay.progress("t.py::one", worker, one))  # a worker whose ledger arrives
    arrived = RunLedger()
    relay.merge_worker(arrived, worker.dumps(), "gw1")
    relay.merge_unfinished(arrived)
    assert arrived == worker  # its test-by-test reports are dropped: counted once


def test_an_engine_and_a_tests_threads_adding_at_once_lose_nothing() -> None:
    """The engine adds its usage and the session a test's entries into the same ledger, from several threads of
    one test at once: every addition counts (one lock, the ledger's)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: a lost update would show
    try:
        engine = Engine(Settings(cache="off"))
        rounds = 300

        def spend() -> None:
            for _ in range(rounds):
                engine.add_usage(Usage(llm_calls=1, prompt_tokens=2), checklist=True)

        def find(name: str) -> None:
            for i in range(rounds):
                engine.ledger.add(RunLedger(notes=[f"{name}-{i}"], dimensions_checked={name}))

        threads = [threading.Thread(target=spend) for _ in range(3)]
        threads += [threading.Thread(target=find, args=(f"t{k}",)) for k in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    ledger = engine.ledger
    assert (ledger.usage.llm_calls, ledger.usage.prompt_tokens, ledger.checklist_usage.llm_calls) == (
        3 * rounds, 6 * rounds, 3 * rounds)
    assert len(ledger.notes) == 3 * rounds and ledger.dimensions_checked == {"t0", "t1", "t2"}


def test_the_document_lists_evaluations_and_unscored_tests_by_test_id_whatever_order_they_came_in() -> None:
    """Completion order (threads, xdist workers) and merge order (shards) change from run to run: the finished
    document, which every output lists from, is in the order of the test ids, a test's evaluations by index."""
    from pytest_bineval.report.document import ReportSettings

    def rec(test: str, index: int = 0) -> EvaluationRecord:
        return _record(test).model_copy(update={"index": index})

    came = [rec("t.py::test_c"), rec("t.py::test_a[2]", 1), rec("t.py::test_b"), rec("t.py::test_a[2]"),
            rec("t.py::test_a[1]")]
    ledger = RunLedger(records=list(came), unscored=[UnscoredTest.build(t, "NoTaskError", "no task")
                                                    for t in ("t.py::z", "t.py::y")])
    document = ledger.document(ReportSettings())
    assert [r.key for r in document.evaluations] == ["t.py::test_a[1]", "t.py::test_a[2]", "t.py::test_a[2] #1",
                                                      "t.py::test_b", "t.py::test_c"]
    assert [u.test for u in document.unscored] == ["t.py::y", "t.py::z"]
    assert ledger.records == came  # the ledger itself is left as it is
