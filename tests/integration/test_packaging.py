"""The distribution as a user gets it: ``python -m build`` makes an sdist and a wheel that ``twine check`` accepts;
the wheel carries the prompts, templates and ``py.typed``, declares its extras, and installed into a fresh virtual
environment (not this checkout) gives ``pytest --help`` the ``--bineval-*`` options and the ``bineval`` command.

The fresh environment gets the wheel with ``--no-deps`` and borrows the dependencies of the running one through a
``.pth`` line (installing them offline would take minutes); the package itself comes only from the wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = sorted(p.name for p in (ROOT / "pytest_bineval" / "prompts").iterdir() if p.is_file())


def _run(*cmd: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sdist and wheel built from a copy of the source (the checkout gets no build/ or egg-info)."""
    for module in ("build", "twine"):
        if shutil.which(module) is None and not _importable(module):
            pytest.skip(f"{module} is not installed: pip install -e '.[test]'")
    work = tmp_path_factory.mktemp("pkg")
    src = work / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    shutil.copytree(ROOT / "pytest_bineval", src / "pytest_bineval",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = work / "dist"
    _run(sys.executable, "-m", "build", "--no-isolation", "--outdir", out, src, cwd=work)
    return out


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _wheel(dist: Path) -> Path:
    (wheel,) = dist.glob("pytest_bineval-*-py3-none-any.whl")
    return wheel


def test_sdist_and_wheel_pass_twine_check(dist: Path) -> None:
    files = sorted(dist.iterdir())
    assert sorted(f.suffix for f in files) == [".gz", ".whl"], files
    out = _run(sys.executable, "-m", "twine", "check", "--strict", *files, cwd=dist)
    assert out.count("PASSED") == 2, out


def test_wheel_holds_package_data_and_extras(dist: Path) -> None:
    with zipfile.ZipFile(_wheel(dist)) as wheel:
        names = set(wheel.namelist())
        (meta_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        meta = Parser().parsestr(wheel.read(meta_name).decode())
        (ep_name,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        entry_points = wheel.read(ep_name).decode()
    assert "pytest_bineval/py.typed" in names
    assert {f"pytest_bineval/prompts/{p}" for p in PROMPTS} <= names, sorted(names)
    assert {"pytest_bineval/outputs/templates/report.html.j2", "pytest_bineval/outputs/templates/report.css",
            "pytest_bineval/outputs/templates/report.js"} <= names
    assert not any(n.startswith("tests/") for n in names)
    assert {"local", "server", "test"} <= set(meta.get_all("Provides-Extra") or [])
    requires = meta.get_all("Requires-Dist") or []
    assert 'llama-cpp-python==0.3.36; extra == "local"' in requires, requires
    assert 'llama-cpp-python[server]==0.3.36; extra == "server"' in requires, requires
    assert "bineval = pytest_bineval.plugin" in entry_points
    assert "bineval = pytest_bineval.cli:main" in entry_points


def test_wheel_installs_into_a_fresh_venv(dist: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])",
                        cwd=tmp_path).strip())
    # the dependencies of this environment, after the fresh one's own site-packages (its .pth files, such as an
    # editable install of this checkout, are not processed from there)
    (purelib / "_deps_of_the_test_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # no PYTHONPATH: the checkout on it would count as pytest-bineval installed already
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS", "PYTEST_PLUGINS")}
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", _wheel(dist),
         cwd=tmp_path, env=env)
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    where = _run(python, "-c", "import pytest_bineval, importlib.resources as r; print(pytest_bineval.__file__); "
                 "print(r.files('pytest_bineval').joinpath('prompts/judge.md').is_file())", cwd=tmp_path, env=env)
    location, judge_prompt = where.split()
    assert Path(location).is_relative_to(venv), location
    assert judge_prompt == "True"
    project = tmp_path / "project"
    project.mkdir()
    helptext = _run(python, "-m", "pytest", "--help", cwd=project, env=env)
    for option in ("--bineval-model", "--bineval-threshold", "--bineval-baseline", "--bineval-report"):
        assert option in helptext
    assert "usage: bineval" in _run(venv / "bin" / "bineval", "--help", cwd=project, env=env)
