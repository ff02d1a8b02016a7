"""The ``bineval`` commands that tell a team how far to trust its judge and its questions: ``bineval label``
(label verdicts in the terminal), ``bineval calibrate`` (the judge against the labels) and ``bineval lint``
(questions that cannot tell outputs apart). :func:`add_judge_parsers` adds them to the ``bineval`` parser."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from .settings import number_in
from .untrusted import show_controls

parse_kappa = number_in(float, -1.0, 1.0, range_text="a kappa is within [-1, 1]")


def cmd_calibrate(args: argparse.Namespace) -> int:
    """Exit 0; 1 when ``--min-kappa`` finds a dimension below the bar (or no label to show it is not); 2 on a
    usage error (an unreadable report or labels file)."""
    from .calibrate import calibrate, calibration_text, side_by_side
    from .files import write_text_atomic
    from .labels import read_labels
    from .report.document import ReportDocument

    labels = read_labels(args.labels)
    named = []
    for path in args.reports:
        cal = calibrate(ReportDocument.load(path).evaluations, labels, args.labels)
        named.append((path, cal))
        print("\n".join(calibration_text(cal, title=path, questions=not args.no_questions)))
        print()
    if len(named) > 1:
        print("side by side:")
        print("\n".join(side_by_side(named)))
    if args.json:
        body = {"labels": args.labels, "reports": [{"report": p, "calibration": c.model_dump(mode="json")}
                                                   for p, c in named]}
        write_text_atomic(args.json, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
        print(f"wrote {args.json}")
    failures = []
    for path, cal in named:
        if not cal.used:
            print(f"bineval calibrate: {path}: no label of {args.labels} speaks of a verdict of this report "
                  f"({cal.labels} read; see above why each is not used)", file=sys.stderr)
            if args.min_kappa is not None:
                failures.append(f"{path}: no usable label, so no kappa to show >= {args.min_kappa:.2f}")
        elif args.min_kappa is not None:
            failures += [f"{path}: {why}" for why in cal.below(args.min_kappa)]
    for why in failures:
        print(f"bineval calibrate: below the bar: {why}", file=sys.stderr)
    return 1 if failures else 0


def cmd_label(args: argparse.Namespace) -> int:
    """Exit 0 (also after ``q`` or the end of the input: what was labelled is kept); 2 on a usage error."""
    from .labelling import candidates, label_session
    from .labels import read_labels
    from .report.document import ReportDocument

    document = ReportDocument.load(args.report)
    labels = read_labels(args.labels, missing_ok=True)
    todo = candidates(document.evaluations, labels, seed=args.seed, per_output=args.per_output, limit=args.limit,
                      dimension=args.dimension)
    if not todo:
        print(f"nothing to label: every answered verdict of {args.report}"
              f"{f' in {args.dimension}' if args.dimension else ''} is labelled in {args.labels} already")
        return 0
    print(f"labelling {len(todo)} verdicts of {args.report} into {args.labels} (each label is saved as it is "
          "given; q quits)")
    done = label_session(todo, args.labels, stdin=sys.stdin, stdout=sys.stdout, labeler=args.labeler,
                         show_chars=args.show_chars)
    print(f"\n{done.written} labels written to {args.labels} ({done.agreed} agree with the judge, "
          f"{done.written - done.agreed} disagree), {done.skipped} skipped; next: bineval calibrate {args.report} "
          f"--labels {args.labels}")
    return 0


def cmd_lint(args: argparse.Namespace) -> int:
    """Exit 0 when nothing was found, 1 with findings (each said with its reason; nothing is changed), 2 on a usage
    error."""
    from .files import write_text_atomic
    from .lint import KINDS, lint

    paths = args.paths or ([] if args.report else ["."])
    result = lint(paths, args.report, min_outputs=args.min_outputs)
    for finding in result.findings:
        print(show_controls(finding.text()))
    counts = ", ".join(f"{result.count(k)} {k}" for k in KINDS)
    looked = [f"{result.pin_entries} pinned checklists in {result.pin_files} files"] if paths else []
    if args.report:
        looked.append(f"{result.evaluations} evaluations of {args.report}")
    print(f"bineval lint: {len(result.findings)} finding(s) ({counts}) in {' and '.join(looked)}; nothing was "
          "changed")
    if args.json:
        body = {"findings": [f.model_dump(mode="json") for f in result.findings]}
        write_text_atomic(args.json, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
    return 1 if result.findings else 0


def add_judge_parsers(sub: Any) -> None:
    """``bineval label``, ``bineval calibrate`` and ``bineval lint``."""
    p = sub.add_parser(
        "calibrate", help="the judge of one or more reports against a team's labels: agreement, Cohen's kappa, "
                          "TPR, TNR",
        description="Compare the verdicts of a run (its --bineval-report) with people's labels of them (a labels "
                    "file: JSON lines, from the HTML report's Download labels, bineval label, or by hand). Per "
                    "dimension and per question: the agreement, Cohen's kappa, the judge's true-positive rate "
                    "(judge yes when the label is yes) and true-negative rate (judge no when it is no), each with "
                    "its 95% interval, the base rate of yes among the labels, and every disagreement with the "
                    "judge's explanation. Stale labels (question or output changed) are listed, never used. With "
                    "several reports (the same outputs judged by several judges), a table puts them side by side. "
                    "Exit 1 when --min-kappa finds a dimension below it.")
    p.add_argument("reports", nargs="+", metavar="REPORT.json", help="a --bineval-report file (one per judge)")
    p.add_argument("--labels", required=True, metavar="FILE", help="the labels file (JSON lines)")
    p.add_argument("--min-kappa", type=parse_kappa, default=None, metavar="K",
                   help="exit 1 when a dimension's kappa is below K (or undefined), or no label is usable: the "
                        "gate of a CI job that checks the judge")
    p.add_argument("--no-questions", action="store_true", help="leave out the per-question table")
    p.add_argument("--json", metavar="OUT.json", default=None, help="also write the figures as JSON")
    p.set_defaults(func=cmd_calibrate)

    p = sub.add_parser(
        "label", help="label a run's verdicts in the terminal, one at a time (appends to a labels file)",
        description="Show verdicts of a run (its --bineval-report) one at a time with the output, the question and "
                    "the judge's answer and explanation, and read your label from standard input: a (agree), d "
                    "(disagree), y / n (your own answer), s (skip), q (quit); text after the letter is a note. Each "
                    "label is appended to --labels as it is given; verdicts already labelled there are skipped.")
    p.add_argument("report", metavar="REPORT.json", help="the --bineval-report file")
    p.add_argument("--labels", required=True, metavar="FILE", help="the labels file to append to (created if missing)")
    p.add_argument("--labeler", default="", metavar="NAME", help="your name, kept in each label")
    p.add_argument("--limit", type=number_in(int, 1, 100000, range_text="a number of verdicts within [1, 100000]"),
                   default=50, metavar="N", help="verdicts to ask about in all (default 50)")
    p.add_argument("--per-output", type=number_in(int, 1, 1000, range_text="a number of verdicts within [1, 1000]"),
                   default=5, metavar="K", help="at most K random verdicts of each evaluation (default 5): labels "
                   "spread over outputs")
    p.add_argument("--seed", type=int, default=0, help="the order of the evaluations and the verdicts picked "
                   "(default 0)")
    p.add_argument("--dimension", default=None, metavar="NAME", help="only verdicts of this dimension")
    p.add_argument("--show-chars", type=number_in(int, 100, 1000000, range_text="characters within [100, 1000000]"),
                   default=2000, metavar="N", help="characters of the task, source and output shown (default 2000)")
    p.set_defaults(func=cmd_label)


    p = sub.add_parser(
        "lint", help="find questions that cannot tell outputs apart: constant, duplicate, vague",
        description="Read pinned checklists (pin files, or the __bineval__ directories under the directories given; "
                    "default: the current directory) and, with --report, a run's checklists and answers, and say "
                    "each question that cannot tell outputs apart, with why: constant (answered the same for every "
                    "output of a task, from the report), duplicate (as close as what the baseline comparison calls "
                    "a small edit) and vague (names no property). Nothing is changed. Exit 1 when something is "
                    "found.")
    p.add_argument("paths", nargs="*", metavar="PATH", help="a pin file, or a directory to search for __bineval__/")
    p.add_argument("--report", metavar="REPORT.json", default=None, help="a --bineval-report file: its answers "
                   "show constant questions, its checklists are linted too")
    p.add_argument("--min-outputs", type=number_in(int, 2, 100000, range_text="a number of outputs within [2, 100000]"),
                   default=3, metavar="N", help="a question is constant when answered the same for at least N "
                   "different outputs of a task (default 3)")
    p.add_argument("--json", metavar="OUT.json", default=None, help="also write the findings as JSON")
    p.set_defaults(func=cmd_lint)

