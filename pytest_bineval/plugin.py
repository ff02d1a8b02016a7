"""pytest hooks and fixtures of pytest-bineval; the logic lives in plain objects elsewhere.

Loading this module imports neither litellm nor a model: ``pytest --help`` stays fast.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from .assertions import NoTaskError, TestContext, reset_current, set_current
from .errors import BinevalError, BinevalJudgeError
from .models import Checklist, Usage
from .options import add_options, read_options
from .session import BinevalService, pin_path

SERVICE = pytest.StashKey[BinevalService]()
CONTEXT = pytest.StashKey[TestContext]()
WORKER_USAGE = pytest.StashKey[list[Usage]]()
OPTIMIZED = pytest.StashKey[list[Any]]()
MARKER_KWARGS = frozenset({"task", "dimensions", "threshold", "prompt"})
MARKER_HELP = (
    "bineval(task=None, dimensions=None, threshold=None, prompt=None): the task the test's output is made "
    "for, the checklist's dimensions (names or {name: definition}), thresholds (float or {dimension: float}) "
    "and the generator prompt file that made the output (rootdir-relative; what --bineval-optimize edits)"
)


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    # litellm builds pydantic schemas lazily and warns about its own TypedDicts: not the user's concern
    config.addinivalue_line("filterwarnings", "ignore:.*ReadOnly.*qualifier:UserWarning")
    options = read_options(config)
    try:
        service = BinevalService.create(options, config.rootpath)
    except ValueError as exc:  # an unreadable or malformed --bineval-judge-prompt
        raise pytest.UsageError(f"--bineval-judge-prompt: {exc}") from None
    service.on_record = lambda record: config.hook.pytest_bineval_evaluated(config=config, record=record)
    config.stash[SERVICE] = service
    config.stash[WORKER_USAGE] = []


def pytest_unconfigure(config: pytest.Config) -> None:
    service = config.stash.get(SERVICE, None)
    if service is not None:
        service.close()


def _marker_kwargs(item: pytest.Item) -> dict[str, Any]:
    """Kwargs of the closest ``bineval`` markers (test > class > module), validated."""
    merged: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers("bineval"))):
        if mark.args:
            raise pytest.UsageError(
                f"{item.nodeid}: @pytest.mark.bineval takes keyword arguments only "
                f"({', '.join(sorted(MARKER_KWARGS))}), got positional {mark.args!r}"
            )
        unknown = set(mark.kwargs) - MARKER_KWARGS
        if unknown:
            raise pytest.UsageError(
                f"{item.nodeid}: unknown @pytest.mark.bineval argument(s) {sorted(unknown)}; "
                f"allowed: {sorted(MARKER_KWARGS)}"
            )
        merged.update(mark.kwargs)
    task = merged.get("task")
    if task is not None and (not isinstance(task, str) or not task.strip()):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.bineval(task=...) must be a non-empty string")
    threshold = merged.get("threshold")
    if threshold is not None and not isinstance(threshold, (int, float, dict)):
        raise pytest.UsageError(f"{item.nodeid}: bineval threshold must be a number or a dict, not {threshold!r}")
    prompt = merged.get("prompt")
    if prompt is not None and (not isinstance(prompt, (str, os.PathLike)) or not str(prompt).strip()):
        raise pytest.UsageError(f"{item.nodeid}: @pytest.mark.bineval(prompt=...) must be a file path, not {prompt!r}")
    return merged


def _prompt_name(config: pytest.Config, item: pytest.Item, marker: dict[str, Any]) -> str | None:
    """The marker's generator prompt file, rootdir-relative (POSIX) when inside the rootdir; it must exist."""
    raw = marker.get("prompt")
    if raw is None:
        return None
    path = Path(os.fspath(raw)).expanduser()
    if not path.is_absolute():
        path = config.rootpath / path
    if not path.is_file():
        raise pytest.UsageError(
            f"{item.nodeid}: @pytest.mark.bineval(prompt={os.fspath(raw)!r}): no such file {path} "
            f"(relative paths start at the rootdir, {config.rootpath})"
        )
    path = path.resolve()
    try:
        return path.relative_to(config.rootpath.resolve()).as_posix()
    except ValueError:
        return str(path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        _prompt_name(config, item, _marker_kwargs(item))  # fail the run early on a malformed marker


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
    service = request.config.stash[SERVICE]
    path = getattr(item, "path", None)
    marker = _marker_kwargs(item)
    ctx = TestContext(
        service=service,
        nodeid=item.nodeid,
        marker=marker,
        prompt=_prompt_name(request.config, item, marker),
        fixture_task=lambda: request.getfixturevalue("bineval_task"),
        pin_path=pin_path(Path(path), item.nodeid.split("::", 1)[-1]) if path is not None else None,
    )
    item.stash[CONTEXT] = ctx
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

    ctx = _bineval_context
    task = ctx.marker.get("task") or ctx.fixture_task()
    if not task:
        raise pytest.UsageError(NO_TASK_MESSAGE)
    checklist, _ = run_sync(ctx.service.achecklist_for(ctx, task, ctx.marker.get("dimensions")))
    return checklist


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, Any, Any]:
    report = yield
    ctx = item.stash.get(CONTEXT, None)
    if report.when != "call" or ctx is None:
        return report
    if call.excinfo is not None and call.excinfo.errisinstance((NoTaskError, BinevalError)):
        # Not a verdict on the output: the test could not be scored (reported as an error, not a failure).
        report.bineval_error = True
        if not call.excinfo.errisinstance(BinevalJudgeError):
            report.longrepr = f"{call.excinfo.typename}: {call.excinfo.value}"
    for i, rec in enumerate(ctx.records):
        suffix = "" if len(ctx.records) == 1 else f"[{i}]"
        for dim, score in rec["scores"].items():
            prop = (f"bineval{suffix}:{dim}", score)
            report.user_properties.append(prop)
            item.user_properties.append(prop)  # junitxml writes the teardown report's properties
    if report.failed and ctx.records:
        tw = item.config.get_terminal_writer()
        from .report import render_test_section

        report.sections.append(
            ("bineval", render_test_section(ctx.records, color=tw.hasmarkup, width=tw.fullwidth))
        )
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_report_teststatus(report: pytest.TestReport, config: pytest.Config) -> tuple[str, str, str] | None:
    """A judge failure, a missing task or (with --bineval-strict) an unpinned checklist is an error of
    the test: never a pass, and not a verdict on the output either."""
    if report.when == "call" and report.failed and getattr(report, "bineval_error", False):
        return "error", "E", "ERROR"
    return None


# -- pytest-xdist: workers send their records, the controller merges them -----------------------------------
def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def pytest_sessionfinish(session: pytest.Session) -> None:
    config = session.config
    service = config.stash.get(SERVICE, None)
    if service is None:
        return
    if _is_worker(config):
        config.workeroutput["bineval"] = json.dumps({  # type: ignore[attr-defined]
            "records": service.records,
            "usage": service.engine.usage.model_dump(mode="json"),
            "pins_written": service.pins_written,
        })
        return
    if service.options.optimize:
        config.stash[OPTIMIZED] = _optimize(config, service)
    if service.options.report:
        path = Path(service.options.report)
        if not path.is_absolute():
            path = config.rootpath / path
        path.parent.mkdir(parents=True, exist_ok=True)
        from .report import json_report

        optimized = config.stash.get(OPTIMIZED, None) if service.options.optimize else None
        path.write_text(json.dumps(json_report(service.records, _totals(config), _settings(service), optimized),
                                   indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _optimize(config: pytest.Config, service: BinevalService) -> list[Any]:
    """--bineval-optimize: one iteration of the self-update loop per generator prompt file the tests name."""
    from .engine import run_sync
    from .optimize import OptimizeResult, PromptOptimizer

    optimizer = PromptOptimizer(service.engine)
    results: list[Any] = []
    for name in sorted({r["prompt"] for r in service.records if r.get("prompt")}):
        path = Path(name) if Path(name).is_absolute() else config.rootpath / name
        try:
            result = run_sync(optimizer.step(name, path, service.records))
            if Path(result.history).is_relative_to(config.rootpath):
                result.history = Path(result.history).relative_to(config.rootpath).as_posix()
            results.append(result)
        except (OSError, BinevalError) as exc:
            results.append(OptimizeResult(prompt=name, status="error", message=str(exc)))
    return results


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    data = getattr(node, "workeroutput", {}).get("bineval")
    if not data:
        return
    payload = json.loads(data)
    service = node.config.stash[SERVICE]
    service.records.extend(payload["records"])
    service.pins_written.extend(payload["pins_written"])
    node.config.stash[WORKER_USAGE].append(Usage.model_validate(payload["usage"]))


def _settings(service: BinevalService) -> dict[str, Any]:
    s = service.engine.settings
    return {"model": s.judge_model, "checklist_model": s.generator_model, "cache": s.cache,
            "temperature": s.temperature, "concurrency": s.concurrency}


def _totals(config: pytest.Config) -> dict[str, Any]:
    from .report import totals

    service = config.stash[SERVICE]
    usage = Usage.total([service.engine.usage, *config.stash[WORKER_USAGE]])
    unpinned = {(r["test"], r["task"]) for r in service.records if r["checklist_status"] in ("unpinned", "stale")}
    return totals(service.records, usage, unpinned=len(unpinned), pins_written=len(set(service.pins_written)))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    service = config.stash.get(SERVICE, None)
    if service is None or _is_worker(config):
        return
    from .report import optimize_lines, summary_lines

    if service.records:
        terminalreporter.write_sep("=", "bineval summary")
        for text, markup in summary_lines(service.records, _totals(config)):
            terminalreporter.write_line(text, **markup)
        if service.options.report:
            terminalreporter.write_line(f"bineval report: {service.options.report}")
    if service.options.optimize:
        terminalreporter.write_sep("=", "bineval optimize")
        optimized: list[Any] = config.stash.get(OPTIMIZED, [])
        for text, markup in optimize_lines(optimized):
            terminalreporter.write_line(text, **markup)
