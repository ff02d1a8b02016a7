"""``--bineval-batch`` over real HTTP: litellm's file and batch calls against a scripted OpenAI-compatible server with
the Files and Batches API (:class:`~pytest_bineval.testing.batch_server.BatchServer`, on 127.0.0.1).

A suite is judged with no direct chat request, and a read-only re-run makes none; requests that depend on earlier
replies (a checklist's questions, an explanation) take further rounds; an interrupted run resumes the batch it
submitted instead of submitting again; a batch that expires, fails lines, or writes malformed lines has those
requests asked directly or made judge errors, never passes; a server without the Batches API is a usage error before
any test body runs; pytest-xdist workers share the batches (no request is submitted twice)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.cli import main
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.batch_server import BatchScript, BatchServer, scripted_responder
from pytest_bineval.testing.faults import Received, Reply, completion, error_body

pytest_plugins = ["pytester"]

MODEL = "openai/fault"
INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture(autouse=True, scope="module")
def _litellm_imported_once() -> None:
    """pytester's in-process runs drop modules first imported during a run: import litellm up front."""
    from pytest_bineval.llm.client import import_litellm

    import_litellm()


def _user_text(req: Received) -> str:
    return " ".join(str(m.get("content")) for m in req.body.get("messages") or [] if m.get("role") == "user")


def verdicts(req: Received, index: int) -> Reply:
    """Check 2 is answered "no" (with an explanation), the others "yes"."""
    del index
    answer = "no" if "Is check 2 met?" in _user_text(req) else "yes"
    return Reply(200, completion(json.dumps({"answer": answer, "explanation": f"It says {answer}."})))


PINNED = '''
import pytest
from pytest_bineval import Checklist, Question, assert_passes

CHECKLIST = Checklist(task="Summarize.", dimensions={"consistency": "D"}, questions=[
    Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?") for i in (1, 2, 3)])

@pytest.mark.parametrize("i", range(3))
def test_summary(i):
    with open("bodies.log", "a") as log:  # each run of the test body
        log.write(f"{i}\\n")
    assert_passes(f"summary {i}", checklist=CHECKLIST, threshold=0.5)
'''


def _project(pytester: pytest.Pytester, tests: str = PINNED) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_it=tests)


def _run(pytester: pytest.Pytester, server: BatchServer, *args: str, workers: int = 0,
         model: str = MODEL) -> pytest.RunResult:
    xdist = ["-p", "xdist", "-n", str(workers)] if workers else []
    return pytester.runpytest(f"--bineval-model={model}", f"--bineval-api-base={server.base_url}",
                              "--bineval-report=report.json", *args, *xdist)


def _bodies(pytester: pytest.Pytester) -> int:
    log = pytester.path / "bodies.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def _report(pytester: pytest.Pytester) -> ReportDocument:
    return ReportDocument.load(pytester.path / "report.json")


def test_a_batch_run_sends_no_direct_request_and_a_read_only_rerun_sends_none(pytester: pytest.Pytester) -> None:
    """In one process (under pytest-xdist, workers that share their batches, send no request twice and none directly:
    test_requests_that_depend_on_replies_take_rounds_and_are_sent_once[2])."""
    _project(pytester)
    with BatchServer(verdicts) as server:
        result = _run(pytester, server, "--bineval-batch")
        result.assert_outcomes(passed=3)
        assert server.requests == 0  # not one chat request: every question went in the batch
        assert server.created == 1
        assert server.lines == 9  # 3 tests x 3 questions, each sent once
        assert _bodies(pytester) == 6  # the first pass and the final pass each ran every test body once
        report = _report(pytester)
        assert report.totals.llm_calls == report.totals.batch_requests == 9
        assert report.batch is not None
        assert (report.batch.submitted, report.batch.answered, report.batch.failed) == (9, 9, 0)
        assert report.batch.rounds == 1 and report.batch.missed == 0
        result.stdout.fnmatch_lines(["*requests: 9 (9 through a batch API, at its batch price)*",
                                     "batch: 9 requests sent in 1 batch*; 9 answered, 0 failed; "
                                     "waited *; the replies fetched cost unpriced*"])
        # the waiting is shown (under pytest-xdist the workers' output is not)
        result.stdout.fnmatch_lines(["bineval batch: 1 batch, 1 finished; 9 requests: submitted 9, in progress 0, "
                                     "done 9, failed 0 (*)"])

        # the re-run reads what the batch run stored, in one process (xdist workers reading one cache read-only:
        # test_http_cache.py's test_two_xdist_workers_share_one_cache_then_a_rerun_makes_no_request)
        rerun = _run(pytester, server, "--bineval-cache=read-only")
        rerun.assert_outcomes(passed=3)
        assert server.requests == 0 and server.created <= 2
        again = _report(pytester)
        assert (again.totals.llm_calls, again.totals.cache_hits) == (0, 9)
        assert again.batch is None


TWO_ASSERTIONS = '''
import pytest
from pytest_bineval import assert_passes

@pytest.mark.bineval(task="Summarize the article.")
@pytest.mark.parametrize("i", range(2))
def test_summary(i):
    with open("bodies.log", "a") as log:
        log.write(f"{i}\\n")
    assert_passes(f"summary {i}", dimension=["fluency", "coherence"], threshold=0.4)
    assert_passes(f"another summary {i}", dimension="fluency", threshold=0.4)
'''


@pytest.mark.parametrize("workers", [0, 2])
def test_requests_that_depend_on_replies_take_rounds_and_are_sent_once(pytester: pytest.Pytester,
                                                                       workers: int) -> None:
    """Unpinned checklists: the requirements, then every dimension's questions (one round), then the verdicts of
    both assertions of each test (one round: the first does not stop the test in a first pass), then the
    explanations of the "no" answers (--bineval-stream off: one request each, after its answer)."""
    _project(pytester, TWO_ASSERTIONS)
    fake = ScriptedModel(answers={"Does the response meet fluency check 2?": "no"})
    with BatchServer(scripted_responder(fake)) as server:
        result = _run(pytester, server, "--bineval-batch", "--bineval-stream=off", workers=workers)
        result.assert_outcomes(passed=2)
        assert server.requests == 0
        # each request once, whatever the workers: the checklists they share were submitted by one of them
        assert {k: fake.calls_of(k) for k in ("requirements", "questions", "verdict", "explanation")} == {
            "requirements": 1, "questions": 2, "verdict": 12, "explanation": 4}
        report = _report(pytester)
        assert report.batch is not None and report.batch.rounds == 4
        assert report.batch.submitted == server.lines == 19
        if workers:
            assert report.batch.resumed >= 1  # a worker waited for the other's batch instead of submitting
        else:
            assert _bodies(pytester) == 2 * (4 + 1)  # a first pass per round, and the final pass
        assert report.totals.llm_calls == report.totals.batch_requests == 19
        assert report.checklists.usage.llm_calls == 3  # the checklist's requests, counted as checklist generation
        result.stdout.fnmatch_lines(["*requests: 19 (19 through a batch API, at its batch price)*",
                                     f"batch: 19 requests sent in {server.created} batch*; 19 answered, 0 failed; "
                                     "waited *"])


def test_an_interrupted_batch_run_resumes_without_a_second_submission(pytester: pytest.Pytester,
                                                                      tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester)
    with BatchServer(verdicts, script=BatchScript(hold=True)) as server:
        stopped = _run(pytester, server, "--bineval-batch", "--bineval-batch-timeout=0")
        assert stopped.ret == pytest.ExitCode.INTERRUPTED
        stopped.stdout.fnmatch_lines(["*1 batch(es) not finished after *s (--bineval-batch-timeout 0s): nothing "
                                      "was judged*run the same command again to resume waiting*"])
        assert (server.created, server.requests, _bodies(pytester)) == (1, 0, 3)  # the first pass only
        assert _report(pytester).partial and not _report(pytester).evaluations

        # the person who wants to look: the batch is written down, pending, and the provider says in progress
        cache = str(pytester.path / ".bineval_cache")
        capsys.readouterr()
        assert main(["batch", "status", "--cache-dir", cache]) == 0
        listed = capsys.readouterr().out
        assert "batch-2  pending" in listed and "in_progress" in listed and "1 pending" in listed

        stopped_again = _run(pytester, server, "--bineval-batch", "--bineval-batch-timeout=0")
        assert stopped_again.ret == pytest.ExitCode.INTERRUPTED
        assert server.created == server.uploads == 1  # it waited for the same batch: nothing submitted twice

        server.release()
        resumed = _run(pytester, server, "--bineval-batch")
        resumed.assert_outcomes(passed=3)
        assert (server.created, server.uploads, server.requests) == (1, 1, 0)
        report = _report(pytester)
        assert report.batch is not None
        assert (report.batch.batches, report.batch.resumed, report.batch.answered) == (0, 1, 9)
        assert report.totals.batch_requests == 9


def test_a_cancelled_batch_has_its_requests_asked_directly(pytester: pytest.Pytester,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    _project(pytester)
    with BatchServer(verdicts, script=BatchScript(hold=True)) as server:
        assert _run(pytester, server, "--bineval-batch", "--bineval-batch-timeout=0").ret == 2
        cache = str(pytester.path / ".bineval_cache")
        assert main(["batch", "cancel", "--cache-dir", cache]) == 2  # which ones? (a usage error)
        assert main(["batch", "cancel", "--all", "--cache-dir", cache]) == 0
        assert "batch-2: cancelling" in capsys.readouterr().out
        result = _run(pytester, server, "--bineval-batch")
        result.assert_outcomes(passed=3)
        assert server.cancelled == 1 and server.created == 1
        assert server.requests == 9  # the batch ran none of them: each asked directly, once
        report = _report(pytester)
        assert report.batch is not None and (report.batch.failed, report.batch.retried) == (9, 9)
        result.stdout.fnmatch_lines(["batch: 9 requests the batch failed asked again directly (at the full price)"])


@pytest.mark.parametrize("failures", ["direct", "error"])
def test_an_expired_batch(pytester: pytest.Pytester, failures: str) -> None:
    """It ran 4 of its 9 lines before its window ended: those 4 are answers; the 5 others are asked directly, or are
    judge errors: never a pass."""
    _project(pytester)
    with BatchServer(verdicts, script=BatchScript(expire=True, run=4)) as server:
        result = _run(pytester, server, "--bineval-batch", f"--bineval-batch-failures={failures}")
        report = _report(pytester)
        assert report.batch is not None and (report.batch.answered, report.batch.failed) == (4, 5)
        if failures == "direct":
            result.assert_outcomes(passed=3)
            assert server.requests == 5 and report.batch.retried == 5
            assert report.totals.llm_calls == 9 + 5  # the batch's lines (expired ones too) and the direct requests
        else:
            assert server.requests == 0
            outcomes = result.parseoutcomes()  # 2 of the 3 tests have an expired question: errors, not passes
            assert (outcomes.get("errors", 0), outcomes.get("passed", 0)) == (2, 1)
            result.stdout.fnmatch_lines(["*the batch batch-2 failed it: batch_expired: This request could not be "
                                         "executed*--bineval-batch-failures error*"])
            assert report.totals.judge_errors == 5


def test_failed_and_malformed_lines_are_asked_directly(pytester: pytest.Pytester) -> None:
    def respond(req: Received, index: int) -> Reply:
        if not req.headers and "Is check 3 met?" in _user_text(req):  # a batch line (no HTTP headers of its own)
            return Reply(400, error_body("this line was refused", "invalid_request_error"))
        return verdicts(req, index)

    def mangle(line: str, i: int) -> str:
        return line[: len(line) // 2] if i == 0 else line  # the first output line is cut in half

    _project(pytester)
    with BatchServer(respond, script=BatchScript(mangle=mangle)) as server:
        result = _run(pytester, server, "--bineval-batch")
        result.assert_outcomes(passed=3)
        report = _report(pytester)
        assert report.batch is not None
        assert (report.batch.answered, report.batch.failed, report.batch.retried) == (5, 4, 4)
        assert server.requests == 4  # 3 refused lines and 1 malformed one, each asked once directly
        assert any("1 line(s) of its output could not be read (malformed)" in n for n in report.notes)


def test_a_server_without_the_batches_api_is_a_usage_error_before_any_test_runs(pytester: pytest.Pytester) -> None:
    _project(pytester)
    with BatchServer(verdicts, batches=False) as server:
        result = _run(pytester, server, "--bineval-batch")
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines(["*--bineval-batch: the batch API of openai at http://127.0.0.1:*/v1 cannot be "
                                     "used (HTTP 404: *): it has no Batches API*run without --bineval-batch*"])
        assert (_bodies(pytester), server.requests, server.uploads) == (0, 0, 0)


def test_an_unsupported_provider_is_a_usage_error(pytester: pytest.Pytester) -> None:
    _project(pytester)
    result = pytester.runpytest("--bineval-model=anthropic/claude-3-5-haiku-20241022", "--bineval-batch")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*litellm cannot create Anthropic message batches*"])
    assert _bodies(pytester) == 0


@pytest.mark.parametrize("mode", ["off", "read-only", "replay"])
def test_the_batch_needs_a_cache_that_is_written(pytester: pytest.Pytester, mode: str) -> None:
    _project(pytester)
    result = pytester.runpytest("--bineval-batch", f"--bineval-cache={mode}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--bineval-batch writes the batch's replies into the reply cache*not {mode}*"])


def test_the_batch_price_is_counted_and_the_budget_counts_it(pytester: pytest.Pytester) -> None:
    """gpt-4o-mini has batch prices in litellm: the summary and the report count each reply at them, half the
    price of the same requests sent one by one, and --bineval-budget counts that."""
    from pytest_bineval.llm.client import import_litellm

    prices: dict[str, Any] = import_litellm().model_cost["gpt-4o-mini"]

    def priced(req: Received, index: int) -> Reply:
        reply = verdicts(req, index)
        reply.body["usage"] = {"prompt_tokens": 20000, "completion_tokens": 1000, "total_tokens": 21000}
        return reply

    _project(pytester)
    with BatchServer(priced) as server:
        result = _run(pytester, server, "--bineval-batch", "--bineval-budget=$1", model="openai/gpt-4o-mini")
        result.assert_outcomes(passed=3)
    report = _report(pytester)
    assert report.batch is not None
    expected = 9 * (20000 * prices["input_cost_per_token_batches"] + 1000 * prices["output_cost_per_token_batches"])
    full = 9 * (20000 * prices["input_cost_per_token"] + 1000 * prices["output_cost_per_token"])
    assert expected == pytest.approx(full / 2)
    assert report.batch.usage.cost_usd == pytest.approx(expected)
    assert report.totals.cost_usd == pytest.approx(expected) and report.totals.unpriced_requests == 0
    result.stdout.fnmatch_lines([f"budget $1.0000: ${expected:.4f} spent; every evaluation was judged",
                                 f"*the replies fetched cost ${expected:.4f} at the batch price*"])


GATED = '''
import pathlib

import pytest
from pytest_bineval import Checklist, Question, assert_passes

HERE = pathlib.Path(__file__).parent
CHECKLIST = Checklist(task="Summarize.", dimensions={"consistency": "D"}, questions=[
    Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?") for i in (1, 2, 3)])

@pytest.mark.parametrize("i", range(3))
def test_summary(i):
    changed = (HERE / "pr").exists() and i == 0  # the pull request changes the first output
    assert_passes(f"summary {i}" + (" (refunds within 90 days)" if changed else ""), checklist=CHECKLIST,
                  threshold=0.5)
'''


@pytest.mark.parametrize("workers", [0, 2])
def test_the_regression_gates_re_asks_are_direct_requests_after_the_batch(pytester: pytest.Pytester,
                                                                          workers: int) -> None:
    """A batch run against a baseline: the tests' questions go through the batch; the gate's re-asks of the flipped
    question (each waits for the answer before it: no batch) are direct requests after the tests (under pytest-xdist,
    the controller's), counted in the totals and said in the summary; the flip is confirmed and fails the run."""
    def judge(req: Received, index: int) -> Reply:
        text = _user_text(req)
        answer = "no" if "Is check 2 met?" in text and "90 days" in text else "yes"
        return Reply(200, completion(json.dumps({"answer": answer, "explanation": f"It says {answer}."})))

    _project(pytester, GATED)
    with BatchServer(judge) as server:
        # the baseline, in one process (what is run under pytest-xdist is the gated run)
        _run(pytester, server, "--bineval-batch").assert_outcomes(passed=3)
        (pytester.path / "report.json").rename(pytester.path / "base.json")
        assert (server.lines, server.requests) == (9, 0)

        (pytester.path / "pr").write_text("")
        result = _run(pytester, server, "--bineval-batch", "--bineval-baseline=base.json",
                      "--bineval-fail-on-regression", workers=workers)
        assert server.lines == 9 + 3  # the changed output's questions, through a second batch
        report = _report(pytester)
        assert report.regressions is not None and report.regressions.confirmation is not None
        reasks = report.regressions.confirmation.requests
        assert reasks > 0 and server.requests == reasks  # the only direct requests: the gate's
        assert [c.flip.status for d in report.regressions.compared for c in d.flips()
                if c.flip is not None] == ["confirmed"]
        assert result.ret == pytest.ExitCode.TESTS_FAILED  # the confirmed regression fails the run
        assert report.totals.llm_calls == 3 + reasks and report.totals.batch_requests == 3
        assert report.batch is not None and report.batch.missed == 0
        result.stdout.fnmatch_lines([f"batch: the regression gate's {reasks} re-asks of flipped questions asked "
                                     "directly after the tests (each waits for the answer before it) (at the full "
                                     "price)"])


def test_the_batchs_replies_are_signed_in_a_signed_cache(pytester: pytest.Pytester,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """--bineval-cache-key-env: the replies a batch brings are written signed, like any entry; a read-only re-run
    with the secret takes them (no request), and one with another secret refuses them (every question asked)."""
    from pytest_bineval.llm.cache import ResponseCache, Signing, decode_entry

    _project(pytester)
    monkeypatch.setenv("BATCH_SECRET", "s" * 32)
    with BatchServer(verdicts) as server:
        _run(pytester, server, "--bineval-batch", "--bineval-cache-key-env=BATCH_SECRET").assert_outcomes(passed=3)
        assert (server.lines, server.requests) == (9, 0)

        cache = ResponseCache(pytester.path / ".bineval_cache")
        store = cache._open()
        entries = {key: store.get(key) for key in store.iterkeys()}
        cache.close()
        replies = [json.loads(raw) for raw in entries.values() if '"batch"' in str(raw)]
        assert len(replies) == 9  # the batch's replies, each signed with the secret
        assert all(entry["sig"].startswith("sha256:") for entry in replies)
        signing = Signing("BATCH_SECRET")
        for key, raw in entries.items():  # every entry of the run, the batch's too, passes the check
            decode_entry(key, raw, signing)

        rerun = _run(pytester, server, "--bineval-cache=read-only", "--bineval-cache-key-env=BATCH_SECRET")
        rerun.assert_outcomes(passed=3)
        assert server.requests == 0 and _report(pytester).totals.cache_hits == 9

        monkeypatch.setenv("BATCH_SECRET", "t" * 32)  # another secret: the entries are not its own
        forged = _run(pytester, server, "--bineval-cache=read-only", "--bineval-cache-key-env=BATCH_SECRET")
        forged.assert_outcomes(passed=3)
        assert server.requests == 9  # each question asked again, none taken from the cache


def test_a_re_baseline_rewrites_every_pin_through_the_batch(pytester: pytest.Pytester) -> None:
    """``--bineval-update-checklists=all --bineval-batch`` (a re-baseline after a judge or prompt change): the first
    passes generate every checklist anew instead of reading its pin, so the checklists' requests and the verdicts
    all go through batches; the final pass rewrites the pins with what the batches wrote. No direct request."""
    _project(pytester, TWO_ASSERTIONS)
    with BatchServer(scripted_responder(ScriptedModel(questions_per_dimension=2))) as server:
        _run(pytester, server, "--bineval-batch", "--bineval-update-checklists").assert_outcomes(passed=2)
        assert server.requests == 0
        assert {a.action for a in _report(pytester).pins} == {"created", "listed"}  # listed: the second test
        first_lines = server.lines

    fake = ScriptedModel(questions_per_dimension=3)  # a new judge writes other checklists
    with BatchServer(scripted_responder(fake)) as server:
        result = _run(pytester, server, "--bineval-batch", "--bineval-update-checklists=all")
        result.assert_outcomes(passed=2)
        assert server.requests == 0  # the checklists, the verdicts: every request through the batches
        assert fake.calls_of("requirements") == 1 and fake.calls_of("questions") == 2
        # the requirements, two dimensions' questions, and 3 questions a dimension now: 9 verdicts a test
        assert (first_lines, server.lines) == (1 + 2 + 2 * 6, 1 + 2 + 2 * 9)
        report = _report(pytester)
        assert {a.action for a in report.pins} - {"listed"} == {"rewritten"}
        assert report.batch is not None and report.batch.rounds >= 3 and report.batch.missed == 0
        assert all(len(r.verdicts) in (3, 6) for r in report.evaluations)  # judged with the rewritten checklists
