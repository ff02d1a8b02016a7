"""The end-of-run terminal sections (``bineval regressions``, ``bineval summary``, ``bineval optimize``) and the
run's notes, rendered by :mod:`.terminal` from the finished document through pytest's terminal reporter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from ..options import Options
from .base import output_log

if TYPE_CHECKING:
    from ..report.document import ReportDocument


class TerminalSummary:
    """A plugin object registered on the controller (the terminal is always on)."""

    def __init__(self) -> None:
        self.document: ReportDocument | None = None

    def pytest_bineval_finished(self, config: pytest.Config, document: ReportDocument) -> None:
        self.document = document

    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        document = self.document
        log = output_log(config)
        if document is not None:
            from .terminal import optimize_lines, pin_lines, regression_lines, summary_lines

            regressions = document.regressions
            if regressions is not None:
                terminalreporter.write_sep("=", "bineval regressions")
                for text, markup in regression_lines(regressions):
                    terminalreporter.write_line(text, **markup)
            if document.evaluations or document.unscored or regressions is not None or document.batch is not None:
                terminalreporter.write_sep("=", "bineval summary")
                for text, markup in summary_lines(document.evaluations, document.totals, regressions,
                                                  document.unscored, checklists=document.checklists,
                                                  confirmation=document.confirmation,
                                                  budget=document.settings.budget,
                                                  budget_workers=document.settings.budget_workers):
                    terminalreporter.write_line(text, **markup)
                if document.batch is not None:  # --bineval-batch
                    from .batch import batch_lines

                    for text, markup in batch_lines(document.batch, regressions):
                        terminalreporter.write_line(text, **markup)
                for text, markup in pin_lines(document.pins):  # --bineval-update-checklists
                    terminalreporter.write_line(text, **markup)
                for label, path in log.written:
                    terminalreporter.write_line(f"{label}: {path}")
            if regressions is not None:  # the outcome in one line, as the PR comment's headline says it
                from .verdict import outcome

                parts = outcome(document)
                terminalreporter.write_line("bineval: " + " · ".join(p.text for p in parts),
                                            bold=True, red=any(p.bad for p in parts))
            if document.optimize is not None:
                terminalreporter.write_sep("=", "bineval optimize")
                for text, markup in optimize_lines(document.optimize):
                    terminalreporter.write_line(text, **markup)
        for note in [*log.notes, *(document.notes if document is not None else [])]:
            terminalreporter.write_line(note, yellow=True)
        if document is not None and document.partial:
            terminalreporter.write_line(
                f"bineval: partial run ({document.partial_reason}): the report covers only the tests that ran; "
                "it is no baseline (--bineval-allow-partial-baseline to use it anyway)", red=True, bold=True)


def register(config: pytest.Config, options: Options) -> None:
    config.pluginmanager.register(TerminalSummary(), "bineval-terminal-summary")
