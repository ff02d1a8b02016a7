"""The ``bineval`` command: checklists and evaluations outside pytest, reports, and the benchmark."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import UsageError
from .models import STRATEGIES
from .redaction import redact_obj
from .settings import Settings, add_setting_arguments, number_in, settings_from_args


def _read(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")


def _engine_args(p: argparse.ArgumentParser) -> None:
    """The engine's settings as options (``--model``, ``--api-base``, ``--cache`` ...), from :class:`Settings`."""
    add_setting_arguments(p.add_argument_group("model and cache"))


def _settings(args: argparse.Namespace) -> Settings:
    return settings_from_args(args)


def cmd_checklist(args: argparse.Namespace) -> int:
    from .api import generate_checklist

    dims: list[str | dict[str, str]] = []
    for d in args.dimension or []:
        name, sep, definition = d.partition("=")
        dims.append({name: definition} if sep else name)
    settings = _settings(args)
    if args.strategy == "bineval":
        if args.question is not None:
            raise UsageError("--question is for --strategy qworld or qworld-lite (criteria written per question)")
        if args.task is None:
            raise UsageError("--task is required (or --strategy qworld --question FILE for criteria per question)")
        checklist = generate_checklist(args.task, dims or None, settings=settings)
    else:
        if args.question is None:
            raise UsageError(f"--strategy {args.strategy} writes criteria for a question: give --question FILE")
        checklist = generate_checklist(args.task, dims or None, strategy=args.strategy,
                                       question=_read(args.question), settings=settings)
    print(json.dumps(redact_obj(checklist.model_dump(mode="json")), indent=2, ensure_ascii=False))
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .api import evaluate
    from .models import Checklist

    checklist = Checklist.model_validate_json(_read(args.checklist))
    output = _read(args.output)
    source = _read(args.source) if args.source else None
    settings = _settings(args)
    result = evaluate(output, checklist, source, settings=settings)
    data = redact_obj(json.loads(result.model_dump_json()))
    data["errors"] = len(result.errors)
    print(json.dumps(data, indent=2, ensure_ascii=False))
    return 2 if result.errors else 0


def cmd_align(args: argparse.Namespace) -> int:
    from .engine import Engine
    from .files import write_text_atomic
    from .models import Checklist
    from .optimize import EvaluatorAligner, load_items, run_align
    from .prompting import packaged_judge_prompt

    checklist = Checklist.model_validate_json(_read(args.checklist))
    items = load_items(Path(args.data), args.output_key, args.source_key, args.limit)
    prompt = Path(args.prompt)
    if not prompt.exists():
        if args.dry_run:
            raise UsageError(f"{prompt} does not exist (a dry run does not create it)")
        write_text_atomic(prompt, packaged_judge_prompt())
        print(f"created {prompt} from the packaged judge prompt", file=sys.stderr)
    engine = Engine(_settings(args))
    try:
        aligner = EvaluatorAligner(engine, reference=args.reference, target=engine.settings.judge_model,
                                   optimizer_model=args.optimizer_model)
        results = run_align(aligner, prompt, items, checklist, iterations=args.iterations, write=not args.dry_run)
    finally:
        engine.close()
    for n, r in enumerate(results, 1):
        print(f"iteration {n}: {r.status.upper()}: {r.message}")
        print(f"    {len(items)} outputs x {len(checklist.questions)} questions, {r.compared} answered by both, "
              f"{r.disagreements} disagreements; {r.usage.llm_calls} LLM calls, {r.usage.cache_hits} cache hits")
        for lesson in r.lessons:
            print(f"    lesson [{lesson['status']}] {lesson['text']}")
    if results and results[-1].status != "no disagreements" and not args.dry_run:
        print(f"history: {results[-1].history}; use the prompt with --bineval-judge-prompt {prompt}")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .outputs.html import BaselineDiff, diff_reports, write_html
    from .record import ReportDocument

    if args.tolerance is not None and not args.baseline:
        raise UsageError("--tolerance applies to a comparison with --baseline (the comparison a report holds "
                         "keeps the tolerance of its run)")
    document = ReportDocument.load(args.report)
    if args.baseline:
        diff: BaselineDiff | None = diff_reports(document, ReportDocument.load(args.baseline), args.baseline,
                                                 tolerance=args.tolerance or 0.0)
    else:  # the run's own comparison, when it was made with --bineval-baseline
        diff = BaselineDiff.of(document.regressions) if document.regressions is not None else None
    write_html(args.html, document, diff)
    t = document.totals
    print(f"wrote {args.html}: {t.evaluations} evaluations ({t.passed} passed, {t.failed} below threshold, "
          f"{t.errors} judge error)")
    if diff is not None:
        print(f"compared with {diff.label}: {len(diff.of_kind('regression'))} regressed question(s) (yes -> no), "
              f"{len(diff.of_kind('fix'))} fixed, {len(diff.of_kind('unstable flip'))} unstable flip(s), "
              f"{len(diff.drops)} score drop(s) beyond tolerance {diff.tolerance}, {diff.compared} questions compared")
    return 0


def cmd_cache_merge(args: argparse.Namespace) -> int:
    """``bineval cache merge DIR... -o DIR``: exit 0 when every entry was copied, 1 when a source directory or
    entry was skipped (said on stderr; the rest is merged), 2 on a usage error (nothing written)."""
    from .llm.cache import merge_caches

    outcome = merge_caches(args.sources, args.output)
    for s in outcome.sources:
        if s.error is not None:
            print(f"bineval cache merge: skipped {s.directory}: {s.error}", file=sys.stderr)
            if s.added == 0:
                continue
        print(f"{s.directory}: {s.added} entries added, {s.present} already in {outcome.target}")
        if s.corrupt:
            print(f"bineval cache merge: {s.directory}: {s.corrupt} unreadable entries skipped (not copied)",
                  file=sys.stderr)
    print(f"{outcome.target}: {outcome.entries} entries")
    if not outcome.complete:
        print("bineval cache merge: incomplete (see above): the entries that were read are merged; a skipped "
              "entry is asked of the model again by the next run", file=sys.stderr)
        return 1
    return 0


def _add_cache_parser(sub: Any) -> None:
    p = sub.add_parser("cache", help="tools for the reply cache directory (--bineval-cache-dir)")
    cache_sub = p.add_subparsers(dest="cache_command", required=True)
    p = cache_sub.add_parser(
        "merge", help="combine the cache directories of several runners into one",
        description="Copy every entry of the cache directories DIR... (e.g. the actions/cache directories of the "
                    "shards of a suite) into the one given by -o, created when missing; an entry it holds already is "
                    "kept. The sources are read, never changed. A directory or an entry that cannot be read is "
                    "said and skipped: exit code 1 (the rest is merged); 0 when everything was merged.")
    p.add_argument("sources", nargs="+", metavar="DIR", help="a cache directory to read")
    p.add_argument("-o", "--output", required=True, metavar="DIR", help="the cache directory to merge into")
    p.set_defaults(func=cmd_cache_merge)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bineval", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("checklist", help="turn a task prompt (or a question) into a checklist (JSON on stdout)")
    p.add_argument("--task", default=None,
                   help="the task prompt (required for --strategy bineval; for qworld: default 'Answer the user's "
                        "question.')")
    p.add_argument("--strategy", choices=STRATEGIES, default="bineval",
                   help="bineval: one checklist per task (default); qworld: criteria with importance points per "
                        "question, by recursive expansion (--qworld-widths, --qworld-top-k); qworld-lite: the same "
                        "in one call")
    p.add_argument("--question", default=None, metavar="FILE",
                   help="file holding the user's question, with its context ('-' for stdin); for qworld")
    p.add_argument("--dimension", action="append", metavar="NAME[=DEFINITION]",
                   help="a built-in dimension, or your own as name=definition (repeatable; default: the 4 built-ins)")
    _engine_args(p)
    p.set_defaults(func=cmd_checklist)

    p = sub.add_parser("eval", help="evaluate an output against a checklist (JSON on stdout)")
    p.add_argument("--checklist", required=True, help="checklist JSON file (from `bineval checklist`)")
    p.add_argument("--output", required=True, help="file holding the output under test ('-' for stdin)")
    p.add_argument("--source", default=None, help="file holding the input/source text")
    _engine_args(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser(
        "align", help="align an evaluator prompt of a target model with a reference model's answers",
        description="Cross-model update: the target model (--model, default: the embedded one) with the "
                    "evaluator prompt --prompt and the reference model with the packaged prompt answer the "
                    "checklist about every output; lessons from their disagreements are written into --prompt "
                    "when they raise the agreement. Use the result with --bineval-judge-prompt.")
    p.add_argument("--data", required=True, help="JSONL (or JSON list) of outputs to judge")
    p.add_argument("--output-key", default="output", help="key of the output in each record (default: output)")
    p.add_argument("--source-key", default=None, help="key of the source/input text (default: none)")
    p.add_argument("--checklist", required=True, help="checklist JSON file (from `bineval checklist`)")
    p.add_argument("--reference", required=True, metavar="MODEL", help="the reference (strong) judge model")
    p.add_argument("--prompt", required=True, metavar="FILE",
                   help="the target's evaluator prompt file (created from the packaged one if missing)")
    p.add_argument("--optimizer-model", default=None, metavar="MODEL",
                   help="model that writes lessons and edits (default: the reference)")
    p.add_argument("--iterations", type=int, default=1, help="iterations, stopping at the first without gain")
    p.add_argument("--limit", type=int, default=None, help="the first N records")
    p.add_argument("--dry-run", action="store_true", help="measure and propose, write nothing")
    _engine_args(p)
    p.set_defaults(func=cmd_align)

    p = sub.add_parser(
        "report", help="render a saved --bineval-report JSON as a self-contained HTML page",
        description="Render a report written by --bineval-report (any format this version reads), e.g. a CI "
                    "artifact, as one HTML file that opens from disk. With --baseline, the questions answered "
                    "yes there and no here are marked as regressions, and so are the tests whose dimension "
                    "score fell by more than --tolerance; without it, the comparison the report holds (a run "
                    "with --bineval-baseline) is shown.")
    p.add_argument("report", metavar="REPORT.json", help="the --bineval-report file")
    p.add_argument("--baseline", metavar="BASE.json", default=None,
                   help="an earlier report to compare with, question by question")
    p.add_argument("--tolerance", metavar="D", default=None,
                   type=number_in(float, 0.0, 1.0, range_text="a tolerance is a score difference within [0, 1]"),
                   help="with --baseline: a dimension score drop up to this much is not a regression (default 0, "
                        "as --bineval-regression-tolerance)")
    p.add_argument("--html", metavar="OUT.html", required=True, help="the HTML file to write")
    p.set_defaults(func=cmd_report)

    _add_cache_parser(sub)

    from .bench.perf import add_perf_parser
    from .bench.qworld_measure import add_qworld_parser

    add_perf_parser(sub)
    add_qworld_parser(sub)
    try:
        from .bench.cli import add_bench_parser
    except ImportError:  # pragma: no cover - the bench package is part of the distribution
        pass
    else:
        add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    from .errors import BinevalError

    try:
        code: int = args.func(args)
    except (BinevalError, ValueError, TypeError, OSError) as exc:
        from .redaction import redact

        print(f"bineval: error: {redact(str(exc))}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    raise SystemExit(main())
