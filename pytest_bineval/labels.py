"""People's labels of the judge's verdicts: a JSON-lines file kept next to the pins, one human verdict a line.

Each line is one object::

    {"test": "tests/test_summarizer.py::test_summary[ferry_strike]", "index": 0, "dimension": "consistency",
     "question": "Is every claim in the response supported by the input?", "question_digest": "3f1c0a9e2b7d4c61",
     "answer": "no", "output_digest": "9a0b1c2d3e4f5a6b", "judge": "yes", "labeler": "ana",
     "note": "the strike days are wrong", "created": "2026-12-02T10:00:00+00:00"}

``test`` (the pytest node id) and ``index`` (which evaluation of the test, 0 for the first) name the evaluation;
``question`` is the question's text and ``question_digest`` its digest (:func:`question_digest`, of the text with
its whitespace collapsed); ``answer`` is the person's answer to the question, ``yes`` or ``no``. Optional:
``output_digest`` (which output was labelled: the report's ``output_digest`` of the evaluation), ``dimension``,
``judge`` (what the judge had answered, kept for the reader), ``labeler``, ``note``, ``created``. Other keys are
ignored.

A label is used only where it still says something about this judge's verdict (:func:`match_labels`): its test
made the evaluation, the evaluation asked the same question (by digest), and, when the label names its output,
the output is the same. A label whose question text no longer matches its own digest (edited after labelling),
whose question the test no longer asks, or whose output changed is **stale**: said, with why, never used. A label
of a test the report does not hold is *not in this report* (another subset of the suite). Later lines win: a label
of an evaluation and question labelled again further down the file is *superseded*, so appending labels to the
file (``bineval label``, a download from the HTML page) is how it grows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import UsageError
from .models import Answer, Verdict
from .report.comparison import similarity
from .report.record import EvaluationRecord, text_digest

LabelAnswer = Literal["yes", "no"]


def question_digest(text: str) -> str:
    """16 hex digits of the SHA-256 of a question's text with its whitespace collapsed."""
    return text_digest(" ".join(text.split()))


class Label(BaseModel):
    """One person's answer to one question about one evaluation's output."""

    model_config = ConfigDict(extra="ignore")

    test: str = Field(min_length=1, description="the pytest node id of the test")
    index: int = Field(default=0, ge=0, description="which evaluation of the test (0 for the first)")
    dimension: str = ""
    question: str = Field(min_length=1, description="the question's text")
    question_digest: str = Field(default="", description="question_digest() of the text when it was labelled")
    answer: LabelAnswer = Field(description="the person's answer to the question")
    output_digest: str = Field(default="", description="the evaluation's output_digest when it was labelled")
    judge: Answer | None = Field(default=None, description="the judge's answer when it was labelled")
    labeler: str = ""
    note: str = ""
    created: str = ""

    @classmethod
    def of(cls, record: EvaluationRecord, verdict: Verdict, answer: LabelAnswer, *, labeler: str = "",
           note: str = "") -> Label:
        """The label of ``verdict`` (of ``record``) answered ``answer`` by a person, now."""
        return cls(test=record.test, index=record.index, dimension=verdict.dimension, question=verdict.question,
                   question_digest=question_digest(verdict.question), answer=answer,
                   output_digest=record.output_digest, judge=verdict.answer, labeler=labeler, note=note,
                   created=datetime.now(timezone.utc).isoformat(timespec="seconds"))

    @property
    def key(self) -> str:
        """The evaluation it labels, as :attr:`EvaluationRecord.key` names it."""
        return self.test if self.index == 0 else f"{self.test} #{self.index}"

    def to_line(self) -> str:
        """The label as one line of the file (empty optional fields left out)."""
        data = self.model_dump(mode="json", exclude_defaults=True)
        data.setdefault("index", self.index)
        order = list(Label.model_fields)
        return json.dumps({k: data[k] for k in order if k in data}, ensure_ascii=False) + "\n"


@dataclass(frozen=True)
class LabelLine:
    """A label and the line of the file it is on (1-based)."""

    line: int
    label: Label


def parse_labels(text: str, where: str) -> list[LabelLine]:
    """The labels of a labels file's text; a line that is not a label is a :class:`UsageError` naming the line and
    the field (nothing of a malformed file is used)."""
    out = []
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            data = json.loads(raw)
        except ValueError as exc:
            raise UsageError(f"{where}, line {number}: not JSON ({exc}); a labels file holds one JSON object a "
                             "line") from None
        if not isinstance(data, dict):
            raise UsageError(f"{where}, line {number}: a label is a JSON object, not {type(data).__name__}")
        try:
            out.append(LabelLine(number, Label.model_validate(data)))
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(line)'}: {e['msg']}"
                                 for e in exc.errors(include_url=False)[:3])
            raise UsageError(f"{where}, line {number}: not a label ({problems})") from None
    return out


def read_labels(path: str | os.PathLike[str], *, missing_ok: bool = False) -> list[LabelLine]:
    """The labels of the file at ``path`` (none when it does not exist and ``missing_ok``)."""
    file = Path(path)
    if missing_ok and not file.exists():
        return []
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read the labels file {os.fspath(path)}: {exc}") from None
    return parse_labels(text, os.fspath(path))


def append_labels(path: str | os.PathLike[str], labels: Iterable[Label]) -> None:
    """Append ``labels`` to the file (created when missing), each line flushed as written: a label given is
    never lost to a later interruption."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    with file.open("a", encoding="utf-8") as handle:
        if file.stat().st_size and not _ends_with_newline(file):
            handle.write("\n")
        for label in labels:
            handle.write(label.to_line())
            handle.flush()


def _ends_with_newline(file: Path) -> bool:
    with file.open("rb") as handle:
        handle.seek(-1, os.SEEK_END)
        return handle.read(1) == b"\n"


# -- which labels speak of which verdicts --------------------------------------------------------------------------

IssueKind = Literal["stale", "not in report", "superseded"]


class LabelIssue(BaseModel):
    """A label that is not used, and why."""

    kind: IssueKind
    line: int
    test: str
    index: int = 0
    question: str
    why: str


@dataclass(frozen=True)
class Matched:
    """A label that speaks of a verdict of this report."""

    line: int
    label: Label
    record: EvaluationRecord
    verdict: Verdict


@dataclass
class Matching:
    """The labels of a file matched with a report's verdicts."""

    matched: list[Matched] = field(default_factory=list)
    issues: list[LabelIssue] = field(default_factory=list)

    def of_kind(self, kind: IssueKind) -> list[LabelIssue]:
        return [i for i in self.issues if i.kind == kind]

    @property
    def answered(self) -> list[Matched]:
        """The matched labels whose verdict the judge answered (a judge error, or a question code decides, is
        compared with nothing)."""
        return [m for m in self.matched if m.verdict.answer != "error" and m.verdict.decided_by != "code"]

    @property
    def code_checks(self) -> list[Matched]:
        """The matched labels of questions a check decides by code: not the judge's answers."""
        return [m for m in self.matched if m.verdict.decided_by == "code"]

    @property
    def judge_errors(self) -> list[Matched]:
        return [m for m in self.matched if m.verdict.answer == "error" and m.verdict.decided_by != "code"]

    def labelled(self) -> set[tuple[str, str]]:
        """(evaluation key, question id) of every verdict a label speaks of."""
        return {(m.record.key, m.verdict.question_id) for m in self.matched}


def _nearest(question: str, verdicts: Sequence[Verdict]) -> str:
    """`` (it now asks '...', similarity 0.86)`` naming the most similar question the evaluation asks, or ""."""
    if not verdicts:
        return ""
    score, best = max((similarity(question, v.question), v.question) for v in verdicts)
    return f" (its closest question now: {best!r}, similarity {score:.2f})" if score >= 0.5 else ""


def match_labels(labels: Sequence[LabelLine], records: Sequence[EvaluationRecord]) -> Matching:
    """Each label matched with the verdict it speaks of in ``records``, or the reason it is not used."""
    by_key = {(r.test, r.index): r for r in records}
    last: dict[tuple[str, int, str], int] = {}
    for ll in labels:
        last[(ll.label.test, ll.label.index, question_digest(ll.label.question))] = ll.line
    out = Matching()
    for ll in labels:
        lab = ll.label

        def issue(kind: IssueKind, why: str, lab: Label = lab, line: int = ll.line) -> None:
            out.issues.append(LabelIssue(kind=kind, line=line, test=lab.test, index=lab.index,
                                         question=lab.question, why=why))

        digest = question_digest(lab.question)
        later = last[(lab.test, lab.index, digest)]
        if later != ll.line:
            issue("superseded", f"labelled again on line {later}")
            continue
        if lab.question_digest and lab.question_digest != digest:
            issue("stale", "its question text does not match its question_digest (the text was edited after "
                           "labelling)")
            continue
        record = by_key.get((lab.test, lab.index))
        if record is None:
            issue("not in report", "this report has no such evaluation (another subset of the suite, or the test "
                                   "is gone)")
            continue
        asked = [v for v in record.verdicts if question_digest(v.question) == digest]
        if lab.dimension:
            asked = [v for v in asked if v.dimension == lab.dimension] or asked
        if not asked:
            issue("stale", "the evaluation no longer asks this question (its checklist changed)"
                  + _nearest(lab.question, record.verdicts))
            continue
        if lab.output_digest and record.output_digest and lab.output_digest != record.output_digest:
            issue("stale", f"the output changed since it was labelled (output digest {lab.output_digest}, now "
                           f"{record.output_digest})")
            continue
        out.matched.append(Matched(ll.line, lab, record, asked[0]))
    return out
