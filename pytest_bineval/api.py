"""The Python API outside pytest: generate a checklist, evaluate an output (sync and async twins).

Each call builds one :class:`~pytest_bineval.engine.Engine` from the settings and closes it afterwards; inside a
pytest run, :func:`~pytest_bineval.assertions.assert_passes` uses the session's engine instead.
"""

from __future__ import annotations

from typing import Any

from .conversation import OutputArg
from .dimensions import DimensionsArg
from .engine import Engine, run_sync
from .judge import check_output
from .models import Checklist, Evaluation
from .qworld import QworldConfig
from .settings import Settings
from .sources import SourceArg

__all__ = ["aevaluate", "agenerate_checklist", "evaluate", "generate_checklist"]


def _engine(model: str | None, settings: Settings | None, options: dict[str, Any]) -> Engine:
    base = settings or Settings()
    return Engine(base.with_overrides(model=model, **options))


async def agenerate_checklist(task: str | None, dimensions: DimensionsArg = None, *, model: str | None = None,
                              strategy: str = "bineval", question: str | None = None,
                              qworld: QworldConfig | None = None, settings: Settings | None = None,
                              **options: Any) -> Checklist:
    """Turn a task prompt into a checklist of yes/no questions grouped by dimension.

    ``dimensions``: built-in names (coherence, consistency, fluency, relevance; all four when None)
    and/or ``{"name": "definition"}`` for your own. ``options`` are :class:`Settings` fields.

    ``strategy="qworld"`` (or ``"qworld-lite"``, one call) writes question-specific criteria with importance
    points for ``question`` instead (``task`` may then be None; ``dimensions`` default to one, ``quality``);
    ``qworld``: the tree's :class:`QworldConfig` (default: from the settings' ``qworld_*`` fields).
    """
    engine = _engine(model, settings, options)
    try:
        return await engine.achecklist(task, dimensions, strategy=strategy, question=question, qworld=qworld)
    finally:
        engine.close()


def generate_checklist(task: str | None, dimensions: DimensionsArg = None, *, model: str | None = None,
                       strategy: str = "bineval", question: str | None = None, qworld: QworldConfig | None = None,
                       settings: Settings | None = None, **options: Any) -> Checklist:
    """Sync twin of :func:`agenerate_checklist`."""
    return run_sync(agenerate_checklist(task, dimensions, model=model, strategy=strategy, question=question,
                                        qworld=qworld, settings=settings, **options))


async def aevaluate(output: OutputArg, checklist: Checklist, source: SourceArg = None, *,
                    dimensions: list[str] | str | None = None, model: str | None = None,
                    settings: Settings | None = None, **options: Any) -> Evaluation:
    """Answer every question of ``checklist`` (or of its ``dimensions``) about ``output``: a text, or a
    conversation (a list of chat messages in the OpenAI format, or a :class:`~pytest_bineval.Conversation`), whose
    questions of scope ``each_turn`` are asked of every assistant turn; ``source``: the input it was made from, a
    text or a list of documents (strings, or ``{"id", "title", "text"}`` mappings: see
    :mod:`pytest_bineval.sources`).

    Judge failures are error verdicts (``result.errors``), never yes or no; scores count answered
    questions only. An empty output is judged like any other; an output that is neither a str nor a list of
    messages is a TypeError, a list of messages of a bad shape a :class:`ConversationError` naming the message; an
    output and source too large for the judge's context raise :class:`InputTooLargeError`.
    """
    output = check_output(output, source)
    selected = checklist.select([dimensions] if isinstance(dimensions, str) else dimensions)
    engine = _engine(model, settings, options)
    try:
        return await engine.aevaluate(output, selected, source)
    finally:
        engine.close()


def evaluate(output: OutputArg, checklist: Checklist, source: SourceArg = None, *,
             dimensions: list[str] | str | None = None, model: str | None = None,
             settings: Settings | None = None, **options: Any) -> Evaluation:
    """Sync twin of :func:`aevaluate`."""
    return run_sync(aevaluate(output, checklist, source, dimensions=dimensions, model=model,
                              settings=settings, **options))
