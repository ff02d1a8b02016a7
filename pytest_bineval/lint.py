"""``bineval lint``: questions that cannot tell outputs apart, found in pinned checklists and a run's report, each
with its reason. Lint reads; it never edits a pin or a question.

- **constant** (a report): a question answered the same for every output of a task (at least ``min_outputs``
  different outputs): it tells those outputs apart in nothing. A generated "Is the article on Fluency?" answered
  yes 0% of the time is one.
- **duplicate**: two questions of one checklist whose texts are as close as an edit the baseline comparison calls
  small (:func:`pytest_bineval.report.comparison.similarity` at least
  :data:`~pytest_bineval.report.comparison.EDIT_SIMILARITY`) and that share at least half of their content words
  (:data:`DUPLICATE_CONTENT`): one counts the same property twice.
- **vague**: a question that names no property to check: once the words every question shares ("Does the
  response ...?"), generic words ("good", "quality", "summary") and its dimension's own name are set aside, no word
  is left (:func:`vague_reason`).

(No check counts a dimension's questions: the regression gate confirms a regressed case by re-asking its flipped
questions, whatever their number, and its suite-level test counts evaluations, not questions.)

The checks are plain functions of questions (:func:`lint_questions`) so that the self-update loop and Qworld's
consolidation can use the same signals.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .errors import PinError, UsageError
from .labels import question_digest
from .models import Question
from .pins import PIN_DIR, PinFile
from .report.comparison import EDIT_SIMILARITY, similarity
from .report.record import EvaluationRecord
from .similarity import Lexical, content_words

# A pair of questions is a duplicate only when, besides reading alike (difflib), at least this share of their content
# words is the same: the frame every question shares ("Are the ... in the response the same as in the input?")
# makes two questions about different things read alike to difflib.
DUPLICATE_CONTENT = 0.5

FindingKind = Literal["constant", "duplicate", "vague"]
KINDS: tuple[FindingKind, ...] = ("constant", "duplicate", "vague")

# Words that name no property of an output: what is judged, and praise or blame in general.
GENERIC = content_words("""
summary summaries output text article content input source document passage story piece message
good well bad poor appropriate adequate acceptable quality overall satisfactory fine proper properly ok okay
reasonable nice great high low effective sufficient enough general generally correct correctly accurate
accurately written worded done made presented formulated meet meets met criteria criterion aspect term terms
regard regarding respect dimension check standard standards expectation expectations requirement requirements
level sense way manner
""")


def _names_dimension(word: str, dimension: str) -> bool:
    """Whether ``word`` is a form of the dimension's name (``fluent`` of ``fluency``, ``consistent`` of
    ``consistency``, not ``consider``): they agree on all but the last two letters of the shorter, and on five at
    least."""
    name = dimension.lower()
    common = next((i for i, (a, b) in enumerate(zip(word, name, strict=False)) if a != b), min(len(word), len(name)))
    return common >= max(5, min(len(word), len(name)) - 2)


def vague_reason(text: str, dimension: str) -> str | None:
    """Why a question names no property (None: it names one)."""
    words = content_words(text)
    left = [w for w in words if w not in GENERIC and not _names_dimension(w, dimension) and not w.isdigit()]
    if left:
        return None
    named = sorted(w for w in words if _names_dimension(w, dimension))
    generic = sorted(w for w in words if w in GENERIC)
    parts = []
    if named:
        parts.append(f"its dimension's name ({', '.join(named)})")
    if generic:
        parts.append(f"generic words ({', '.join(generic)})")
    only = " and ".join(parts) or "no content word at all"
    return (f"names no property to check: only {only}; ask about one thing an output can have or lack (a fact, a "
            "name, a number, an error of a kind)")


class Finding(BaseModel):
    """One problem lint found, and why it is one."""

    kind: FindingKind
    where: str = Field(description="the pin file and entry, or the report and the task")
    dimension: str
    question: str = ""
    other: str = Field(default="", description="duplicate: the question it repeats")
    reason: str

    def text(self) -> str:
        head = f"{self.where} [{self.dimension}] {self.kind.upper()}"
        if self.question:
            head += f": {self.question!r}" + (f" and {self.other!r}" if self.other else "")
        return f"{head}: {self.reason}"


def lint_questions(questions: Sequence[Question], where: str) -> list[Finding]:
    """The duplicate and vague findings of one checklist's questions."""
    out: list[Finding] = []
    for q in questions:
        why = vague_reason(q.text, q.dimension)
        if why is not None and q.check is None:  # a question code decides names its property in its check
            out.append(Finding(kind="vague", where=where, dimension=q.dimension, question=q.text, reason=why))
    words = [content_words(q.text) for q in questions]
    for i, a in enumerate(questions):
        for j in range(i + 1, len(questions)):
            b = questions[j]
            score, shared = similarity(a.text, b.text), Lexical.score(words[i], words[j])
            if score >= EDIT_SIMILARITY and shared >= DUPLICATE_CONTENT:
                dims = a.dimension if a.dimension == b.dimension else f"{a.dimension}, {b.dimension}"
                out.append(Finding(kind="duplicate", where=where, dimension=dims, question=a.text, other=b.text,
                                   reason=f"similarity {score:.2f} (at least {EDIT_SIMILARITY:.2f}, what the baseline "
                                          f"comparison calls a small edit), {shared:.0%} of their content words "
                                          "shared: the second counts the same property again; drop it or make it "
                                          "ask something else"))
    return out


def constant_questions(records: Sequence[EvaluationRecord], where: str, *, min_outputs: int = 3) -> list[Finding]:
    """Questions answered the same for every output of a task (at least ``min_outputs`` different outputs)."""
    groups: dict[tuple[str, str, str], dict[str, str]] = {}  # (task, dimension, question) -> output -> answer
    texts: dict[tuple[str, str, str], str] = {}
    for rec in records:
        for v in rec.verdicts:
            if v.answer == "error":
                continue
            key = (rec.task, v.dimension, question_digest(v.question))
            groups.setdefault(key, {})[rec.output_digest or rec.key] = v.answer
            texts.setdefault(key, v.question)
    out = []
    for key, answers in groups.items():
        seen = set(answers.values())
        if len(answers) >= min_outputs and len(seen) == 1:
            task, dimension, _ = key
            answer = seen.pop()
            task_text = " ".join(task.split())
            task_text = task_text if len(task_text) <= 60 else task_text[:59] + "…"
            out.append(Finding(kind="constant", where=f"{where}: task {task_text!r}", dimension=dimension,
                               question=texts[key], reason=(
                                   f"answered {answer} for all {len(answers)} outputs of the task "
                                   f"({'0' if answer == 'yes' else '100'}% no): it tells them apart in nothing; "
                                   "make it ask what some outputs get wrong, or drop it")))
    return out


@dataclass
class LintResult:
    """What ``bineval lint`` looked at and found."""

    findings: list[Finding]
    pin_entries: int = 0
    pin_files: int = 0
    evaluations: int = 0

    def count(self, kind: FindingKind) -> int:
        return sum(f.kind == kind for f in self.findings)


def pin_files(paths: Iterable[str]) -> list[Path]:
    """The pin files named, or found under the directories named (``__bineval__/**/*.json``)."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_file():
            out.append(path)
        elif path.is_dir():
            out += sorted(p for p in path.rglob("*.json") if PIN_DIR in p.parts and ".git" not in p.parts)
        else:
            raise UsageError(f"{raw}: no such file or directory (give pin files, or directories holding "
                             f"{PIN_DIR}/)")
    return list(dict.fromkeys(out))


def lint(paths: Sequence[str], report: str | None = None, *,
         min_outputs: int = 3) -> LintResult:
    """Lint the pin files under ``paths`` and the checklists and answers of ``report``."""
    from .report.document import ReportDocument

    result = LintResult(findings=[])
    linted: set[tuple[str, str]] = set()  # (dimension, question digest) of every question linted

    def seen(questions: Sequence[Question]) -> bool:
        return all((q.dimension, question_digest(q.text)) in linted for q in questions)

    def mark(questions: Sequence[Question]) -> None:
        linted.update((q.dimension, question_digest(q.text)) for q in questions)

    files = pin_files(paths)
    for path in files:
        try:
            pins = PinFile.read(path)
        except PinError as exc:
            raise UsageError(str(exc)) from None
        for n, entry in enumerate(pins.entries, start=1):
            result.pin_entries += 1
            mark(entry.checklist.questions)
            result.findings += lint_questions(entry.checklist.questions, f"{os.fspath(path)}, entry {n}")
    result.pin_files = len(files)
    if report is not None:
        records = ReportDocument.load(report).evaluations
        result.evaluations = len(records)
        for rec in records:  # checklists no pin file linted (unpinned, or pins not given); a record's checklist
            if rec.questions and not seen(rec.questions):  # is its checked dimensions' part of the pinned one
                mark(rec.questions)
                result.findings += lint_questions(rec.questions, f"{report}: checklist of {rec.key}")
        result.findings += constant_questions(records, report, min_outputs=min_outputs)
    order = {k: i for i, k in enumerate(KINDS)}
    result.findings.sort(key=lambda f: (order[f.kind], f.where, f.dimension, f.question))
    return result
