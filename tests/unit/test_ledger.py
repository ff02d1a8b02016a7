"""The run ledger: one field-driven merge (xdist workers, separate runs) and a JSON round trip."""

from __future__ import annotations

from dataclasses import fields

from pytest_bineval.models import ConfirmCost, Evaluation, Question, Usage, Verdict
from pytest_bineval.report.comparison import KeptInput
from pytest_bineval.report.document import PinAction
from pytest_bineval.report.ledger import RunLedger
from pytest_bineval.report.record import EvaluationRecord, UnscoredTest


def _record(test: str) -> EvaluationRecord:
    q = Question(id="fluency-1", dimension="fluency", text="Is it fluent?")
    verdict = Verdict(question_id=q.id, dimension="fluency", question=q.text, answer="yes")
    ev = Evaluation(task="T", model="m", dimensions=["fluency"], verdicts=[verdict])
    return EvaluationRecord.build(test=test, evaluation=ev, thresholds={"fluency": 0.5}, questions=[q],
                                  checklist_status="pinned")


def _ledger(name: str, calls: int) -> RunLedger:
    return RunLedger(records=[_record(f"t.py::{name}")], usage=Usage(llm_calls=calls, prompt_tokens=10 * calls),
                     checklist_usage=Usage(llm_calls=1, prompt_tokens=calls), checklists_generated=1,
                     pins_written=[f"pin-{name}"], unpinned={f"u-{name}", "shared"},
                     pin_actions=[PinAction(action="created", path=f"__bineval__/t/{name}.json", task="T")],
                     unscored=[UnscoredTest.build(f"t.py::{name}-x", "NoTaskError", "no task")],
                     failed_tests={f"t.py::{name}"}, ran_tests={f"t.py::{name}"},
                     collected_tests={f"t.py::{name}", "t.py::deselected"}, rerun_evaluations=calls,
                     budget_refused=calls,
                     dimensions_checked={name}, dimensions_defined={f"d-{name}"}, marker_threshold_keys={f"k-{name}"},
                     notes=[f"note {name}"], kept_inputs=[KeptInput(key=f"t.py::{name}", output="o", source=None)],
                     confirm_cost=ConfirmCost(questions=2 * calls, reasked=calls, reasks=calls,
                                              usage=Usage(llm_calls=calls)))


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
    assert merged.rerun_evaluations == merged.budget_refused == 3
    assert merged.dimensions_checked == {"a", "b"}
    assert merged.marker_threshold_keys == {"k-a", "k-b"}
    assert merged.dimensions_defined == {"d-a", "d-b"}
    assert merged.notes == ["note a", "note b"]
    assert [k.key for k in merged.kept_inputs] == ["t.py::a", "t.py::b"]
    assert (merged.confirm_cost.questions, merged.confirm_cost.reasks, merged.confirm_cost.usage.llm_calls) == (6, 3, 3)
    for f in fields(RunLedger):  # a field added later is merged too, or this test names it
        assert getattr(merged, f.name) != getattr(RunLedger(), f.name), f.name


def test_json_round_trip_keeps_every_field_and_an_older_payload_reads() -> None:
    ledger = _ledger("a", 4)
    again = RunLedger.loads(ledger.dumps())
    assert again == ledger
    assert RunLedger.from_json({"records": []}) == RunLedger()  # a field it lacks keeps its empty default
