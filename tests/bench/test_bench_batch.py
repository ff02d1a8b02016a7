"""``bineval bench --batch``: the runs over a data set through the batch API of a scripted OpenAI-compatible server
(litellm's file and batch calls over HTTP on 127.0.0.1): no direct chat request, the same figures as without it,
and the reply cache filled for the next run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.cli import main
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.batch_server import BatchServer, scripted_responder


@pytest.fixture(autouse=True, scope="module")
def _litellm_imported_once() -> None:
    from pytest_bineval.llm.client import import_litellm

    import_litellm()


def _data(path: Path) -> None:
    rows = [{"input": f"The shop opens at {h} on weekdays.", "answer": f"It opens at {h}.", "human": {"q": q}}
            for h, q in (("9", 5), ("10", 4), ("noon", 2), ("8", 1))]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def _bench(tmp_path: Path, server: BatchServer, *extra: str) -> tuple[int, dict[str, Any]]:
    data = tmp_path / "judged.jsonl"
    _data(data)
    out = tmp_path / "out"
    code = main(["bench", "custom", "--data", str(data), "--source-key", "input", "--output-key", "answer",
                 "--score-key", "human.q", "--task", "Say when the shop opens.", "--dimension", "q=Correct hours.",
                 "--method", "bineval", "--model", "openai/fault", "--api-base", server.base_url,
                 "--cache-dir", str(tmp_path / "cache"), "--out", str(out), "--quiet", "--bootstrap", "20",
                 *extra])
    (result,) = out.glob("*.json")
    return code, json.loads(result.read_text(encoding="utf-8"))


def test_bench_batch_sends_no_direct_request_and_fills_the_cache(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    fake = ScriptedModel(answers=lambda req: "no" if "noon" in req.output or " 8." in req.output else "yes")
    with BatchServer(scripted_responder(fake)) as server:
        code, batched = _bench(tmp_path, server, "--batch")
        assert code == 0
        assert server.requests == 0 and server.created >= 2  # the checklist first, then the verdicts
        err = capsys.readouterr().err
        assert "bineval batch: 1 batch, 1 finished" in err
        assert "requests sent in" in err and "0 failed" in err
        calls = {k: fake.calls_of(k) for k in ("requirements", "questions", "verdict", "explanation")}
        assert (calls["requirements"], calls["questions"], calls["verdict"]) == (1, 1, 4 * 2)  # 2 questions
        lines = server.lines

        for path in (tmp_path / "out").glob("*"):
            path.unlink()
        code, again = _bench(tmp_path, server)  # without --batch: every reply from the cache
        assert code == 0 and server.requests == 0
    run, rerun = batched["methods"]["bineval"], again["methods"]["bineval"]
    assert run["status"] == rerun["status"] == "ok"
    assert run["variants"] == rerun["variants"]  # the same figures
    cost, recost = run["cost"], rerun["cost"]
    # each reply counted once, where the method used it: the checklist's in its set-up, the verdicts per item
    assert cost["llm_calls"] == lines == sum(calls.values())  # the checklist's set-up included
    assert cost["setup"]["llm_calls"] == cost["setup"]["batch_requests"] == 2
    assert (recost["llm_calls"], recost["setup"]["llm_calls"]) == (0, 0)


def test_bench_batch_is_for_runs_over_a_data_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "cost", "--batch"]) == 2
    assert "--batch is for the runs over a data set" in capsys.readouterr().err
