"""The result of a benchmark run: its figures (correlations, distributions, classification, question audit,
cost), the JSON-ready document, its markdown rendering and the two files written. Pure apart from
:func:`write_results`: it takes the per-item scores of a :class:`~.runner.BenchRun` and returns numbers
and text. Data flow one way: the runner produces the run, this module reads it (the runner never
imports this module).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .._version import __version__
from ..files import write_text_atomic
from ..models import Usage
from . import stats
from .datasets import Item
from .methods import VARIANTS, ItemResult, checklist_name, variant_scale
from .runner import BenchRun, MethodRun
from .specs import DatasetSpec, Dimension

__all__ = ["audit", "cost", "figures", "model_slug", "render_markdown", "result_document", "write_results"]

REDUNDANT_PHI = 0.7


def _scores(results: Sequence[ItemResult], variant: str, dim: str) -> list[float | None]:
    return [r.scores.get(variant, {}).get(dim) for r in results]


def _correlation(
    spec: DatasetSpec, items: Sequence[Item], metric: list[float | None], dim: str, bootstrap: int, seed: int
) -> stats.CorrelationResult:
    if spec.protocol == "summary-level":
        groups: dict[str, list[tuple[float | None, float | None]]] = {}
        for item, m in zip(items, metric, strict=True):
            groups.setdefault(item.group, []).append((m, item.human[dim]))
        return stats.summary_level(groups, ci_resamples=bootstrap, seed=seed)
    pairs = [(m, item.human[dim]) for item, m in zip(items, metric, strict=True)]
    return stats.pooled(pairs, ci_resamples=bootstrap, seed=seed)


def _distribution(dim: Dimension, variant: str, metric: list[float | None], human: list[float]) -> dict[str, Any]:
    """Ceiling and spread, with the metric mapped affinely onto the human scale when it is bounded."""
    scale = variant_scale(variant, dim)
    hs = dim.human_scale
    if scale is None:
        out = stats.distribution(metric, human, None, human_top=hs.high)
        out.update({"top": None, "metric_top_share": None, "std_ratio": None, "mapped_to_human_scale": False})
        return out
    mapped = [None if m is None else scale.map_to(m, hs) for m in metric]
    out = stats.distribution(mapped, human, hs.high, human_top=hs.high)
    out["mapped_to_human_scale"] = True
    return out


def _usable(run: MethodRun) -> bool:
    return run.status == "ok"


def _dimension_figures(
    spec: DatasetSpec, items: Sequence[Item], run: MethodRun, variant: str, bootstrap: int, seed: int
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for dim in spec.dimensions:
        metric = _scores(run.results, variant, dim.name)
        human = [it.human[dim.name] for it in items]
        entry: dict[str, Any] = {
            "n_scored": sum(m is not None for m in metric),
            "distribution": _distribution(dim, variant, metric, human),
        }
        if spec.protocol != "ifbench":
            entry["correlation"] = _correlation(spec, items, metric, dim.name, bootstrap, seed).to_dict()
        if spec.binary_dimension == dim.name:
            entry["auroc"] = stats.auroc(metric, [int(h >= 0.5) for h in human])
        out[dim.name] = entry
    return out


def _averages(spec: DatasetSpec, dims: dict[str, Any]) -> dict[str, float | None]:
    """Mean of each statistic over the dimensions (None if any dimension's is undefined)."""
    out: dict[str, float | None] = {}
    for name in stats.STATISTICS:
        values = [dims[d.name].get("correlation", {}).get(name) for d in spec.dimensions]
        out[name] = None if not values or any(v is None for v in values) else sum(values) / len(values)
    return out


def _classification(spec: DatasetSpec, items: Sequence[Item], run: MethodRun) -> dict[str, Any] | None:
    """IFBench: "no" verdicts as predicted failures against the verifier's gold pass/fail."""
    dim = spec.dimensions[0].name
    pairs = [(r.decisions.get(dim), it.human[dim]) for r, it in zip(run.results, items, strict=True)]
    if not any(d is not None for d, _ in pairs):
        return None
    kept = [(d, h) for d, h in pairs if d is not None]
    out = stats.classification([not d for d, _ in kept], [h < 0.5 for _, h in kept])
    out["n_unanswered"] = len(pairs) - len(kept)
    return out


def audit(spec: DatasetSpec, run: MethodRun) -> dict[str, Any]:
    """Question audit of the bineval checklist: per-question yes-rate, phi matrix, redundant pairs."""
    checklist = run.notes.get("checklist")
    if not checklist:
        return {}
    out: dict[str, Any] = {}
    for dim in spec.dimensions:
        cname = checklist_name(dim.name)
        questions = [q for q in checklist["questions"] if q["dimension"] == cname]
        if not questions:
            continue
        answers = {q["id"]: [r.answers.get(q["id"]) for r in run.results] for q in questions}
        matrix = stats.phi_matrix(answers)
        defined = [abs(v) for v in matrix.phi.values() if v is not None]
        out[dim.name] = {
            "questions": [
                {
                    "id": q["id"],
                    "text": q["text"],
                    "yes_rate": matrix.yes_rate[q["id"]],
                    "n_answered": sum(a is not None for a in answers[q["id"]]),
                }
                for q in questions
            ],
            "mean_abs_phi": sum(defined) / len(defined) if defined else None,
            "n_pairs_undefined": sum(v is None for v in matrix.phi.values()),
            "redundant_pairs": [{"a": a, "b": b, "phi": v} for a, b, v in matrix.redundant_pairs(REDUNDANT_PHI)],
            "phi": matrix.to_dict()["pairs"],
        }
    return out


def cost(run: MethodRun, n_items: int) -> dict[str, Any]:
    total: Usage = run.usage + run.prepare_usage
    return {
        "status": run.status,
        "llm_calls": total.llm_calls,
        "cache_hits": total.cache_hits,
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "cost_usd": total.cost_usd,
        "wall_seconds": run.wall_seconds,
        "seconds_per_item": run.wall_seconds / n_items if n_items else None,
        "setup": run.prepare_usage.model_dump(),
        "errors": sum(len(r.errors) for r in run.results),
        "first_error": next((e for r in run.results for e in r.errors), None),
    }


def _item_scores(spec: DatasetSpec, runs: Sequence[MethodRun], k: int) -> dict[str, dict[str, float | None]]:
    out: dict[str, dict[str, float | None]] = {}
    for run in runs:
        if not _usable(run):
            continue
        for v in VARIANTS[run.name]:
            out[v.name] = {d.name: run.results[k].scores.get(v.name, {}).get(d.name) for d in spec.dimensions}
    return out


def figures(
    spec: DatasetSpec, items: Sequence[Item], runs: Sequence[MethodRun], *, bootstrap: int, seed: int
) -> dict[str, Any]:
    """All figures of a run, JSON-ready."""
    methods: dict[str, Any] = {}
    for run in runs:
        entry: dict[str, Any] = {
            "status": run.status,
            "reason": run.reason,
            "notes": {k: v for k, v in run.notes.items() if k != "checklist"},
        }
        if _usable(run):
            entry["variants"] = {}
            for variant in VARIANTS[run.name]:
                dims = _dimension_figures(spec, items, run, variant.name, bootstrap, seed)
                v_entry: dict[str, Any] = {"description": variant.description, "dimensions": dims}
                if spec.protocol != "ifbench":
                    v_entry["average"] = _averages(spec, dims)
                entry["variants"][variant.name] = v_entry
            if spec.protocol == "ifbench":
                entry["classification"] = _classification(spec, items, run)
            entry["cost"] = cost(run, len(items))
        methods[run.name] = entry
    bineval_run = next((r for r in runs if r.name == "bineval" and _usable(r)), None)
    return {
        "methods": methods,
        "checklist": bineval_run.notes.get("checklist") if bineval_run else None,
        "audit": audit(spec, bineval_run) if bineval_run else {},
        "items": [
            {"id": it.id, "group": it.group, "human": it.human, "scores": _item_scores(spec, runs, k)}
            for k, it in enumerate(items)
        ],
        "reference": {k: dict(v) for k, v in spec.reference.items()},
    }


def result_document(run: BenchRun) -> dict[str, Any]:
    """The JSON-ready result of a run: what was run (dataset, model, command, subset) and all its figures."""
    config, spec, items = run.config, run.spec, run.items
    result: dict[str, Any] = {
        "dataset": config.dataset,
        "model": config.model,
        "bineval_version": __version__,
        "command": config.command,
        "task": spec.task,
        "protocol": spec.protocol,
        "subset": {
            "limit": config.limit,
            "docs": config.docs,
            "n_items": len(items),
            "n_groups": len({it.group for it in items}),
            "dimensions": spec.dimension_names,
        },
        "seed": config.seed,
        "bootstrap_resamples": config.bootstrap,
        "wall_seconds": run.wall_seconds,
    }
    result.update(figures(spec, items, run.runs, bootstrap=config.bootstrap, seed=config.seed))
    return result


# --------------------------------------------------------------------------------------------------
# markdown


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{float(value):.{digits}f}"


def _with_ci(corr: dict[str, Any], name: str) -> str:
    value = corr.get(name)
    if value is None:
        return "n/a"
    ci = (corr.get("ci") or {}).get(name)
    return f"{value:+.3f}" if not ci else f"{value:+.3f} [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


_PROTOCOL_TEXT = {
    "summary-level": "summary-level (per group, averaged over groups; constant groups skipped)",
    "pooled": "pooled over all items (turn/sample level)",
    "ifbench": "per-constraint verdicts against the official verifier",
}


def _correlation_rows(result: dict[str, Any], dims: list[str]) -> list[list[str]]:
    rows: list[list[str]] = []
    for name, entry in result["methods"].items():
        if entry["status"] != "ok":
            rows.append([name, "all", "n/a", "n/a", "n/a", entry.get("reason") or ""])
            continue
        for variant, v in entry["variants"].items():
            for dim in dims:
                corr = v["dimensions"][dim]["correlation"]
                groups = corr["n_groups"]
                n = f"{corr['n_items']}" + (
                    f" ({groups} group{'' if groups == 1 else 's'}{': no interval' if groups == 1 else ''})"
                    if result["protocol"] == "summary-level" else ""
                )
                rows.append(
                    [
                        variant,
                        dim,
                        _with_ci(corr, "spearman"),
                        _with_ci(corr, "kendall"),
                        _with_ci(corr, "pearson"),
                        n,
                    ]
                )
            if len(dims) > 1:
                avg = v["average"]
                rows.append([variant, "**average**", _f(avg["spearman"]), _f(avg["kendall"]), _f(avg["pearson"]), ""])
    return rows


def _auroc_rows(result: dict[str, Any], dim: str) -> list[list[str]]:
    rows = []
    for _name, entry in result["methods"].items():
        if entry["status"] != "ok":
            continue
        for variant, v in entry["variants"].items():
            rows.append([variant, _f(v["dimensions"][dim].get("auroc"))])
    return rows


def _distribution_rows(result: dict[str, Any], dims: list[str]) -> list[list[str]]:
    rows = []
    for _name, entry in result["methods"].items():
        if entry["status"] != "ok":
            continue
        for variant, v in entry["variants"].items():
            for dim in dims:
                d = v["dimensions"][dim]["distribution"]
                rows.append(
                    [
                        variant,
                        dim,
                        _f(d["metric_top_share"], 2),
                        _f(d["human_top_share"], 2),
                        _f(d["metric_std"]),
                        _f(d["human_std"]),
                        _f(d["std_ratio"], 2),
                        str(d["metric_distinct"]),
                    ]
                )
    return rows


def _cost_rows(result: dict[str, Any]) -> list[list[str]]:
    rows = []
    for name, entry in result["methods"].items():
        if entry["status"] != "ok":
            rows.append([name, "n/a", "", "", "", "", "", "", ""])
            continue
        c = entry["cost"]
        cost_usd = "" if c["cost_usd"] is None else f"{c['cost_usd']:.4f}"
        setup = c["setup"]["llm_calls"] + c["setup"]["cache_hits"]
        calls = f"{c['llm_calls']}" + (f" (setup {c['setup']['llm_calls']})" if setup else "")
        rows.append(
            [
                name,
                calls,
                str(c["cache_hits"]),
                str(c["prompt_tokens"]),
                str(c["completion_tokens"]),
                _f(c["wall_seconds"], 0),
                _f(c["seconds_per_item"], 2),
                str(c["errors"]),
                cost_usd,
            ]
        )
    return rows


def _ifbench_rows(result: dict[str, Any], dim: str) -> list[list[str]]:
    rows: list[list[str]] = []
    baseline: dict[str, Any] | None = None
    for name, entry in result["methods"].items():
        if entry["status"] != "ok":
            continue
        c = entry.get("classification")
        auc = entry["variants"][next(iter(entry["variants"]))]["dimensions"][dim].get("auroc")
        if c is None:
            rows.append([name, "", "", "", "", _f(auc), ""])
            continue
        baseline = c["always_yes"] | {"n": c["n"]}
        rows.append(
            [
                name,
                _f(c["accuracy"]),
                _f(c["precision"]),
                _f(c["recall"]),
                _f(c["f1"]),
                _f(auc),
                f"{c['n']} ({c['n_gold_fail']} fail, {c['n_pred_no']} said no)",
            ]
        )
    if baseline is not None:
        rows.append(
            [
                "always yes",
                _f(baseline["accuracy"]),
                _f(baseline["precision"]),
                _f(baseline["recall"]),
                _f(baseline["f1"]),
                "0.500",
                str(baseline["n"]),
            ]
        )
    return rows


def _audit_lines(result: dict[str, Any]) -> list[str]:
    lines: list[str] = []
    for dim, a in result["audit"].items():
        mean_phi = _f(a["mean_abs_phi"], 2)
        lines += [
            "",
            f"**{dim}** — mean |phi| {mean_phi}; redundant pairs (|phi| > {REDUNDANT_PHI}): "
            + (", ".join(f"{p['a']}~{p['b']} ({p['phi']:+.2f})" for p in a["redundant_pairs"]) or "none")
            + (f"; {a['n_pairs_undefined']} pair(s) undefined (a constant question)" if a["n_pairs_undefined"] else ""),
            "",
        ]
        rows = [[q["id"], _f(q["yes_rate"], 2), q["text"].replace("|", "\\|")] for q in a["questions"]]
        lines += _table(["question", "yes-rate", "text"], rows)
        ids = [q["id"] for q in a["questions"]]
        if 1 < len(ids) <= 8:
            phi = {(p["a"], p["b"]): p["phi"] for p in a["phi"]}
            header = ["phi", *ids]
            matrix = [
                [qa] + ["—" if qa == qb else _f(phi.get((qa, qb), phi.get((qb, qa))), 2) for qb in ids] for qa in ids
            ]
            lines += ["", *_table(header, matrix)]
    return lines


def render_markdown(result: dict[str, Any]) -> str:
    """The markdown report of one run."""
    dims: list[str] = result["subset"]["dimensions"]
    sub = result["subset"]
    lines = [
        f"## {result['dataset']} — `{result['model']}`",
        "",
        f"{sub['n_items']} items in {sub['n_groups']} groups; "
        f"protocol: {_PROTOCOL_TEXT[result['protocol']]}. "
        f'Task prompt: "{result["task"]}". Wall time {result["wall_seconds"]:.0f} s.',
    ]
    if result.get("command"):
        lines += ["", f"`{result['command']}`"]
    if result["protocol"] != "ifbench":
        lines += [
            "",
            f"Correlation with human scores (95% bootstrap CI, {result['bootstrap_resamples']} resamples):",
            "",
        ]
        lines += _table(
            ["variant", "dimension", "Spearman", "Kendall tau-b", "Pearson", "n"],
            _correlation_rows(result, dims),
        )
    binary = [
        d
        for d in dims
        if any(
            "auroc" in v["dimensions"][d]
            for e in result["methods"].values()
            if e["status"] == "ok"
            for v in e["variants"].values()
        )
    ]
    if result["protocol"] == "ifbench":
        lines += ["", 'Predicting constraint failures (positive class = "no" / fails the verifier):', ""]
        lines += _table(
            ["method", "accuracy", "precision (no)", "recall (no)", "F1 (no)", "AUROC (score)", "n"],
            _ifbench_rows(result, dims[0]),
        )
    elif binary:
        lines += ["", f"AUROC against the binary human labels ({binary[0]}):", ""]
        lines += _table(["variant", "AUROC"], _auroc_rows(result, binary[0]))
    lines += ["", "Distribution (metric mapped onto the human scale; top share = ceiling effect):", ""]
    lines += _table(
        ["variant", "dimension", "top share", "human top share", "std", "human std", "std ratio", "distinct"],
        _distribution_rows(result, dims),
    )
    lines += ["", "Cost:", ""]
    lines += _table(
        ["method", "LLM calls", "cache hits", "prompt tok", "completion tok", "wall s", "s/item", "errors", "USD"],
        _cost_rows(result),
    )
    notes = [
        f"- {name}: " + "; ".join(f"{k}: {v}" for k, v in entry["notes"].items())
        for name, entry in result["methods"].items()
        if entry.get("notes")
    ]
    if notes:
        lines += ["", "Notes:", "", *notes]
    if result.get("audit"):
        lines += ["", "Question audit (bineval checklist):"]
        lines += _audit_lines(result)
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------------------------
# files


def model_slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", model).strip("-") or "model"


def write_results(result: dict[str, Any], markdown: str, out_dir: str | Path) -> tuple[Path, Path]:
    """Write ``<dataset>-<model-slug>.json`` and ``.md`` into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"{result['dataset']}-{model_slug(str(result['model']))}"
    json_path, md_path = out / f"{stem}.json", out / f"{stem}.md"
    write_text_atomic(json_path, json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    write_text_atomic(md_path, markdown)
    return json_path, md_path
