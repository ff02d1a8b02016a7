"""Hooks pytest-bineval adds (registered through ``pytest_addhooks``)."""

from __future__ import annotations

from typing import Any

import pytest


def pytest_bineval_evaluated(config: pytest.Config, record: dict[str, Any]) -> None:
    """Called after each ``assert_passes`` evaluation with its JSON-able record (test id, task,
    questions, verdicts, scores, thresholds, outcome, model, usage), before the test's outcome is known."""
