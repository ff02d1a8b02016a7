"""One report from the reports of the shards of a suite (``bineval report merge SHARD.json... -o MERGED.json``).

Each shard's report becomes a :class:`~pytest_bineval.report.ledger.RunLedger` (:meth:`RunLedger.of_document`), the
ledgers are added with the merge pytest-xdist uses (:meth:`RunLedger.merge`), and the merged ledger becomes the
document (:meth:`RunLedger.document`), as a run's does: records, totals, usage, unscored tests, notes.

Shards are one suite cut in parts, so what cannot be one run is refused, naming the files: a test in two shards
(which of its results counts cannot be told), or shards judged by different models, with different judge prompts
or packaged prompt versions (their scores are not comparable). A partial shard (cut short) makes the merged report
partial, and so do missing shards (``expect``). The shards' own comparisons with a baseline are not merged (each
shard sees the other shards' tests as removed): compare the merged report (``bineval report MERGED.json --baseline
BASE.json``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..errors import UsageError
from .document import OptimizeOutcome, ReportDocument
from .ledger import RunLedger
from .record import JudgedBy

# What must be the same in every shard: the settings that make the verdicts (not the concurrency, timeout ...).
SAME_JUDGE = (("model", "judge model (--bineval-model)"), ("checklist_model", "checklist model"),
              ("judge_prompt", "judge prompt (--bineval-judge-prompt)"),
              ("repeats", "repeats (--bineval-repeats)"),
              ("gate", "gate (--bineval-gate)"))


@dataclass(frozen=True)
class Shard:
    """One shard's report and the file it came from (as given)."""

    path: str
    document: ReportDocument


def load_shards(paths: Sequence[str | os.PathLike[str]]) -> list[Shard]:
    """Every file read as a report (UsageError naming the file that is not one)."""
    if not paths:
        raise UsageError("no shard report to merge: give the --bineval-report files of the shards")
    return [Shard(os.fspath(p), ReportDocument.load(p)) for p in paths]


def _tests(document: ReportDocument) -> set[str]:
    return {r.test for r in document.evaluations} | {u.test for u in document.unscored}


def _difference(shards: Sequence[Shard], value: Callable[[Shard], str]) -> tuple[tuple[str, str],
                                                                                 tuple[str, str]] | None:
    """((path, value), (path, other value)) of the first shard whose recorded ``value`` differs from the first
    recorded one; shards that record none are left out."""
    known = [(s.path, v) for s in shards if (v := value(s))]
    other = next(((path, v) for path, v in known if v != known[0][1]), None)
    return None if other is None else (known[0], other)


def check_shards(shards: Sequence[Shard]) -> None:
    """UsageError when the shards cannot be one run: a report given twice, a test in two of them, or a different
    judge."""
    given: dict[str, int] = {}
    for i, shard in enumerate(shards):
        first_index = given.setdefault(os.path.realpath(shard.path), i)
        if first_index != i:
            raise UsageError(f"{shard.path} is given twice (shard reports {first_index + 1} and {i + 1}): give each "
                             "shard's report once")
    seen: dict[str, int] = {}
    for i, shard in enumerate(shards):
        for test in sorted(_tests(shard.document)):
            first_index = seen.setdefault(test, i)
            if first_index != i:
                first = shards[first_index].path
                raise UsageError(
                    f"the test {test!r} is in two shard reports, {first} and {shard.path}: shards split a suite, so "
                    "each test runs in one of them (a copy of one report, or a split that gives a test to two "
                    "shards?)")
    first_shard = shards[0]
    for name, what in SAME_JUDGE:
        mine = getattr(first_shard.document.settings, name)
        for shard in shards[1:]:
            theirs = getattr(shard.document.settings, name)
            if theirs != mine:
                raise UsageError(
                    f"the shard reports were not judged alike: {first_shard.path} has {what} {mine!r}, {shard.path} "
                    f"has {theirs!r}; their scores are not comparable. Run every shard with the same settings")
    # what the report records of its judge (JudgedBy); a report written before a value was kept: nothing to compare
    recorded: tuple[tuple[Callable[[Shard], str], Callable[[str, str, str, str], str], str], ...] = (
        (lambda s: s.document.judge().prompt_version,
         lambda a, x, b, y: f"{a} has packaged prompt version {x!r}, {b} has {y!r}", "the same settings"),
        (lambda s: s.document.judge().judge_prompt_digest,
         lambda a, x, b, y: f"{a} was judged with a judge prompt of sha256 {x[:12]}, {b} with {y[:12]}",
         "the same judge prompt"),
        (lambda s: s.document.judge().stream,
         lambda a, x, b, y: f"{a} has --bineval-stream {x}, {b} has --bineval-stream {y}", "the same settings"),
    )
    for value, said, fix in recorded:
        found = _difference(shards, value)
        if found is not None:
            (path, mine), (other, theirs) = found
            raise UsageError(f"the shard reports were not judged alike: {said(path, mine, other, theirs)}; their "
                             f"scores are not comparable. Run every shard with {fix}")
    rounds = {s.path: (s.document.confirmation.rounds if s.document.confirmation else 0) for s in shards}
    if len(set(rounds.values())) > 1:
        raise UsageError("the shard reports were not judged alike: --bineval-confirm differs ("
                         + ", ".join(f"{p}: {k}" for p, k in rounds.items())
                         + "). Run every shard with the same settings")


def merge_shards(shards: Sequence[Shard], *, expect: int | None = None) -> ReportDocument:
    """The merged report of ``shards`` (checked by :func:`check_shards`); ``expect``: the number of shards the
    suite was split into (fewer reports make the merged report partial)."""
    if expect is not None and len(shards) > expect:
        raise UsageError(f"{len(shards)} shard reports given, but --expect says the suite has {expect} shards")
    check_shards(shards)
    ledger = RunLedger()
    for shard in shards:
        ledger.merge(RunLedger.of_document(shard.document))
    reasons = [f"shard {s.path}: {s.document.partial_reason or 'cut short'}" for s in shards if s.document.partial]
    if expect is not None and len(shards) < expect:
        reasons.insert(0, f"{expect - len(shards)} of {expect} shard reports missing")
    notes = []
    compared = [s.path for s in shards if s.document.regressions is not None]
    if compared:
        notes.append(f"bineval: the comparisons with a baseline that {', '.join(compared)} hold are not merged (each "
                     "shard saw the other shards' tests as removed): compare the merged report with bineval report "
                     "MERGED.json --baseline BASE.json")
    optimize: list[OptimizeOutcome] = [o for s in shards for o in s.document.optimize or []]
    first = shards[0].document.judge()
    judged_by = JudgedBy.of_records(ledger.records, model=first.model, prompt_version=first.prompt_version,
                                    judge_prompt=first.judge_prompt, judge_prompt_digest=first.judge_prompt_digest,
                                    stream=first.stream)
    confirmed = [s.document.confirmation for s in shards if s.document.confirmation is not None]
    return ledger.document(shards[0].document.settings, notes=notes, partial="; ".join(reasons) or None,
                           optimize=optimize or None, judged_by=judged_by,
                           confirm=(confirmed[0].rounds, confirmed[0].level) if confirmed else None)

