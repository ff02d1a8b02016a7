"""Outputs of a run. Each is a small plugin object in its own module, registered by :func:`register` only when
its option is on, and reading nothing but the run's finished
:class:`~pytest_bineval.report.document.ReportDocument` (handed to ``pytest_bineval_finished``) and the config (for
paths): the JSON report, the HTML page, the GitHub job summary and annotations, the terminal summary, and the
``--junitxml`` retagging. A new output is a new module here and one line in :func:`register`.

The plugin modules are light (they import their renderers, :mod:`.terminal`, :mod:`.github`, :mod:`.html`, when
the run is over): registering them costs ``pytest --help`` nothing.
"""

from __future__ import annotations

import pytest

from ..options import Options


def register(config: pytest.Config, options: Options) -> None:
    """Register the outputs whose option is on (on the controller; an xdist worker writes none)."""
    from . import github_summary, html_report, json_report, judge_labels, junit, pr_comment, terminal_summary

    if hasattr(config, "workerinput"):
        return
    from .base import check_output_paths

    check_output_paths(config, {"--bineval-report": options.report, "--bineval-html": options.html,
                                "--bineval-pr-comment": options.pr_comment})
    for module in (terminal_summary, json_report, html_report, github_summary, junit, judge_labels):
        module.register(config, options)
    pr_comment.register(config)
