"""``--bineval-batch`` with the real embedded model behind the batch: the fake Files/Batches server
(:class:`~pytest_bineval.testing.batch_server.BatchServer`) runs each batch line, and each direct request, on
llama.cpp's own OpenAI-compatible server with SmolLM2-135M. The batch's lines are real chat requests to a real
server, and its replies are read into real verdicts.

llama.cpp's server refuses ``json_schema`` (HTTP 500): a direct run learns that and uses ``json_object``; a batch line
is written with the form the session knows when it is written (json_schema, before any direct request), so such a
provider fails the lines and they are asked again directly (``--bineval-batch-failures direct``): judged all the
same, the failures counted and said, never a pass by default."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from pytest_bineval.llm.server import SERVER_ALIAS
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing.batch_server import BatchServer
from pytest_bineval.testing.faults import Received, Reply

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.local_model, pytest.mark.http_server]

SUITE = '''
from pytest_bineval import Checklist, Question, assert_passes

ARTICLE = "The city of Lyon opened a new bridge on Monday. It cost 40 million euros."
CHECKLIST = Checklist(task="Summarize the article in one sentence.",
                      dimensions={"consistency": "The summary states only facts from the article."},
                      questions=[Question(id="consistency-1", dimension="consistency",
                                          text="Does the summary name the city in the article?"),
                                 Question(id="consistency-2", dimension="consistency",
                                          text="Is every number in the summary in the article?")])

def test_summary():
    assert_passes("Lyon opened a new bridge on Monday; it cost 40 million euros.", source=ARTICLE,
                  checklist=CHECKLIST, threshold=0.0)
'''


def forward_to(base_url: str) -> object:
    """A responder that sends each chat request (a batch line, or a direct request) to the llama.cpp server."""

    def respond(req: Received, index: int) -> Reply:
        del index
        body = {**req.body, "model": SERVER_ALIAS}
        request = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=300) as reply:
                return Reply(reply.status, json.loads(reply.read()))
        except urllib.error.HTTPError as exc:
            return Reply(exc.code, json.loads(exc.read() or b"{}"))

    return respond


def test_the_batchs_lines_run_on_the_real_model(pytester: pytest.Pytester, llama_server: str) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_real=SUITE)
    with BatchServer(forward_to(llama_server)) as server:  # type: ignore[arg-type]
        result = pytester.runpytest_inprocess(
            f"--bineval-model=openai/{SERVER_ALIAS}", f"--bineval-api-base={server.base_url}", "--bineval-batch",
            "--bineval-report=report.json", "--bineval-stream=off")
        result.assert_outcomes(passed=1)
        doc = ReportDocument.load(pytester.path / "report.json")
        (record,) = doc.evaluations
        assert [v.answer for v in record.verdicts] != [] and all(v.answer in ("yes", "no") for v in record.verdicts)
        assert doc.batch is not None and doc.batch.submitted == server.lines >= 2
        # the server's refusal of json_schema fails every line; each is asked again directly, once (there the
        # negotiation falls back to json_object): judged all the same, the failures counted and said
        assert (doc.batch.answered, doc.batch.failed, doc.batch.retried) == (0, 2, 2)
        assert doc.totals.batch_requests == 2  # the failed lines, counted as failed requests at no cost
        assert doc.totals.failed_requests >= 2 and doc.totals.judge_errors == 0
        result.stdout.fnmatch_lines(["batch: 2 requests the batch failed asked again directly (at the full price)"])
