"""``bineval bench``: meta-evaluation of judging methods against human judgments and verifiers."""

from __future__ import annotations

import argparse
import asyncio
import shlex
import sys
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..settings import SETTING_SPECS, add_setting_arguments, positive_int, settings_from_args
from .rubrics import RUBRICS, add_rubric_arguments
from .specs import CUSTOM, METHODS, CustomData, dataset_names

CHECKS = "checks"  # the check catalogue on IFBench, the extractor on IFEval (bench/checks.py; no model)
COST = "cost"  # requests, tokens and billing per assertion vs a one-call metric (bench/cost.py)
OVERHEAD = "overhead"  # the CPU per test on a hosted judge vs the httpx floor (bench/overhead.py)
GATE = "gate"  # the regression gate's false alarms and power, simulated (bench/gate.py; no model)

__all__ = ["add_bench_parser", "cmd_bench", "config_from_args"]

EPILOG = """\
examples:
  bineval bench summeval --docs 10 --method all
  bineval bench qags-xsum --limit 100 --method unieval --method overlap
  bineval bench summeval --docs 10 --model openai/gpt-4o-mini
  bineval bench custom --data judged.jsonl --source-key input --output-key output \\
      --score-key human.quality --task "Answer the customer's question politely."
  bineval bench rubrics --data healthbench.jsonl --limit 20 --strategy qworld --model openai/gpt-4o-mini
  bineval bench checks   (the check catalogue vs IFBench's verifier, the extractor vs IFEval; no model)
  bineval bench gate   (the regression gate's false alarms and power, simulated: no model; --limit N runs
      per scenario, default 200)
  bineval bench cost --limit 8   (requests, tokens, billing per assertion vs a one-call metric; a recording
      fake server, or --model openai/smollm2 --api-base URL for a server of your own)
  bineval bench overhead --limit 200   (CPU per test of pytest-bineval on a hosted judge vs the httpx floor and
      litellm, against an instant fake server)
Results go to --out DIR as <dataset>-<model>.json and .md; the markdown table is printed.
Every model call is cached (--cache-dir), so rerunning a command resumes an interrupted run.
"""


def _methods(values: list[str] | None) -> list[str]:
    chosen: list[str] = []
    for value in values or ["all"]:
        for name in value.split(","):
            name = name.strip()
            if name == "all":
                chosen.extend(METHODS)
            elif name in METHODS:
                chosen.append(name)
            elif name:
                raise ValueError(f"unknown method {name!r}; expected one of {', '.join(METHODS)} or all")
    return list(dict.fromkeys(chosen))


def add_bench_parser(sub: Any) -> None:
    """Register the ``bench`` subcommand on the ``bineval`` parser's subparsers."""
    p = sub.add_parser(
        "bench",
        help="meta-evaluate judging methods against human judgments (SummEval, QAGS, ...)",
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dataset", choices=[*dataset_names(), RUBRICS, CHECKS, COST, GATE, OVERHEAD],
                   help=f"the benchmark data set; {RUBRICS}: criteria generated per question against a reference "
                        f"rubric (--data FILE); {CHECKS}: the check catalogue on IFBench and the extractor on IFEval "
                        f"(code only, no model); {COST}: requests, tokens and billing per assertion beside a "
                        f"one-call G-Eval-style metric, on SummEval summaries; {GATE}: the regression gate's "
                        "false-alarm rate and power on simulated suites (pure code, seeded; --limit N simulated runs "
                        f"per scenario); {OVERHEAD}: CPU per test on a hosted judge beside the httpx floor (no data)")
    p.add_argument(
        "--method",
        action="append",
        metavar="|".join([*METHODS, "all"]),
        help="method(s) to run; repeatable or comma-separated (default: all)",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--limit", type=int, default=None, metavar="N", help="the first N items")
    size.add_argument(
        "--docs",
        type=int,
        default=None,
        metavar="N",
        help="the first N groups (SummEval articles, dialogue contexts, prompts) with all their items",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the bootstrap intervals (default: 0)")
    p.add_argument(
        "--bootstrap",
        type=int,
        default=1000,
        metavar="N",
        help="bootstrap resamples for the 95%% intervals (0: none; default: 1000)",
    )
    p.add_argument("--out", default="bench_results", metavar="DIR", help="output directory (default: bench_results)")
    p.add_argument(
        "--data-dir",
        default=None,
        help="benchmark data directory (default: $BINEVAL_DATA_DIR or ../shared/data)",
    )
    p.add_argument(
        "--dimension",
        action="append",
        metavar="NAME[=DEFINITION]",
        help="only these dimensions of a built-in dataset; for custom data, the definition of a "
        "score key's dimension (repeatable)",
    )
    p.add_argument(
        "--checklist",
        default=None,
        metavar="FILE",
        help="use this checklist JSON (from `bineval checklist`) instead of generating one",
    )
    custom = p.add_argument_group("custom data (DATASET = custom)")
    custom.add_argument("--data", default=None, metavar="FILE", help="JSONL (or JSON list) of judged outputs")
    custom.add_argument("--source-key", default=None, metavar="K", help="key of the source/input text")
    custom.add_argument("--output-key", default=None, metavar="K", help="key of the judged output")
    custom.add_argument(
        "--score-key",
        action="append",
        metavar="K",
        help="key of a human score (repeatable; dotted keys reach nested fields)",
    )
    custom.add_argument(
        "--group-key",
        default=None,
        metavar="K",
        help="key grouping outputs of one source (summary-level correlation; default: pooled)",
    )
    custom.add_argument("--task", default=None, metavar="TEXT", help="the task prompt the outputs answer")
    custom.add_argument(
        "--scale",
        type=float,
        nargs=2,
        default=(1.0, 5.0),
        metavar=("LOW", "HIGH"),
        help="score scale of the geval method (default: 1 5)",
    )
    add_rubric_arguments(p)
    catalogue = p.add_argument_group(f"check catalogue (DATASET = {CHECKS}; --data-dir, --out apply)")
    catalogue.add_argument(
        "--details", action="store_true", help="also print every disagreement, missed and wrong extraction")
    catalogue.add_argument(
        "--with-judge", action="store_true",
        help="also ask the judge (--model; default: the embedded model) the questions the checks answer on the "
             "IFBench pairs they cover (--limit N: the first N), beside the checks' agreement")
    p.add_argument_group(f"hosted-path cost (DATASET = {COST}; --limit (default 8), --data-dir, --out, --model, "
                         "--api-base apply)").add_argument(
        "--join-articles", type=int, default=1, metavar="K",
        help="each source is the summary's article and the next K-1 articles (SummEval's are ~500 tokens: K=3 "
             "makes a source past the 1024-token caching minimum; default: 1)")
    overhead = p.add_argument_group(f"CPU per test (DATASET = {OVERHEAD}; --limit N tests (default 200), --out)")
    overhead.add_argument("--questions", type=positive_int, default=8, metavar="N",
                          help="requests (checklist questions) per test (default: 8)")
    overhead.add_argument("--rounds", type=positive_int, default=3, metavar="N",
                          help="rounds of every variant; the medians are shown (default: 3)")
    # --model, --api-base, --cache, --cache-dir, --concurrency, ...: the engine's Settings, defaults and all
    add_setting_arguments(p.add_argument_group("model and cache"))
    from ..batch.options import add_batch_arguments

    add_batch_arguments(p.add_argument_group("batch API (the runs over a data set; not rubrics, checks or cost)"))
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_bench)


def _custom(args: argparse.Namespace, definitions: dict[str, str]) -> CustomData | None:
    given = [args.data, args.source_key, args.output_key, args.score_key, args.task]
    if args.dataset != CUSTOM:
        if any(v for v in given) or args.group_key:
            raise ValueError("--data/--source-key/--output-key/--score-key/--group-key/--task are for `custom` only")
        return None
    missing = [
        flag
        for flag, v in zip(("--data", "--source-key", "--output-key", "--score-key", "--task"), given, strict=True)
        if not v
    ]
    if missing:
        raise ValueError(f"the custom dataset needs {', '.join(missing)}")
    return CustomData(
        path=args.data,
        source_key=args.source_key,
        output_key=args.output_key,
        score_keys=tuple(args.score_key),
        task=args.task,
        group_key=args.group_key,
        definitions=definitions,
        scale=(float(args.scale[0]), float(args.scale[1])),
    )


def _command(args: argparse.Namespace) -> str:
    """The command line that reproduces a run (options at their defaults left out)."""
    parts = ["bineval", "bench", args.dataset]
    options: list[tuple[str, Any, Any]] = [
        ("--limit", args.limit, None),
        ("--docs", args.docs, None),
        ("--seed", args.seed, 0),
        ("--bootstrap", args.bootstrap, 1000),
        ("--data-dir", args.data_dir, None),
        ("--checklist", args.checklist, None),
        ("--data", args.data, None),
        ("--source-key", args.source_key, None),
        ("--output-key", args.output_key, None),
        ("--group-key", args.group_key, None),
        ("--task", args.task, None),
        ("--out", args.out, "bench_results"),
    ]
    for spec in SETTING_SPECS:  # the engine settings given on the command line (None: not given)
        value = getattr(args, spec.attr, None)
        if value is not None:
            parts += [f"--{spec.name}"] if spec.parse is None else [f"--{spec.name}", str(value)]
    methods = _methods(args.method)
    if methods != list(METHODS):
        parts += ["--method", ",".join(methods)]
    for flag, value, default in options:
        if value is not None and value != default:
            parts += [flag, str(value)]
    for key in args.score_key or []:
        parts += ["--score-key", key]
    for d in args.dimension or []:
        parts += ["--dimension", d]
    if args.dataset == RUBRICS:
        for flag, value, default in (("--prompt-key", args.prompt_key, "prompt"),
                                     ("--rubric-key", args.rubric_key, "rubrics")):
            if value != default:
                parts += [flag, value]
        for strategy in args.strategy or []:
            parts += ["--strategy", strategy]
    if args.dataset == CUSTOM and tuple(args.scale) != (1.0, 5.0):
        parts += ["--scale", f"{args.scale[0]:g}", f"{args.scale[1]:g}"]
    return " ".join(shlex.quote(p) for p in parts)


def config_from_args(args: argparse.Namespace) -> Any:
    """The :class:`~pytest_bineval.bench.runner.BenchConfig` of parsed arguments."""
    from ..models import Checklist
    from .runner import BenchConfig

    names: list[str] = []
    definitions: dict[str, str] = {}
    for d in args.dimension or []:
        name, sep, definition = d.partition("=")
        if sep:
            definitions[name.strip()] = definition.strip()
        elif args.dataset != CUSTOM:
            names.append(name.strip())
    if definitions and args.dataset != CUSTOM:
        raise ValueError("--dimension NAME=DEFINITION is for custom data; built-in datasets take --dimension NAME")
    for flag, value in (("--limit", args.limit), ("--docs", args.docs)):
        if value is not None and value < 1:
            raise ValueError(f"{flag} must be >= 1")
    if args.bootstrap < 0:
        raise ValueError("--bootstrap must be >= 0")
    checklist = None
    if args.checklist:
        checklist = Checklist.model_validate_json(Path(args.checklist).read_text(encoding="utf-8"))
    settings = settings_from_args(args)
    command = _command(args)
    return BenchConfig(
        dataset=args.dataset,
        settings=settings,
        methods=_methods(args.method),
        limit=args.limit,
        docs=args.docs,
        seed=args.seed,
        bootstrap=args.bootstrap,
        data_dir=args.data_dir,
        dimensions=names,
        checklist=checklist,
        custom=_custom(args, definitions),
        quiet=args.quiet,
        command=command,
    )


def cmd_bench(args: argparse.Namespace) -> int:
    """Run the benchmark, write ``<dataset>-<model>.json`` / ``.md`` to ``--out``, print the table."""
    from ..batch.options import batch_options
    from .report import render_markdown, result_document, write_results
    from .runner import run_bench

    batch = batch_options(args)
    if batch is not None and args.dataset in (RUBRICS, CHECKS, COST):
        raise UsageError(f"--batch is for the runs over a data set (summeval, qags, custom, ...), not {args.dataset}")
    if args.dataset == RUBRICS:
        from .rubrics import cmd_rubrics

        return cmd_rubrics(args, _command(args))
    if args.dataset == CHECKS:
        from .checks import cmd_checks

        return cmd_checks(args)
    if args.dataset == COST:
        from .cost import cmd_cost

        return cmd_cost(args)
    if args.dataset == GATE:
        from .gate import cmd_gate

        return cmd_gate(args)
    if args.dataset == OVERHEAD:
        from .overhead import cmd_overhead

        return cmd_overhead(args)
    config = config_from_args(args)
    if batch is not None:  # --batch: the same runs, their requests through the provider's batch API
        from .batched import run_bench_batched

        result = result_document(run_bench_batched(config, batch)[0])
    else:
        result = result_document(asyncio.run(run_bench(config)))
    markdown = render_markdown(result)
    json_path, md_path = write_results(result, markdown, args.out)
    sys.stdout.write(markdown)
    print(f"\nwrote {json_path} and {md_path}", file=sys.stderr)
    return 0
