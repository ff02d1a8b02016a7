"""``--bineval-html PATH``: the self-contained HTML page of the run's finished document (:mod:`.html`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from ..options import Options
from .base import write_output

if TYPE_CHECKING:
    from ..report.document import ReportDocument


class HtmlReport:
    """A plugin object registered only when ``--bineval-html`` is given."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pytest_bineval_finished(self, config: pytest.Config, document: ReportDocument) -> None:
        from .html import write_html

        def write(path: Path) -> None:
            write_html(path, document)

        write_output(config, "HTML report", self.path, write, label="bineval html report")


def register(config: pytest.Config, options: Options) -> None:
    if options.html:
        config.pluginmanager.register(HtmlReport(options.html), "bineval-html-report")
