"""--bineval-batch with the reply cache in a real Redis (a redis-server started on 127.0.0.1 by the test): the
batches' replies and the record of the batches live there, so two shards that need the same questions submit them
once (the second waits for the first one's batch), and a read-only re-run sends nothing.

Skipped only where redis-server is absent and CI is not set (.ci/run installs it)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.batch_server import BatchScript, BatchServer
from pytest_bineval.testing.faults import Received, Reply, completion

pytest_plugins = ["pytester"]

SUITE = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task="Summarize.", dimensions={"consistency": "D"}, questions=[
    Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?") for i in (1, 2)])

@pytest.mark.parametrize("i", range(2))
def test_summary(i):
    assert_passes(f"summary {i}", checklist=CHECKLIST, threshold=0.5)
'''


@pytest.fixture(autouse=True, scope="module")
def _litellm_imported_once() -> None:
    from pytest_bineval.llm.client import import_litellm

    import_litellm()


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    binary = shutil.which("redis-server")
    if binary is None:
        if os.environ.get("CI"):
            pytest.fail("redis-server is not installed and CI is set (.ci/run installs it)")
        pytest.skip("redis-server is not installed (apt-get install redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                "no", "--dir", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    import redis

    client = redis.Redis(port=port, socket_timeout=5)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.ping()
            break
        except redis.exceptions.ConnectionError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise
            time.sleep(0.05)
    client.close()
    yield f"redis://127.0.0.1:{port}/0"
    process.terminate()
    process.wait(timeout=30)


def verdicts(req: Received, index: int) -> Reply:
    text = " ".join(str(m.get("content")) for m in req.body.get("messages") or [] if m.get("role") == "user")
    answer = "no" if "Is check 2 met?" in text else "yes"
    return Reply(200, completion(json.dumps({"answer": answer, "explanation": f"It says {answer}."})))


def test_two_shards_sharing_redis_submit_a_question_once(pytester: pytest.Pytester, redis_url: str) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_it=SUITE)
    with BatchServer(verdicts, script=BatchScript(hold=True)) as server:
        def shard(*args: str) -> pytest.RunResult:
            return pytester.runpytest("--bineval-model=openai/fault", f"--bineval-api-base={server.base_url}",
                                      f"--bineval-cache-url={redis_url}", "--bineval-batch",
                                      "--bineval-report=report.json", *args)

        assert shard("--bineval-batch-timeout=0").ret == pytest.ExitCode.INTERRUPTED  # shard A submits, stops
        assert server.created == 1
        # shard B, another machine with the same tests and the same Redis: it waits for A's batch
        assert shard("--bineval-batch-timeout=0", "--bineval-cache-dir=elsewhere").ret == 2
        assert server.created == server.uploads == 1
        import redis

        record = json.loads(redis.Redis.from_url(redis_url).get("bineval:batch:registry") or b"{}")
        assert [b["state"] for b in record["batches"].values()] == ["pending"]

        server.release()
        result = shard("--bineval-cache-dir=elsewhere")
        result.assert_outcomes(passed=2)
        assert (server.created, server.requests) == (1, 0)
        report = ReportDocument.load(pytester.path / "report.json")
        assert report.batch is not None and (report.batch.batches, report.batch.resumed) == (0, 1)

        rerun = pytester.runpytest("--bineval-model=openai/fault", f"--bineval-api-base={server.base_url}",
                                   f"--bineval-cache-url={redis_url}", "--bineval-cache=read-only",
                                   "--bineval-report=report.json")
        rerun.assert_outcomes(passed=2)
        assert server.requests == 0 and ReportDocument.load(pytester.path / "report.json").totals.llm_calls == 0
    assert not (pytester.path / ".bineval_cache" / "batches").exists()  # the record is in Redis, not on disk
