"""pytest hooks, fixtures and options of pytest-bineval: wiring only; the logic lives in plain objects
(:mod:`.session`, :mod:`.markers`, :mod:`.assertions`, :mod:`.outputs`, :mod:`.optimize`).

Loading this module imports neither litellm nor a model: ``pytest --help`` stays fast.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .errors import BinevalAssertionError, BinevalError, BinevalJudgeError
from .markers import MARKER_HELP, MarkerArgs, read_marker
from .models import Checklist
from .options import add_options, read_options
from .outputs.github import GithubEnv, detect
from .pins import pin_path
from .record import OptimizeOutcome
from .session import BinevalService, TestContext, reset_current, set_current

SERVICE = pytest.StashKey[BinevalService]()
CONTEXT = pytest.StashKey[TestContext]()
OPTIMIZED = pytest.StashKey[list[OptimizeOutcome]]()
GITHUB = pytest.StashKey[GithubEnv]()
NOTES = pytest.StashKey[list[str]]()  # problems met after the run, shown in the terminal summary
UNWRITTEN = pytest.StashKey[set[str]]()  # report options whose file could not be written
OPTIMIZER = pytest.StashKey[Any]()  # the --bineval-optimize loop (optimize.rerun.OptimizeRunner), on the controller


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    # litellm builds pydantic schemas lazily and warns about its own TypedDicts: not the user's concern
    config.addinivalue_line("filterwarnings", "ignore:.*ReadOnly.*qualifier:UserWarning")
    # litellm leaves a coroutine unawaited when a request is cancelled at a deadline: not the user's concern
    config.addinivalue_line("filterwarnings", "ignore:coroutine '.*acompletion' was never awaited:RuntimeWarning")
    try:
        service = BinevalService.create(read_options(config), config.rootpath)
        if not _is_worker(config):  # the controller compares the merged records with the baseline
            service.load_baseline()
    except BinevalError as exc:  # e.g. an unreadable --bineval-judge-prompt or --bineval-baseline
        raise pytest.UsageError(str(exc)) from None
    github = None if _is_worker(config) else detect(service.options.github, os.environ)
    if github is not None:
        config.stash[GITHUB] = github
    service.on_record = lambda record: config.hook.pytest_bineval_evaluated(config=config, record=record)
    config.stash[SERVICE] = service
    if service.options.optimize and not _is_worker(config):
        from .optimize.rerun import OptimizeRunner

        def show(line: str) -> None:
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            if reporter is not None:
                reporter.write_line(line)

        runner = OptimizeRunner(lambda: service, service.engine, config.rootpath, service.options.max_iterations,
                                show=show)
        config.stash[OPTIMIZER] = runner
        config.pluginmanager.register(runner, "bineval-optimize")
    from .outputs import junit

    junit.register(config)  # --junitxml: a test that could not be scored is an <error>


def pytest_unconfigure(config: pytest.Config) -> None:
    service = config.stash.get(SERVICE, None)
    if service is not None:
        service.close()


def _marker(config: pytest.Config, item: pytest.Item) -> MarkerArgs:
    try:
        return read_marker(item.nodeid, item.iter_markers("bineval"), config.rootpath)
    except BinevalError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        _marker(config, item)  # fail the run early on a malformed marker


@pytest.fixture(scope="session")
def bineval(pytestconfig: pytest.Config) -> BinevalService:
    """The session's pytest-bineval service: ``bineval.checklist(task, dimensions)``,
    ``bineval.evaluate(output, checklist, source)``, ``bineval.options``, ``bineval.records``."""
    return pytestconfig.stash[SERVICE]


@pytest.fixture
def bineval_task() -> str | None:
    """The task of the tests in its scope; override it in a conftest, module or class."""
    return None


@pytest.fixture(autouse=True)
def _bineval_context(request: pytest.FixtureRequest) -> Iterator[TestContext]:
    item = request.node
    path = getattr(item, "path", None)
    ctx = TestContext(
        service=request.config.stash[SERVICE],
        nodeid=item.nodeid,
        marker=_marker(request.config, item),
        fixture_task=lambda: request.getfixturevalue("bineval_task"),
        pin_path=pin_path(Path(path), item.nodeid.split("::", 1)[-1]) if path is not None else None,
    )
    item.stash[CONTEXT] = ctx
    ctx.service.attempts[item.nodeid] = ctx.service.attempts.get(item.nodeid, 0) + 1  # see keep_last_attempt
    token = set_current(ctx)
    try:
        yield ctx
    finally:
        reset_current(token)


@pytest.fixture
def bineval_checklist(_bineval_context: TestContext) -> Checklist:
    """The current test's checklist (marker or ``bineval_task``; pinned file when there is one)."""
    from .assertions import NO_TASK_MESSAGE
    from .engine import run_sync
    from .errors import NoTaskError, UsageError

    ctx = _bineval_context
    if ctx.marker.criteria not in (None, "bineval"):
        raise UsageError(
            f"{ctx.nodeid}: bineval_checklist is the task's checklist; with criteria={ctx.marker.criteria!r} the "
            "criteria depend on the question: use bineval.checklist(task, strategy=..., question=...) instead")
    task = ctx.marker.task or (ctx.fixture_task() if ctx.fixture_task is not None else None)
    if not task:
        raise NoTaskError(NO_TASK_MESSAGE)  # an error of the test that is counted as not scored
    checklist, _ = run_sync(ctx.service.achecklist_for(ctx, task, ctx.marker.dimensions))
    return checklist


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    result = yield
    service = item.config.stash.get(SERVICE, None)
    if service is not None:  # a re-run plugin may have run the test more than once: its last attempt counts
        service.keep_last_attempt(item.nodeid, item.stash.get(CONTEXT, None))
    return result


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if CONTEXT in item.stash:  # an earlier attempt's context (pytest-rerunfailures): not this attempt's
        del item.stash[CONTEXT]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    ctx = item.stash.get(CONTEXT, None)
    if ctx is None or report.when == "teardown":
        return report
    excinfo = call.excinfo
    unscorable = (excinfo is not None and excinfo.errisinstance(BinevalError)
                  and not excinfo.errisinstance(BinevalAssertionError))
    if unscorable and excinfo is not None:  # no task, no checklist, a pin error: kept for the totals and reports
        ctx.service.unscored_error(ctx, excinfo.typename, str(excinfo.value))
        if not excinfo.errisinstance(BinevalJudgeError):  # the message says it all: no traceback
            from .redaction import redact

            report.longrepr = redact(f"{excinfo.typename}: {excinfo.value}")
    if report.when != "call":
        return report
    if report.failed:
        ctx.service.failed_tests.add(item.nodeid)
    else:  # this attempt passed (an earlier one of a re-run may have failed)
        ctx.service.failed_tests.discard(item.nodeid)
    if unscorable:  # not a verdict on the output: the test could not be scored (an error, not a failure)
        report.bineval_error = True
    for rec in ctx.records:
        suffix = "" if len(ctx.records) == 1 else f"[{rec.index}]"
        for d in rec.dimensions:
            prop = (f"bineval{suffix}:{d.name}", d.score)
            report.user_properties.append(prop)
            item.user_properties.append(prop)  # junitxml writes the teardown report's properties
    if report.failed and ctx.records:
        from .outputs.terminal import render_test_section

        tw = item.config.get_terminal_writer()
        report.sections.append(("bineval", render_test_section(ctx.records, color=tw.hasmarkup, width=tw.fullwidth)))
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A judge failure, a missing task or (with --bineval-strict) an unpinned checklist is an error of
    the test: never a pass, and not a verdict on the output either."""
    if report.when == "call" and report.failed and getattr(report, "bineval_error", False):
        return "error", "E", "ERROR"
    return None


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    service = config.stash.get(SERVICE, None)
    if service is None:
        return
    if _is_worker(config):  # pytest-xdist: the controller merges what workers send
        config.workeroutput["bineval"] = service.worker_payload()  # type: ignore[attr-defined]
        return
    optimized: list[OptimizeOutcome] | None = None
    if service.options.optimize:
        optimized = config.stash[OPTIMIZER].finish(service.records)
        config.stash[OPTIMIZED] = optimized
    regressions = service.compare()
    if regressions is not None and regressions.failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # --bineval-fail-on-regression
    options = service.options
    if options.report or options.html:
        document = service.report_document(optimized)
        written: list[tuple[str, str, Callable[[Path], object]]] = []
        if options.report:
            written.append(("JSON report", options.report, document.write))
        if options.html:
            from .outputs.html import write_html

            written.append(("HTML report", options.html, lambda path: write_html(path, document)))
        for what, option, write in written:
            path = service.path(option)
            try:
                write(path)
            except OSError as exc:  # the run's results stay on the terminal; the session fails: a file is missing
                config.stash.setdefault(NOTES, []).append(f"bineval: cannot write the {what} {path}: {exc}")
                config.stash.setdefault(UNWRITTEN, set()).add(option)
                if session.exitstatus == pytest.ExitCode.OK:
                    session.exitstatus = pytest.ExitCode.TESTS_FAILED
    github = config.stash.get(GITHUB, None)
    if github is not None and github.summary_path and (service.records or service.unscored
                                                       or regressions is not None):
        from .outputs.github import append_summary, step_summary

        try:
            append_summary(github.summary_path, step_summary(service.records, service.totals(), regressions,
                                                             service.failed_tests))
        except OSError as exc:
            config.stash.setdefault(NOTES, []).append(f"bineval: cannot write the GitHub job summary: {exc}")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    data = getattr(node, "workeroutput", {}).get("bineval")
    if data:
        node.config.stash[SERVICE].merge_worker(data)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    service = config.stash.get(SERVICE, None)
    if service is None or _is_worker(config):
        return
    from .outputs.terminal import optimize_lines, regression_lines, summary_lines

    github = config.stash.get(GITHUB, None)
    token = secrets.token_hex(16)
    if github is not None:  # what follows quotes model text: GitHub must not read any of it as a command
        terminalreporter.write_line(f"::stop-commands::{token}")
    if service.regressions is not None:
        terminalreporter.write_sep("=", "bineval regressions")
        for text, markup in regression_lines(service.regressions):
            terminalreporter.write_line(text, **markup)
    if service.records or service.unscored or service.regressions is not None:
        terminalreporter.write_sep("=", "bineval summary")
        for text, markup in summary_lines(service.records, service.totals(), service.regressions,
                                          service.unscored):
            terminalreporter.write_line(text, **markup)
        unwritten = config.stash.get(UNWRITTEN, set())
        if service.options.report and service.options.report not in unwritten:
            terminalreporter.write_line(f"bineval report: {service.options.report}")
        if service.options.html and service.options.html not in unwritten:
            terminalreporter.write_line(f"bineval html report: {service.options.html}")
    if service.options.optimize:
        terminalreporter.write_sep("=", "bineval optimize")
        optimized: list[OptimizeOutcome] = config.stash.get(OPTIMIZED, [])
        for text, markup in optimize_lines(optimized):
            terminalreporter.write_line(text, **markup)
    notes: list[str] = [*config.stash.get(NOTES, []), *service.threshold_notes()]
    if service.options.fail_on_regression and not service.options.baseline:
        notes.append("bineval: --bineval-fail-on-regression without --bineval-baseline: nothing was compared")
    for note in notes:
        terminalreporter.write_line(note, yellow=True)
    if github is not None:  # workflow commands again, ours only: GitHub annotates the assert_passes lines
        terminalreporter.write_line(f"::{token}::")
        from .outputs.github import workflow_commands

        for line in workflow_commands(service.records, service.regressions, rootdir=str(config.rootpath),
                                      workspace=github.workspace, failed_tests=service.failed_tests):
            terminalreporter.write_line(line)
