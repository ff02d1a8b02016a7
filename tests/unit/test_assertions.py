"""assert_passes outside pytest: one request resolved once, one engine for the checklist and the judging."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval import BinevalAssertionError, assert_passes
from pytest_bineval.assertions import AssertionRequest
from pytest_bineval.engine import Engine
from pytest_bineval.scope import OutsideScope, reset_current, set_current
from pytest_bineval.testing import ScriptedModel


@pytest.fixture
def outside_pytest(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Engine]]:
    """No current test context (as in a script), the default cache in a temporary place; yields the engines
    made meanwhile."""
    monkeypatch.chdir(cache_dir.parent)
    made: list[Engine] = []
    init = Engine.__init__

    def counting(self: Engine, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(Engine, "__init__", counting)
    token = set_current(None)
    yield made
    reset_current(token)


def test_one_engine_makes_the_checklist_and_judges_the_output(fake: ScriptedModel,
                                                              outside_pytest: list[Engine]) -> None:
    ev = assert_passes("A fine summary.", "fluency", task="Summarize the article.", model=fake.model)
    assert ev.scores["fluency"] == 1.0
    assert len(outside_pytest) == 1  # was two: one to generate the checklist, one to judge
    (engine,) = outside_pytest
    assert engine.usage.llm_calls == engine.ledger.checklist_usage.llm_calls + ev.usage.llm_calls


def test_the_request_is_resolved_once_with_the_input_checked_first(outside_pytest: list[Engine]) -> None:
    with pytest.raises(TypeError):
        AssertionRequest.build(b"bytes", task="T")  # before anything else: no engine, no request
    request = AssertionRequest.build("out", ["fluency"], task="T", threshold={"fluency": 0.4})
    assert (request.task, request.names, request.strategy, request.score_kind) == ("T", ["fluency"], "bineval",
                                                                                   "share")
    assert request.thresholds(["fluency"]) == {"fluency": 0.4}
    assert isinstance(request.scope, OutsideScope) and request.location is not None and request.location.line > 0
    assert outside_pytest == []


def test_a_failing_assertion_outside_pytest_raises_with_reasons(fake: ScriptedModel,
                                                                outside_pytest: list[Engine]) -> None:
    fake.answers = {"Does the response meet fluency check 1?": "no", "Does the response meet fluency check 2?": "no"}
    with pytest.raises(BinevalAssertionError, match="fluency"):
        assert_passes("A summary.", "fluency", task="Summarize the article.", model=fake.model)


OUTSIDE = '''
import sys
from pytest_bineval import BinevalAssertionError, Checklist, Question, assert_passes
from pytest_bineval.testing import ScriptedModel

fake = ScriptedModel(provider="ofake", answers={"Does the response meet fluency check 2?": "no"}).register()
ev = assert_passes("A summary.", dimension="fluency", task="Summarize the article.", threshold=0.5,
                   model=fake.model)
assert ev.scores["fluency"] == 0.5, ev.scores
q = Question(id="f-1", dimension="fluency", text="Does the response meet fluency check 2?")
checklist = Checklist(task="Summarize.", dimensions={"fluency": "Reads well."}, questions=[q])
try:
    assert_passes("A summary.", checklist=checklist, model=fake.model)
except BinevalAssertionError as exc:
    assert "[fluency] Does the response meet fluency check 2?" in str(exc), str(exc)
    print("raised as expected")
else:
    sys.exit("no assertion error")
'''


def test_assert_passes_outside_pytest_with_task_and_with_checklist(tmp_path: Path) -> None:
    """No plugin, no test context: task= generates a checklist, checklist= is used as given."""
    proc = subprocess.run([sys.executable, "-c", OUTSIDE], capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "raised as expected" in proc.stdout
