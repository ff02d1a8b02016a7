"""``bineval bench checks``: the check catalogue and the extractor measured against verifiable-instruction data.

- **IFBench** (300 responses, the official verifier's per-constraint pass/fail): each constraint that a catalogue
  check expresses is verified by that check; the table gives the share of (response, constraint) pairs a check
  handles and, per constraint kind, the agreement of the check's pass/fail with the reference.
- **IFEval** (541 prompts, ``instruction_id_list``/``kwargs``): the extractor reads each prompt; a reference
  constraint is *found* when the extractor gives its check (kind and parameters); an extracted check is *correct*
  when it is one of the prompt's reference checks. Recall and precision per constraint kind.

Pure code: no model, no cache; runs in seconds. With ``--with-judge`` the judge (the embedded model unless
``--model``) is asked the same questions, the covered pairs' checks' questions, about the same responses, and its
verdicts are compared with the same reference: the checks' agreement beside the judge's (cached, one model call per
question, answers only).
"""

from __future__ import annotations

import argparse
import json
import os
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..checks.catalogue import parse_check, run_check
from ..checks.extract import extract_checks
from .datasets import PathLike, _data_file, load_ifbench

__all__ = ["cmd_checks", "ifbench_checks", "ifeval_reference", "measure", "measure_ifbench_judge", "render_markdown"]

Spec = dict[str, Any]


def _less_or_least(relation: str, n: int, unit: str) -> Spec:
    return {"kind": f"max_{unit}", "value": n - 1} if relation == "less than" else {"kind": f"min_{unit}", "value": n}


def ifeval_reference(instruction_id: str, kw: Mapping[str, Any], prompt: str = "") -> tuple[list[Spec], list[Spec]]:
    """The catalogue checks of one IFEval constraint: (those it requires, those it also accepts). IFEval's
    ``english_capital`` is capital letters *and* English: the case check is required, a language check accepted."""
    k = {a: b for a, b in kw.items() if b is not None}
    kind = instruction_id.split(":", 1)[1]
    table: dict[str, Any] = {
        "capital_word_frequency": lambda: [_less_or_least(k["capital_relation"], k["capital_frequency"],
                                                          "capital_words")],
        "english_capital": lambda: [{"kind": "letter_case", "case": "upper"}],
        "english_lowercase": lambda: [{"kind": "letter_case", "case": "lower"}],
        "repeat_prompt": lambda: [{"kind": "starts_with", "text": k["prompt_to_repeat"]}],
        "two_responses": lambda: [{"kind": "two_responses"}],
        "number_placeholders": lambda: [{"kind": "min_placeholders", "value": k["num_placeholders"]}],
        "postscript": lambda: [{"kind": "postscript", "marker": k["postscript_marker"]}],
        "constrained_response": lambda: [{"kind": "one_of", "options": ["My answer is yes.", "My answer is no.",
                                                                        "My answer is maybe."]}],
        "json_format": lambda: [{"kind": "json"}],
        "multiple_sections": lambda: [{"kind": "min_sections", "value": k["num_sections"],
                                       "marker": k["section_spliter"]}],
        "number_bullet_lists": lambda: [{"kind": "exact_bullets", "value": k["num_bullets"]}],
        "number_highlighted_sections": lambda: [{"kind": "min_highlights", "value": k["num_highlights"]}],
        "title": lambda: [{"kind": "title"}],
        "existence": lambda: [{"kind": "includes_keywords", "words": k["keywords"]}],
        "forbidden_words": lambda: [{"kind": "forbidden_words", "words": k["forbidden_words"]}],
        "frequency": lambda: [{"kind": "keyword_count", "keyword": k["keyword"],
                               **({"max": k["frequency"] - 1} if k["relation"] == "less than"
                                  else {"min": k["frequency"]})}],
        "letter_frequency": lambda: [{"kind": "letter_count", "keyword": k["letter"],
                                      **({"max": k["let_frequency"] - 1} if k["let_relation"] == "less than"
                                         else {"min": k["let_frequency"]})}],
        "response_language": lambda: [{"kind": "language", "language": k["language"]}],
        "nth_paragraph_first_word": lambda: [{"kind": "nth_paragraph_first_word", "paragraphs": k["num_paragraphs"],
                                              "n": k["nth_paragraph"], "word": k["first_word"]}],
        "number_paragraphs": lambda: [{"kind": "exact_paragraphs", "value": k["num_paragraphs"], "separator": "***"}],
        "number_sentences": lambda: [_less_or_least(k["relation"], k["num_sentences"], "sentences")],
        "number_words": lambda: [_less_or_least(k["relation"], k["num_words"], "words")],
        "no_comma": lambda: [{"kind": "no_commas"}],
        "end_checker": lambda: [{"kind": "ends_with", "text": k["end_phrase"]}],
        "quotation": lambda: [{"kind": "quoted"}],
    }
    required = table[kind]()
    accepted: list[Spec] = []
    if kind in ("english_capital", "english_lowercase"):
        accepted.append({"kind": "language", "language": "en"})
    if kind == "nth_paragraph_first_word":  # the paragraph count it implies
        accepted.append({"kind": "exact_paragraphs", "value": k["num_paragraphs"]})
    return required, accepted


def ifbench_checks(instruction_id: str, kw: Mapping[str, Any]) -> list[Spec] | None:
    """The catalogue checks that express one IFBench constraint (all must pass), or None when none does."""
    k = {a: b for a, b in kw.items() if b is not None}
    if instruction_id == "count:word_count_range":
        return [{"kind": "words_between", "min": k["min_words"], "max": k["max_words"]}]
    if instruction_id == "count:keywords_multiple":
        return [{"kind": "keyword_count", "keyword": k[f"keyword{i}"].strip(), "min": n, "max": n}
                for i, n in zip(range(1, 6), (1, 2, 3, 5, 7), strict=True)]
    if instruction_id == "count:numbers":
        return [{"kind": "exact_numbers", "value": k["N"]}]
    if instruction_id == "count:unique_word_count":
        return [{"kind": "min_unique_words", "value": k["N"]}]
    if instruction_id == "format:no_whitespace":
        return [{"kind": "regex", "pattern": r"\s", "mode": "absent"}]
    if instruction_id == "format:output_template":
        return [{"kind": "includes_keywords", "words": ["My Answer:", "My Conclusion:", "Future Outlook:"]}]
    if instruction_id == "format:title_case":
        return [{"kind": "letter_case", "case": "title"}]
    return None


def _norm(value: Any) -> Any:
    if isinstance(value, str):
        return " ".join(value.lower().split()).rstrip(".").strip()
    if isinstance(value, list):
        return sorted(_norm(v) for v in value)
    if isinstance(value, dict):
        return {a: _norm(b) for a, b in sorted(value.items())}
    return value


def _keys(spec: Spec) -> list[str]:
    """The comparable forms of a check: one that says the same as several IFEval constraints is split into them
    ("20 to 25 sentences" is IFEval's at least 20 and less than 26; "include a and b" is its keywords a and b;
    "the word a at least once" is its keyword a)."""
    spec = parse_check(spec).spec()
    kind = spec["kind"]
    parts: list[Spec]
    if kind.endswith("_between"):
        unit = kind.removesuffix("_between")
        extra = {k: v for k, v in spec.items() if k not in ("kind", "min", "max")}
        parts = [{"kind": f"min_{unit}", "value": spec["min"], **extra},
                 {"kind": f"max_{unit}", "value": spec["max"], **extra}]
    elif kind == "includes_keywords":
        parts = [{"kind": "includes", "word": w} for w in spec["words"]]
    elif kind == "keyword_count" and spec.get("min") == 1 and "max" not in spec:
        parts = [{"kind": "includes", "word": spec["keyword"]}]
    elif kind in ("keyword_count", "letter_count") and "min" in spec and "max" in spec and spec["min"] != spec["max"]:
        parts = [{k: v for k, v in spec.items() if k != "max"}, {k: v for k, v in spec.items() if k != "min"}]
    else:
        parts = [spec]
    return [json.dumps(_norm(p), sort_keys=True) for p in parts]


def measure_ifeval(data_dir: PathLike | None = None) -> dict[str, Any]:
    """Recall and precision of the extractor on IFEval's prompts, per constraint kind."""
    path = _data_file(data_dir, "ifeval/input_data.jsonl")
    found: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # ifeval kind -> [found, total]
    extracted: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # check kind -> [correct, extracted]
    misses: list[dict[str, Any]] = []
    wrong: list[dict[str, Any]] = []
    prompts = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        prompts += 1
        specs = [c.spec() for c in extract_checks(row["prompt"])]
        got = {key for spec in specs for key in _keys(spec)}
        accepted: set[str] = set()
        for instruction_id, kw in zip(row["instruction_id_list"], row["kwargs"], strict=True):
            required, also = ifeval_reference(instruction_id, kw, row["prompt"])
            keys = [key for spec in required for key in _keys(spec)]
            accepted.update(keys)
            accepted.update(key for spec in also for key in _keys(spec))
            hit = all(key in got for key in keys)
            found[instruction_id][0] += hit
            found[instruction_id][1] += 1
            if not hit:
                misses.append({"key": row["key"], "constraint": instruction_id, "expected": required,
                               "extracted": specs})
        for spec in specs:
            ok = all(key in accepted for key in _keys(spec))
            extracted[spec["kind"]][0] += ok
            extracted[spec["kind"]][1] += 1
            if not ok:
                wrong.append({"key": row["key"], "extracted": spec})
    n_found, n_total = sum(v[0] for v in found.values()), sum(v[1] for v in found.values())
    n_correct, n_extracted = sum(v[0] for v in extracted.values()), sum(v[1] for v in extracted.values())
    return {
        "prompts": prompts, "constraints": n_total, "found": n_found, "extracted": n_extracted, "correct": n_correct,
        "recall": n_found / n_total if n_total else None,
        "precision": n_correct / n_extracted if n_extracted else None,
        "by_constraint": {k: {"found": v[0], "total": v[1]} for k, v in sorted(found.items())},
        "by_check": {k: {"correct": v[0], "extracted": v[1]} for k, v in sorted(extracted.items())},
        "misses": misses, "wrong": wrong,
    }


def measure_ifbench(data_dir: PathLike | None = None, variant: str = "strict") -> dict[str, Any]:
    """Agreement of the catalogue's checks with IFBench's official verifier, per constraint kind."""
    items = load_ifbench(data_dir, variant=variant)  # type: ignore[arg-type]
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # id -> [agree, handled, total]
    disagreements: list[dict[str, Any]] = []
    for item in items:
        instruction_id = item.extra["instruction_id"]
        by[instruction_id][2] += 1
        specs = ifbench_checks(instruction_id, item.extra["kwargs"] or {}) if item.extra["kwargs"] is not None \
            else None
        if specs is None:
            continue
        results = [run_check(s, item.output) for s in specs]
        passed = all(r.passed for r in results)
        by[instruction_id][1] += 1
        agree = passed == item.extra["gold_pass"]
        by[instruction_id][0] += agree
        if not agree:
            disagreements.append({"id": item.id, "constraint": instruction_id, "check": passed,
                                  "reference": item.extra["gold_pass"],
                                  "explanations": [r.explanation for r in results]})
    handled = sum(v[1] for v in by.values())
    agree = sum(v[0] for v in by.values())
    return {
        "variant": variant, "pairs": len(items), "handled": handled, "agree": agree,
        "share_handled": handled / len(items) if items else None,
        "agreement": agree / handled if handled else None,
        "by_constraint": {k: {"agree": v[0], "handled": v[1], "total": v[2]} for k, v in sorted(by.items()) if v[1]},
        "disagreements": disagreements,
    }


def ifbench_judge_checklist(item_id: str, specs: list[Spec]) -> Any:
    """The judge's checklist for one covered IFBench pair: the questions its checks answer, asked without the
    checks (so the judge answers them)."""
    from ..models import Checklist, Question
    from .specs import IFBENCH_TASK

    return Checklist(task=IFBENCH_TASK, dimensions={"constraint": "The response follows the prompt's constraint."},
                     questions=[Question(id=f"constraint-{i}", dimension="constraint", text=parse_check(spec).question)
                                for i, spec in enumerate(specs, 1)], model="bench checks", prompt_version="")


async def _ameasure_judge(items: list[Any], settings: Any) -> dict[str, Any]:
    import time

    from ..engine import Engine
    from ..errors import BinevalError

    engine = Engine(settings)
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # id -> [agree, judged, errors]
    started = time.monotonic()
    try:
        for item in items:
            instruction_id = item.extra["instruction_id"]
            specs = ifbench_checks(instruction_id, item.extra["kwargs"] or {})
            assert specs is not None
            try:
                ev = await engine.aevaluate(item.output, ifbench_judge_checklist(item.id, specs), item.source)
            except BinevalError:
                by[instruction_id][2] += 1
                continue
            if any(v.error for v in ev.verdicts):
                by[instruction_id][2] += 1
                continue
            passed = all(v.answer == "yes" for v in ev.verdicts)
            by[instruction_id][1] += 1
            by[instruction_id][0] += passed == item.extra["gold_pass"]
        usage = engine.usage
    finally:
        engine.close()
    judged = sum(v[1] for v in by.values())
    agree = sum(v[0] for v in by.values())
    return {
        "model": settings.judge_model, "pairs": len(items), "judged": judged, "agree": agree,
        "errors": sum(v[2] for v in by.values()), "agreement": agree / judged if judged else None,
        "requests": usage.llm_calls, "cache_hits": usage.cache_hits, "seconds": round(time.monotonic() - started, 1),
        "by_constraint": {k: {"agree": v[0], "judged": v[1], "errors": v[2]} for k, v in sorted(by.items())},
    }


def measure_ifbench_judge(settings: Any, data_dir: PathLike | None = None, variant: str = "strict",
                          limit: int | None = None) -> dict[str, Any]:
    """The judge's verdicts on the questions the checks answer, for the IFBench pairs the catalogue covers (the
    first ``limit`` of them), against the official verifier: each pair passes when the judge says yes to every one
    of its checks' questions; a pair with a judge error is counted apart, not as a verdict."""
    import asyncio

    items = [item for item in load_ifbench(data_dir, variant=variant)  # type: ignore[arg-type]
             if item.extra["kwargs"] is not None and ifbench_checks(item.extra["instruction_id"],
                                                                    item.extra["kwargs"] or {}) is not None]
    return asyncio.run(_ameasure_judge(items[:limit] if limit is not None else items,
                                       settings.with_overrides(explain="none")))


def measure(data_dir: PathLike | None = None) -> dict[str, Any]:
    return {"ifbench": measure_ifbench(data_dir), "ifeval": measure_ifeval(data_dir)}


def _pct(a: int, b: int) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def render_markdown(result: Mapping[str, Any], command: str = "bineval bench checks") -> str:
    """The committed tables of docs/checks.md (between its markers)."""
    ifb, ife = result["ifbench"], result["ifeval"]
    lines = [
        f"`{command}`",
        "",
        f"**IFBench** ({ifb['pairs']} (response, constraint) pairs, {ifb['variant']} verifier): the catalogue handles "
        f"{ifb['handled']} pairs ({ifb['share_handled']:.1%}); agreement with the official verifier "
        f"{ifb['agreement']:.3f} ({ifb['agree']}/{ifb['handled']}).",
        "",
        "| IFBench constraint | pairs | agreement |",
        "|---|---|---|",
    ]
    judge = ifb.get("judge")
    if judge is None:
        lines += [f"| `{k}` | {v['handled']} | {_pct(v['agree'], v['handled'])} |"
                  for k, v in ifb["by_constraint"].items()]
    else:
        lines[-4] += (f" The judge `{judge['model']}`, asked the same questions about {judge['pairs']} of those pairs "
                      f"(answers only; a pair passes when it says yes to each of its checks' questions), agrees with "
                      f"the verifier on {_pct(judge['agree'], judge['judged'])} ({judge['agree']}/{judge['judged']}; "
                      f"{judge['errors']} judge errors; {judge['requests']} requests, {judge['cache_hits']} cache "
                      f"hits, {judge['seconds']} s).")
        lines[-2:] = ["| IFBench constraint | pairs | checks' agreement | judge's agreement |", "|---|---|---|---|"]
        for k, v in ifb["by_constraint"].items():
            j = judge["by_constraint"].get(k, {"agree": 0, "judged": 0, "errors": 0})
            errors = f" ({j['errors']} errors)" if j["errors"] else ""
            lines.append(f"| `{k}` | {v['handled']} | {_pct(v['agree'], v['handled'])} | "
                         f"{_pct(j['agree'], j['judged'])}{errors} |")
    lines += [
        "",
        f"**IFEval** ({ife['prompts']} prompts, {ife['constraints']} constraints): the extractor finds "
        f"{ife['found']} ({ife['recall']:.1%}, recall); of the {ife['extracted']} checks it extracts, "
        f"{ife['correct']} are reference constraints ({ife['precision']:.1%}, precision).",
        "",
        "| IFEval constraint | found / total | recall |",
        "|---|---|---|",
    ]
    lines += [f"| `{k}` | {v['found']} / {v['total']} | {_pct(v['found'], v['total'])} |"
              for k, v in ife["by_constraint"].items()]
    lines += ["", "| extracted check kind | correct / extracted | precision |", "|---|---|---|"]
    lines += [f"| `{k}` | {v['correct']} / {v['extracted']} | {_pct(v['correct'], v['extracted'])} |"
              for k, v in ife["by_check"].items()]
    return "\n".join(lines) + "\n"


def cmd_checks(args: argparse.Namespace) -> int:
    """Measure, write ``checks.json`` / ``checks.md`` to ``--out``, print the tables."""
    import sys

    result = measure(args.data_dir)
    # the data folder as a path relative to where the command ran: no one machine's absolute path in the docs
    command = "bineval bench checks" + (f" --data-dir {os.path.relpath(args.data_dir)}" if args.data_dir else "")
    if getattr(args, "with_judge", False):
        from ..settings import settings_from_args

        settings = settings_from_args(args)
        result["ifbench"]["judge"] = measure_ifbench_judge(settings, args.data_dir, limit=args.limit)
        command += " --with-judge" + (f" --limit {args.limit}" if args.limit is not None else "")
        if args.model:
            command += f" --model {args.model}"
    markdown = render_markdown(result, command)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "checks.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out / "checks.md").write_text(markdown, encoding="utf-8")
    sys.stdout.write(markdown)
    if getattr(args, "details", False):
        for title, rows in (("IFBench disagreements", result["ifbench"]["disagreements"]),
                            ("IFEval misses", result["ifeval"]["misses"]),
                            ("IFEval wrong extractions", result["ifeval"]["wrong"])):
            sys.stdout.write(f"\n{title} ({len(rows)}):\n")
            for row in rows:
                sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"\nwrote {out / 'checks.json'} and {out / 'checks.md'}", file=sys.stderr)
    return 0
