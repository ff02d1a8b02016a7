"""``bineval label REPORT.json --labels FILE``: label a run's verdicts in the terminal, one at a time.

Each verdict is shown with its evaluation's task, source and output (once per evaluation), the question and the
judge's answer and explanation; a line of input answers it: ``a`` (agree with the judge), ``d`` (disagree), ``y``
/ ``n`` (the person's own answer), ``s`` (skip), ``q`` (quit); any text after the letter is the label's note
(``d the strike days are wrong``). Each label is appended to the file as soon as it is given (nothing is lost to
Ctrl-C), and verdicts the file already labels (fresh labels) are not asked again. Lines are read from standard
input, so a script (or a test) can pipe them in.

Which verdicts: the evaluations in a random order (``--seed``), up to ``--per-output`` random questions of each,
``--limit`` in all: labels spread over outputs and questions, which is what an agreement estimate needs. Judge
errors are not asked (there is no answer to agree with), nor questions a check decides by code (no judge answered them).

Every text shown is the report's, and the output under test is untrusted: control characters (an escape sequence
that would recolour or rewrite the terminal) are shown as ``\\x1b``, bidirectional controls as ``<U+202E>``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO

from .labels import Label, LabelAnswer, LabelLine, append_labels, match_labels
from .models import Verdict
from .report.record import EvaluationRecord
from .untrusted import inert

_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")

HELP = ("a = agree with the judge, d = disagree, y / n = your own answer, s = skip, q = quit; text after the letter "
        "is a note (d the dates are wrong)")


def terminal_safe(text: str) -> str:
    """``text`` fit for a terminal: control characters other than line breaks and tabs shown as ``\\x1b``, CI
    command markers broken and bidirectional controls shown (:func:`~pytest_bineval.untrusted.inert`)."""
    return inert(_CONTROLS.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + f"… [{len(text) - limit} more characters]"


def candidates(records: Sequence[EvaluationRecord], labels: Sequence[LabelLine], *, seed: int = 0,
               per_output: int = 5, limit: int = 50, dimension: str | None = None
               ) -> list[tuple[EvaluationRecord, Verdict]]:
    """The verdicts to ask about: not labelled yet (by a fresh label), answered by the judge (not by code), of
    ``dimension`` when given; evaluations shuffled by ``seed``, up to ``per_output`` random ones of each, ``limit``
    in all."""
    done = match_labels(labels, records).labelled()
    rng = random.Random(seed)
    order = list(records)
    rng.shuffle(order)
    out: list[tuple[EvaluationRecord, Verdict]] = []
    for rec in order:
        open_ = [v for v in rec.verdicts if v.answer != "error" and v.decided_by != "code"
                 and (rec.key, v.question_id) not in done and (dimension is None or v.dimension == dimension)]
        picked = sorted(rng.sample(open_, min(per_output, len(open_))), key=open_.index)
        out += [(rec, v) for v in picked]
    return out[:limit]


@dataclass
class Outcome:
    """What a labelling session did."""

    asked: int = 0
    written: int = 0
    agreed: int = 0
    skipped: int = 0
    quit: bool = False


def _opposite(answer: str) -> LabelAnswer:
    return "no" if answer == "yes" else "yes"


def label_session(todo: Sequence[tuple[EvaluationRecord, Verdict]], labels_path: str, *, stdin: TextIO,
                  stdout: TextIO, labeler: str = "", show_chars: int = 2000) -> Outcome:
    """Ask about each verdict of ``todo`` on ``stdout``, read the answers from ``stdin`` and append each label to
    ``labels_path`` as it is given. Ends at ``q``, at the end of the input, or when every verdict was asked."""
    out = Outcome()
    shown: str | None = None

    def say(text: str = "") -> None:
        stdout.write(text + "\n")

    for n, (rec, v) in enumerate(todo, start=1):
        if shown != rec.key:
            shown = rec.key
            say(f"\n=== {terminal_safe(rec.key)} (judge {terminal_safe(rec.model)})")
            say(f"task: {terminal_safe(_clip(rec.task, show_chars))}")
            if rec.source:
                say("source:\n" + terminal_safe(_clip(rec.source, show_chars)))
            say("output:\n" + terminal_safe(_clip(rec.output, show_chars)))
        say(f"\n[{n}/{len(todo)}] [{v.dimension}] {terminal_safe(v.question)}")
        say(f"    judge: {v.answer}: {terminal_safe(v.reason())}")
        while True:
            stdout.write("    agree? [a]gree [d]isagree, or [y]es [n]o; [s]kip [q]uit: ")
            stdout.flush()
            line = stdin.readline()
            if not line:  # end of input: what was given is kept
                say()
                out.quit = True
                return out
            command, _, note = line.strip().partition(" ")
            command = command.lower()
            if command in ("a", "agree", "d", "disagree", "y", "yes", "n", "no", "s", "skip", "q", "quit"):
                break
            say(f"    {HELP}")
        out.asked += 1
        if command[0] == "q":
            out.quit = True
            return out
        if command[0] == "s":
            out.skipped += 1
            continue
        answer: LabelAnswer = {"a": v.answer, "d": _opposite(v.answer), "y": "yes", "n": "no"}[command[0]]  # type: ignore[assignment]
        append_labels(labels_path, [Label.of(rec, v, answer, labeler=labeler, note=note.strip())])
        out.written += 1
        out.agreed += answer == v.answer
        say(f"    labelled {answer} ({'agrees with' if answer == v.answer else 'disagrees with'} the judge)")
    return out
