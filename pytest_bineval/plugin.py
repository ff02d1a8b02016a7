"""pytest hooks, fixtures and options of pytest-bineval: wiring only. The logic lives in plain objects
(:mod:`.session`, :mod:`.markers`, :mod:`.assertions`, :mod:`.optimize`); every output is a plugin object of
:mod:`.outputs` reading the run's finished document, handed to ``pytest_bineval_finished``.

A light module: loading it (``pytest --help``, ``--collect-only``) imports no pydantic model, litellm or model.
The session's service (its engine) is made when a test first needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from . import outputs
from .errors import BinevalAssertionError, BinevalError, BinevalJudgeError
from .interrupt import TermAsInterrupt
from .markers import MARKER_HELP, MarkerArgs, read_marker
from .options import Options, add_options, put_paths_back, read_options
from .outputs.base import output_log

if TYPE_CHECKING:
    from .fixture import Bineval
    from .models import Checklist
    from .session import BinevalService, TestContext
    from .trust import RunLabels

OPTIONS = pytest.StashKey[Options]()
SERVICE = pytest.StashKey["BinevalService"]()
CONTEXT = pytest.StashKey["TestContext"]()
DEFINED = pytest.StashKey[set[str]]()  # the dimensions the markers of the collected tests name (before -k / -m)
OPTIMIZER = pytest.StashKey[Any]()  # the --bineval-optimize loop (optimize.rerun.OptimizeRunner), on the controller
LABELS = pytest.StashKey["RunLabels"]()  # --bineval-labels, read at configure on the controller
TERM = pytest.StashKey[TermAsInterrupt]()  # SIGTERM as Ctrl-C, from configure to unconfigure
RUN_ID = pytest.StashKey[str]()  # pytest-xdist's testrun uid, on the controller (see shared_checklists)
WORKERS = pytest.StashKey[int]()  # pytest-xdist's worker count, on the controller (each kept budget / N)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    put_paths_back(args)  # --bineval-update-checklists tests/test_x.py: the path is a test path, not the mode


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    # litellm builds pydantic schemas lazily and warns about its own TypedDicts: not the user's concern
    config.addinivalue_line("filterwarnings", "ignore:.*ReadOnly.*qualifier:UserWarning")
    # litellm leaves a coroutine unawaited when a request is cancelled at a deadline: not the user's concern
    config.addinivalue_line("filterwarnings", "ignore:coroutine '.*acompletion' was never awaited:RuntimeWarning")
    options = read_options(config)
    config.stash[OPTIONS] = options
    term = config.stash[TERM] = TermAsInterrupt()
    term.install()  # SIGTERM (a CI cancel or timeout) writes the partial report as Ctrl-C does
    if options.settings.judge_prompt is not None or (options.baseline and not _is_worker(config)):
        _service(config)  # files read up front: an unreadable one is a usage error before any test runs
    if (options.labels or options.trust_kappa is not None) and not _is_worker(config):
        labels = _read_labels(config, options)
        if labels is not None:
            config.stash[LABELS] = labels
    outputs.register(config, options)
    if options.optimize and not _is_worker(config):
        from .optimize.rerun import OptimizeRunner

        runner = OptimizeRunner(lambda: _service(config).ledger, lambda: _service(config).engine, config.rootpath,
                                options.max_iterations, show=_writer(config))
        config.stash[OPTIMIZER] = runner
        config.pluginmanager.register(runner, "bineval-optimize")


def _writer(config: pytest.Config) -> Callable[[str], None]:
    """A line on the terminal (nothing when there is no terminal reporter)."""

    def show(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)

    return show


def _read_labels(config: pytest.Config, options: Options) -> RunLabels | None:
    """--bineval-labels: read before any test runs (a bad file is a usage error)."""
    from .trust import RunLabels

    try:
        return RunLabels.read(options.labels, options.trust_kappa, config.rootpath)
    except BinevalError as exc:
        raise pytest.UsageError(str(exc)) from None


def pytest_sessionstart(session: pytest.Session) -> None:
    """--bineval-batch: the provider's batch API is checked before anything runs (before pytest-xdist's workers)."""
    config = session.config
    options = config.stash.get(OPTIONS, None)
    if options is None or not options.batch or _is_worker(config) or config.option.collectonly:
        return
    from .batch.passes import check_batch_api

    try:
        check_batch_api(_service(config).engine)
    except BinevalError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(wrapper=True)
def pytest_runtestloop(session: pytest.Session) -> Generator[None, Any, Any]:
    """--bineval-batch: the first passes and their batches come before the run's own loop (:mod:`.batch.passes`)."""
    config = session.config
    options = config.stash.get(OPTIONS, None)
    batch = None
    if options is not None and options.batch and not config.option.collectonly:
        from .batch.passes import start

        batch = start(session, _service(config), options, _writer(config))
    try:
        return (yield)
    finally:
        if batch is not None:
            batch.finish(_service(config))


def _service(config: pytest.Config) -> BinevalService:
    """The session's service (one engine), made on first use."""
    service = config.stash.get(SERVICE, None)
    if service is None:
        from .session import BinevalService

        try:
            workers = int(getattr(config, "workerinput", {}).get("workercount", 1) or 1)
            service = BinevalService.create(config.stash[OPTIONS], config.rootpath, workers=workers)
            if _is_worker(config):  # a checklist generated once per run, not once per worker (or replaced worker)
                service.share(str(config.workerinput["testrunuid"]))  # type: ignore[attr-defined]
            if not _is_worker(config):  # the controller compares the merged records with the baseline
                service.load_baseline()
        except BinevalError as exc:  # e.g. an unreadable --bineval-judge-prompt or --bineval-baseline
            raise pytest.UsageError(str(exc)) from None
        service.on_record = lambda record: config.hook.pytest_bineval_evaluated(config=config, record=record)
        defined: set[str] = config.stash.get(DEFINED, set())
        service.ledger.dimensions_defined.update(defined)
        config.stash[SERVICE] = service
    return service


def pytest_unconfigure(config: pytest.Config) -> None:
    term = config.stash.get(TERM, None)
    if term is not None:
        term.restore()
    service = config.stash.get(SERVICE, None)
    if service is not None:
        service.close()


def _marker(config: pytest.Config, item: pytest.Item) -> MarkerArgs:
    try:
        return read_marker(item.nodeid, item.iter_markers("bineval"), config.rootpath)
    except BinevalError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect: a dimension a deselected test names is no typo
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    from .dimensions import parse_dimensions

    defined = config.stash.setdefault(DEFINED, set())
    for item in items:
        marker = _marker(config, item)  # fail the run early on a malformed marker
        request = parse_dimensions(marker.dimensions)
        if request is not None:
            defined.update(request.names)
    service = config.stash.get(SERVICE, None)
    if service is not None:  # made at configure (a judge prompt or a baseline to read)
        service.ledger.dimensions_defined.update(defined)


def _collected(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With a baseline or a report (compared later by ``bineval report --baseline``), the tests collected
    (deselected ones too): a baseline test of a collected file that is not among them is gone ("removed"); one of a
    file not collected, or deselected, is "not run"."""
    options = config.stash.get(OPTIONS, None)
    if items and options is not None and (options.baseline or options.report):
        _service(config).ledger.collected_tests.update(item.nodeid for item in items)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:
        _collected(items[0].config, items)


def pytest_collection_finish(session: pytest.Session) -> None:
    _collected(session.config, session.items)


@pytest.fixture(scope="session")
def bineval(pytestconfig: pytest.Config) -> Bineval:
    """The session's pytest-bineval service: ``bineval.checklist(task, dimensions)``,
    ``bineval.evaluate(output, checklist, source)``, ``bineval.options``, ``bineval.records``."""
    from .fixture import Bineval

    return Bineval(_service(pytestconfig))


@pytest.fixture
def bineval_task() -> str | None:
    """The task of the tests in its scope; override it in a conftest, module or class."""
    return None


@pytest.fixture(autouse=True)
def _bineval_context(request: pytest.FixtureRequest) -> Iterator[TestContext]:
    from pathlib import Path

    from .pins import pin_path
    from .scope import reset_current, set_current
    from .session import TestContext

    item = request.node
    path = getattr(item, "path", None)
    service = _service(request.config)
    ctx = TestContext(
        service=service,
        nodeid=item.nodeid,
        marker=_marker(request.config, item),
        fixture_task=lambda: request.getfixturevalue("bineval_task"),
        pin_path=pin_path(Path(path), item.nodeid.split("::", 1)[-1]) if path is not None else None,
        params=dict(getattr(getattr(item, "callspec", None), "params", {})),
    )
    item.stash[CONTEXT] = ctx
    service.attempts[item.nodeid] = service.attempts.get(item.nodeid, 0) + 1  # see keep_last_attempt
    token = set_current(ctx)
    try:
        yield ctx
    finally:
        reset_current(token)


@pytest.fixture
def bineval_checklist(_bineval_context: TestContext) -> Checklist:
    """The current test's checklist (marker or ``bineval_task``; pinned file when there is one)."""
    from .assertions import checklist_of_test

    return checklist_of_test(_bineval_context)


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
    if ctx is not None and report.when in ("call", "teardown") and _is_worker(item.config):
        from .report.relay import WorkerRelay

        # see relay; after the call too: a worker holds its last test's teardown until it gets another test or
        # is shut down, and an interrupted worker (SIGTERM or Ctrl-C to the process group) gets neither
        report.bineval_progress = WorkerRelay.progress(ctx.nodeid, ctx.service.ledger, ctx.found)
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
    ctx.service.call_ended(ctx, failed=report.failed)
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
    """Workers send their ledger; the controller optimizes, compares with the baseline, builds the run's
    document once and hands it to the outputs (``pytest_bineval_finished``)."""
    config = session.config
    options = config.stash.get(OPTIONS, None)
    service = config.stash.get(SERVICE, None)
    if _is_worker(config):  # pytest-xdist: the controller merges what workers send
        if service is not None:
            config.workeroutput["bineval"] = service.ledger.dumps()  # type: ignore[attr-defined]
            service.close()  # now: a worker may be ended before its unconfigure (the cache's writes must be merged)
        return
    run = config.stash.get(RUN_ID, None)
    if run is not None and options is not None:  # the workers are done: their shared checklists go
        from .session import BinevalService
        from .shared_checklists import remove

        remove(BinevalService.cache_dir_of(options, config.rootpath), run)
    if options is None or (service is None and not (options.report or options.html)):
        return  # nothing ran through pytest-bineval (--collect-only) and no report file was asked for
    service = _service(config)
    service.relay.merge_unfinished(service.ledger)  # pytest-xdist workers whose ledger never came (Ctrl-C, a crash)
    optimized = None
    if options.optimize:
        optimized = config.stash[OPTIMIZER].finish(service.records)
    regressions = service.compare()
    labels = config.stash.get(LABELS, None)
    calibration = None
    if labels is not None:  # the judge against the team's labels; with a trust bar, the gate trusts only some
        calibration, regressions = labels.judge(service.records, regressions, gating=bool(options.fail_on_regression))
        service.regressions = regressions
    if regressions is not None and regressions.failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # --bineval-fail-on-regression
    document = service.report_document(optimized, partial=_partial_reason(session),
                                       workers=config.stash.get(WORKERS, 1))
    if calibration is not None:
        document = document.model_copy(update={"calibration": calibration})
    config.hook.pytest_bineval_finished(config=config, document=document)
    if output_log(config).failed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED  # a report file asked for is missing


def _partial_reason(session: pytest.Session) -> str | None:
    """Why the run did not run every collected test (Ctrl-C, -x/--maxfail, an internal error), or None."""
    if session.exitstatus == pytest.ExitCode.INTERRUPTED:
        term = session.config.stash.get(TERM, None)
        if term is not None and term.received:
            return "interrupted (SIGTERM)"
        stop = session.shouldstop or session.shouldfail
        return f"interrupted: {stop}" if isinstance(stop, str) and stop else "interrupted (Ctrl-C or pytest.exit)"
    if session.exitstatus == pytest.ExitCode.INTERNAL_ERROR:
        return "an internal error ended the run"
    stop = session.shouldfail or session.shouldstop  # -x / --maxfail: "stopping after 1 failures"
    if stop:
        return stop if isinstance(stop, str) else "stopped before every test ran"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """The controller of pytest-xdist keeps what a worker finished (and drops it from the report, which other
    plugins log)."""
    node = getattr(report, "node", None)  # set by the controller on a worker's report
    if node is None:
        return
    payload = report.__dict__.pop("bineval_progress", None)
    if payload is not None:
        _service(node.config).relay.note(_worker_id(node), payload)


def _worker_id(node: Any) -> str:
    return str(getattr(node, "workerinput", {}).get("workerid") or getattr(getattr(node, "gateway", None), "id", "?"))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """The controller keeps the run's id: its workers' shared checklists go when the run ends."""
    node.config.stash[RUN_ID] = str(node.workerinput["testrunuid"])
    node.config.stash[WORKERS] = int(node.workerinput.get("workercount", 1) or 1)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    data = getattr(node, "workeroutput", {}).get("bineval")
    if data:
        service = _service(node.config)
        service.relay.merge_worker(service.ledger, data, _worker_id(node))
