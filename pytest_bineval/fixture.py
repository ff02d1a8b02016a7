"""The ``bineval`` session fixture's object: the session's checklists and engine for a test's own use."""

from __future__ import annotations

from .conversation import OutputArg
from .dimensions import DimensionsArg, resolve_dimensions
from .errors import UsageError
from .models import Checklist, Evaluation
from .options import Options
from .qworld import DEFAULT_TASK, qworld_dimensions
from .report.record import EvaluationRecord
from .session import BinevalService
from .sources import SourceArg


class Bineval:
    """The ``bineval`` session fixture: ``checklist(task, dimensions)``, ``evaluate(output, checklist,
    source)``, ``options`` and the run's ``records`` so far (this process's)."""

    def __init__(self, service: BinevalService) -> None:
        self._service = service

    @property
    def options(self) -> Options:
        return self._service.options

    @property
    def records(self) -> list[EvaluationRecord]:
        return self._service.records

    def checklist(self, task: str | None, dimensions: DimensionsArg = None, *, strategy: str = "bineval",
                  question: str | None = None) -> Checklist:
        """The (cached) checklist for a task, or with ``strategy="qworld"``/``"qworld-lite"`` the criteria for
        ``question``; pinned files are used by tests, not by this call."""
        service = self._service
        if strategy == "bineval":
            if task is None:
                raise UsageError("a task checklist needs the task text")
            return service.engine.run(service.agenerate(task, resolve_dimensions(dimensions)))
        return service.engine.run(service.agenerate(task or DEFAULT_TASK, qworld_dimensions(dimensions), strategy,
                                                    question))

    def evaluate(self, output: OutputArg, checklist: Checklist, source: SourceArg = None, *,
                 dimensions: list[str] | None = None, model: str | None = None) -> Evaluation:
        """Answer the checklist's questions (or its ``dimensions``') about ``output`` (a text, or a conversation: a
        list of chat messages) with the session's engine (its cache, its usage); no threshold, no record.
        ``source``: a text or a list of documents."""
        return self._service.engine.evaluate(output, checklist.select(dimensions), source, model=model)
