"""``--bineval-labels FILE``: the ``bineval judge`` section of the terminal summary, the run's verdicts against the
team's labels (:class:`~pytest_bineval.calibrate.Calibration`, held by the finished document), after the
``bineval summary``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from ..options import Options

if TYPE_CHECKING:
    from ..report.document import ReportDocument


class JudgeLabels:
    """A plugin object registered only when ``--bineval-labels`` is given."""

    def __init__(self) -> None:
        self.document: ReportDocument | None = None

    def pytest_bineval_finished(self, config: pytest.Config, document: ReportDocument) -> None:
        self.document = document

    @pytest.hookimpl(trylast=True)  # after the bineval summary
    def pytest_terminal_summary(self, terminalreporter: Any, config: pytest.Config) -> None:
        calibration = self.document.calibration if self.document is not None else None
        if calibration is None:
            return
        from ..calibrate import summary_lines

        terminalreporter.write_sep("=", "bineval judge")
        for text, markup in summary_lines(calibration):
            terminalreporter.write_line(text, **markup)


def register(config: pytest.Config, options: Options) -> None:
    if options.labels:
        config.pluginmanager.register(JudgeLabels(), "bineval-judge-labels")
