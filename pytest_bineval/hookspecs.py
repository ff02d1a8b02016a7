"""Hooks pytest-bineval adds (registered through ``pytest_addhooks``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:  # a light module: pytest loads it with the plugin (``pytest --help``)
    from .report.document import ReportDocument
    from .report.record import EvaluationRecord


def pytest_bineval_evaluated(config: pytest.Config, record: EvaluationRecord) -> None:
    """Called after each ``assert_passes`` evaluation with its :class:`~pytest_bineval.report.record.EvaluationRecord`
    (test id, task, checklist status, dimensions with score/threshold/outcome, verdicts, output, source
    excerpt, model, usage, location of the call), before the test's outcome is known. Under pytest-xdist it runs
    in the worker that ran the test."""


def pytest_bineval_finished(config: pytest.Config, document: ReportDocument) -> None:
    """Called once at the end of the run, on the controller (never on a pytest-xdist worker), with the run's
    finished :class:`~pytest_bineval.report.document.ReportDocument`: every evaluation of every worker, the totals, the
    comparison with the baseline, the unscored and failed tests, the notes — what ``--bineval-report`` writes.

    Every output of pytest-bineval (JSON, HTML, GitHub job summary and annotations, terminal summary) is an
    implementation of this hook; so can yours be (write the document elsewhere, post it, check it). It is called
    when the run used pytest-bineval or a report file was asked for (a ``--collect-only`` run without
    ``--bineval-report``/``--bineval-html`` builds no document). Do not change the document: the other outputs
    read the same object."""
