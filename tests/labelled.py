"""Reports and labels made by hand for the tests of labels, calibration, the trust bar and lint: records with the
verdicts a test names (no judge runs)."""

from __future__ import annotations

from collections.abc import Sequence

from pytest_bineval.labels import Label
from pytest_bineval.models import Evaluation, Question, Verdict
from pytest_bineval.report.document import ReportDocument
from pytest_bineval.report.record import Asked, EvaluationRecord

TASK = "Summarize the article."


def record(test: str, answers: dict[str, str], *, output: str = "an output", index: int = 0, task: str = TASK,
           model: str = "judge/a", explanations: dict[str, str] | None = None,
           dimensions: dict[str, str] | None = None) -> EvaluationRecord:
    """The record of one evaluation: question text -> the judge's answer; each question's dimension is the word
    before the first ':' of ``dimensions``' key for it (default: consistency)."""
    dims = dimensions or {}
    questions = [Question(id=f"q{i}", dimension=dims.get(text, "consistency"), text=text)
                 for i, text in enumerate(answers)]
    verdicts = [Verdict(question_id=q.id, dimension=q.dimension, question=q.text, answer=answers[q.text],  # type: ignore[arg-type]
                        explanation=(explanations or {}).get(q.text, f"because {q.id}"))
                for q in questions]
    names = list(dict.fromkeys(q.dimension for q in questions))
    evaluation = Evaluation(task=task, model=model, dimensions=names, verdicts=verdicts)
    return EvaluationRecord.build(Asked(output=output), evaluation, questions, thresholds={n: 0.5 for n in names},
                                  status="pinned", test=test, index=index)


def document(records: Sequence[EvaluationRecord]) -> ReportDocument:
    return ReportDocument(evaluations=list(records))


def label(rec: EvaluationRecord, question: str, answer: str, **extra: str) -> Label:
    """The label of ``rec``'s verdict on ``question``, answered ``answer``."""
    verdict = next(v for v in rec.verdicts if v.question == question)
    return Label.of(rec, verdict, answer, **extra)  # type: ignore[arg-type]
