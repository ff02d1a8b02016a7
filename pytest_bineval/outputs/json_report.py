"""``--bineval-report PATH``: the run's finished document as JSON (format 2, :class:`ReportDocument`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from ..options import Options
from .base import write_output

if TYPE_CHECKING:
    from ..report.document import ReportDocument


class JsonReport:
    """A plugin object registered only when ``--bineval-report`` is given."""

    def __init__(self, path: str) -> None:
        self.path = path

    @pytest.hookimpl(tryfirst=True)  # the first file the terminal names
    def pytest_bineval_finished(self, config: pytest.Config, document: ReportDocument) -> None:
        write_output(config, "JSON report", self.path, document.write, label="bineval report")


def register(config: pytest.Config, options: Options) -> None:
    if options.report:
        config.pluginmanager.register(JsonReport(options.report), "bineval-json-report")
