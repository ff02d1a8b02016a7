"""The package's face: ``__init__`` only re-exports (lazily), every name of ``__all__`` resolves, and importing the
package (as pytest does to load the plugin) imports no pydantic model, litellm or model."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest_bineval

ROOT = Path(pytest_bineval.__file__).parent


def test_every_name_of_all_resolves_to_the_object_of_its_module() -> None:
    from pytest_bineval import api, assertions, errors, models

    for name in pytest_bineval.__all__:
        assert getattr(pytest_bineval, name) is not None, name
    assert pytest_bineval.evaluate is api.evaluate
    assert pytest_bineval.assert_passes is assertions.assert_passes
    assert pytest_bineval.UsageError is errors.UsageError and pytest_bineval.Checklist is models.Checklist


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        pytest_bineval.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:  # pragma: no cover - the assertion below says what went wrong
        raise AssertionError("an unknown name resolved")


def test_init_defines_no_function_and_no_module_imports_the_package_root() -> None:
    tree = ast.parse((ROOT / "__init__.py").read_text())
    defined = [n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert defined == ["__getattr__", "__dir__"]  # PEP 562's two hooks, nothing of the product
    offenders = []
    for path in ROOT.rglob("*.py"):
        depth = len(path.relative_to(ROOT).parts) - 1  # a module of a sub-package reaches the root with ".."
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                root_names = node.module == "pytest_bineval" or (node.level == depth + 1 and node.module is None)
                # ``from . import hookspecs`` imports a module; ``from . import evaluate`` reads the package root
                submodules = all((ROOT / a.name).is_dir() or (ROOT / f"{a.name}.py").is_file() for a in node.names)
                if root_names and not submodules:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_importing_the_package_imports_no_pydantic_litellm_or_model() -> None:
    code = ("import sys, pytest_bineval; "
            "print(sorted(m for m in ('pydantic', 'litellm', 'llama_cpp', 'scipy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_importing_the_plugin_leaves_the_environment_alone() -> None:
    """Bug: importing pytest_bineval.llm set LITELLM_LOCAL_MODEL_COST_MAP in the user's environment."""
    code = ("import os; before = dict(os.environ); import pytest_bineval, pytest_bineval.plugin, "
            "pytest_bineval.llm.client, pytest_bineval.llm.providers; "
            "assert dict(os.environ) == before, set(os.environ) ^ set(before); "
            "import sys; assert 'litellm' not in sys.modules")
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_first_cache_miss_imports_litellm_offline_safe(tmp_path: Path) -> None:
    """The other side: a miss (here a model that is not reachable) does import litellm, and with
    LITELLM_LOCAL_MODEL_COST_MAP set (the caller had not set it), so litellm does not try to download its price list.
    (One subprocess for both: each pays litellm's import, seconds.)"""
    script = textwrap.dedent(f'''
        import json, os, sys
        from pytest_bineval import DEFAULT_MODEL, Checklist, Question, evaluate
        checklist = Checklist(task="t", dimensions={{"d": "d"}},
                              questions=[Question(id="d-1", dimension="d", text="q?")])
        assert "litellm" not in sys.modules, "litellm imported eagerly"
        result = evaluate("out", checklist, model="nosuchprovider/x", cache_dir={str(tmp_path / "c")!r}, retries=0)
        print(json.dumps([result.verdicts[0].answer, "litellm" in sys.modules,
                          os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")]))
    ''')
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["error", True, "True"]
    assert "model_prices_and_context_window" not in done.stderr
    assert "cost map" not in done.stderr.lower()
