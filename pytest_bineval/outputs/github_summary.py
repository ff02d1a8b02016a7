"""GitHub Actions (``--bineval-github``, on by default when ``GITHUB_ACTIONS=true``): the markdown job summary
appended to ``$GITHUB_STEP_SUMMARY`` and workflow commands that annotate the ``assert_passes`` lines, both
rendered by :mod:`.github` from the run's finished document.

Model text reaches the log through the terminal summary: while it is written, GitHub's command processing is
stopped (``::stop-commands::<token>``, a token no model can guess), then resumed for our annotations only.
"""

from __future__ import annotations

import secrets
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from ..options import Options
from .base import write_output

if TYPE_CHECKING:
    from ..report.document import ReportDocument


@dataclass(frozen=True)
class GithubEnv:
    """What a GitHub Actions job tells its steps: where the job summary goes, where the checkout is."""

    summary_path: str | None = None
    workspace: str | None = None


def detect(mode: str, environ: Mapping[str, str]) -> GithubEnv | None:
    """``--bineval-github``: ``auto`` is on when ``GITHUB_ACTIONS=true``; None when off."""
    if mode == "off" or (mode == "auto" and environ.get("GITHUB_ACTIONS") != "true"):
        return None
    return GithubEnv(environ.get("GITHUB_STEP_SUMMARY") or None, environ.get("GITHUB_WORKSPACE") or None)


class GithubActions:
    """A plugin object registered only when the GitHub output is on."""

    def __init__(self, env: GithubEnv) -> None:
        self.env = env
        self.document: ReportDocument | None = None

    def pytest_bineval_finished(self, config: pytest.Config, document: ReportDocument) -> None:
        self.document = document
        if not self.env.summary_path or not (document.evaluations or document.unscored
                                             or document.regressions is not None):
            return
        from .github import append_summary, step_summary

        text = step_summary(document.evaluations, document.totals, document.regressions, document.failed_tests,
                            partial=document.partial_reason if document.partial else None,
                            calibration=document.calibration)
        summary_path = self.env.summary_path
        write_output(config, "GitHub job summary", summary_path, lambda _: append_summary(summary_path, text),
                     fail=False)

    @pytest.hookimpl(wrapper=True)
    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> Generator[None, Any, Any]:
        if self.document is None:
            return (yield)
        token = secrets.token_hex(16)
        # what the summary writes quotes model text: GitHub must not read any of it as a command
        terminalreporter.write_line(f"::stop-commands::{token}")
        try:
            return (yield)
        finally:
            from .github import workflow_commands

            terminalreporter.write_line(f"::{token}::")  # workflow commands again, ours only
            document = self.document
            for line in workflow_commands(document.evaluations, document.regressions, rootdir=str(config.rootpath),
                                          workspace=self.env.workspace, failed_tests=document.failed_tests):
                terminalreporter.write_line(line)


def register(config: pytest.Config, options: Options) -> None:
    import os

    env = detect(options.github, os.environ)
    if env is not None:
        config.pluginmanager.register(GithubActions(env), "bineval-github")
