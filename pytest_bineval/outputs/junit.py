"""--junitxml: a test that could not be scored (judge error, missing task, unpinned checklist under
--bineval-strict) is an ``<error>`` of its test case, as the terminal says, not a ``<failure>``.

junitxml writes every failed call report as ``<failure>``; :class:`JunitErrors` runs after it
(``trylast``) and retags the element just written, moving the count from failures to errors.
"""

from __future__ import annotations

from typing import Any

import pytest

from ..options import Options


class JunitErrors:
    """A plugin object registered only when ``--junitxml`` is given."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or not report.failed or not getattr(report, "bineval_error", False):
            return
        xml = _logxml(self.config)
        if xml is None:
            return
        reporter = xml.node_reporter(report)
        for element in reversed(reporter.nodes):
            if element.tag == "failure":
                element.tag = "error"
                xml.stats["failure"] -= 1
                xml.stats["error"] += 1
                break


def _logxml(config: pytest.Config) -> Any:
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # pragma: no cover - a pytest without junitxml's stash key
        return None
    return config.stash.get(xml_key, None)


def register(config: pytest.Config, options: Options) -> None:
    if getattr(config.option, "xmlpath", None):
        config.pluginmanager.register(JunitErrors(config), "bineval-junit")
