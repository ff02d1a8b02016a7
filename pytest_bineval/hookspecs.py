"""Hooks pytest-bineval adds (registered through ``pytest_addhooks``)."""

from __future__ import annotations

import pytest

from .record import EvaluationRecord


def pytest_bineval_evaluated(config: pytest.Config, record: EvaluationRecord) -> None:
    """Called after each ``assert_passes`` evaluation with its :class:`~pytest_bineval.record.EvaluationRecord`
    (test id, task, checklist status, dimensions with score/threshold/outcome, verdicts, output, source
    excerpt, model, usage, location of the call), before the test's outcome is known."""
