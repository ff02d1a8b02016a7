"""``bineval bench gate``: the regression gate's false alarms and power, simulated (pure code, seeded, no model).

A simulated suite has ``n`` evaluations (cases) of :data:`DIMENSIONS` dimensions with ``Q`` questions each. The
judge answers each question with its own yes-probability about an output: a *clear* question is yes with
probability 1 - e (or e, :data:`YES_SHARE` of them are yes-questions), a *borderline* one (:attr:`Judge.borderline`
of the questions) with a probability drawn from U(0.3, 0.7); a *deterministic* judge (e = 0, no borderline) always
gives the same answer. Each question is asked ``R`` times per run (``--bineval-repeats``); its answer is the
majority (no on a tie).

*No real change*: the new outputs have the same yes-probabilities as the baseline's (the outputs were rewritten
without getting better or worse), and every output counts as changed, so every flip is examined (the worst case:
the plugin does not re-ask a flip on an unchanged output). *A real drop of d points*: in the first dimension, clear
yes-questions become clear no-questions (1 - e -> e) until the dimension's true mean score is d lower, spread over
**few** cases (all the yes-questions of one case, then the next) or **many** (one question per case, round-robin).

Each simulated run goes through the gate's own code: the flips (yes -> no) are confirmed by :mod:`pytest_bineval.
flips` (fresh asks drawn from the true probabilities, a case's remaining flips skipped once one is confirmed, as
the plugin does), the dimensions are tested by :mod:`pytest_bineval.gate_stats` (Holm, alpha / 2 each), and the gate
fails on a confirmed regression or a regressed dimension. Reported: the false-alarm rate of each question and of
the gate with no real change (goal: at most alpha), the power per drop, the flips and re-asks a run pays, and how
often a dimension is *uninformative* (and its median smallest detectable drop).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..flips import FLIP_ASKS, flip_plan, flip_status, next_ask
from ..gate_stats import DEFAULT_ALPHA, MEANINGFUL_DROP, holm, sign_flip_integers, suite_verdicts
from ..models import Answer

__all__ = ["Judge", "Scenario", "ScenarioResult", "cmd_gate", "render_markdown", "run_grid", "simulate"]

DIMENSIONS = 2  # dimensions per evaluation; a real drop is in the first
YES_SHARE = 0.8  # of the clear questions, the share that are yes-questions
SIZES = (10, 50, 200)
QUESTIONS = (3, 8, 20)
REPEATS = (1, 3)
DROPS = (0.05, 0.10, 0.20)
SPREADS = ("few", "many")
DETECT_RUNS = 5  # runs per no-change scenario whose suite-level verdict (smallest detectable drop) is computed


@dataclass(frozen=True)
class Judge:
    name: str
    noise: float  # e: a clear question's answer is wrong with this probability
    borderline: float  # share of borderline questions (yes-probability in U(0.3, 0.7))


JUDGES = (Judge("deterministic", 0.0, 0.0), Judge("5% noise", 0.05, 0.1), Judge("10% noise", 0.10, 0.1),
          Judge("20% noise", 0.20, 0.1))
POWER_JUDGES = ("deterministic", "10% noise")  # the judges the power grid runs (with repeats 1)


@dataclass(frozen=True)
class Scenario:
    evaluations: int
    questions: int
    judge: Judge
    repeats: int = 1
    drop: float = 0.0  # 0: no real change
    spread: str = "many"


@dataclass
class ScenarioResult:
    scenario: Scenario
    runs: int = 0
    case_alarms: int = 0  # runs with a confirmed regression (any case)
    case_hits: int = 0  # runs with a confirmed regression of a case that really regressed
    cases_found: float = 0.0  # sum over runs of the share of really regressed cases confirmed
    suite_alarms: int = 0  # runs with the first dimension (or, with no change, any) regressed
    gate_alarms: int = 0  # runs the gate fails
    flips: int = 0  # flips examined, summed over runs
    reasks: int = 0  # fresh asks made to confirm them, summed over runs
    true_drop: float = 0.0  # the injected drop of the first dimension's true mean score, summed over runs
    verdicts: dict[str, int] = field(default_factory=dict)  # suite verdicts of the first dimension, detect runs
    detectable: list[float | None] = field(default_factory=list)

    def rate(self, count: int) -> float:
        return count / self.runs if self.runs else 0.0


def _probabilities(rng: Any, s: Scenario) -> Any:
    """The judge's yes-probability of each (case, dimension, question) about the baseline's output."""
    shape = (s.evaluations, DIMENSIONS, s.questions)
    e = s.judge.noise
    clear = np.where(rng.random(shape) < YES_SHARE, 1 - e, e)
    return np.where(rng.random(shape) < s.judge.borderline, rng.uniform(0.3, 0.7, shape), clear)


def _inject(rng: Any, s: Scenario, base: Any) -> tuple[Any, set[int], float]:
    """The new outputs' probabilities: the baseline's, with the scenario's drop in dimension 0; the cases that
    really regressed and the drop of the true mean score."""
    new = base.copy()
    if s.drop <= 0:
        return new, set(), 0.0
    e = s.judge.noise
    loss = 1 - 2 * e
    needed = round(s.drop * s.evaluations * s.questions / loss)
    cases = [int(c) for c in rng.permutation(s.evaluations)]
    candidates = {c: [int(q) for q in rng.permutation(np.flatnonzero(base[c, 0] == 1 - e))] for c in cases}
    chosen: list[tuple[int, int]] = []
    if s.spread == "few":
        chosen = [(c, q) for c in cases for q in candidates[c]][:needed]
    else:
        depth = 0
        while len(chosen) < needed and any(len(v) > depth for v in candidates.values()):
            chosen += [(c, candidates[c][depth]) for c in cases if len(candidates[c]) > depth]
            depth += 1
        chosen = chosen[:needed]
    for c, q in chosen:
        new[c, 0, q] = e
    return new, {c for c, _ in chosen}, len(chosen) * loss / (s.evaluations * s.questions)


def _confirm(rng: random.Random, flips: list[tuple[int, int, int]], base: Any, new: Any,
             alpha: float) -> tuple[set[int], int]:
    """The flips confirmed as the plugin does (pytest_bineval.flips; each case's flips in order until one is
    confirmed), with fresh asks drawn from the true probabilities. Returns the confirmed cases and the asks made."""
    plan = flip_plan(alpha, len(flips))
    confirmed: set[int] = set()
    asks = 0
    for c, d, q in flips:
        if c in confirmed:
            continue
        answers: dict[str, list[Answer]] = {"new": [], "baseline": []}
        p = {"new": float(new[c, d, q]), "baseline": float(base[c, d, q])}
        while (side := next_ask(plan, answers["new"], answers["baseline"])) is not None:
            answers[side].append("yes" if rng.random() < p[side] else "no")
            asks += 1
        if flip_status(plan, answers["new"], answers["baseline"]) == "confirmed":
            confirmed.add(c)
    return confirmed, asks


def simulate(s: Scenario, runs: int, *, seed: int = 0, alpha: float = DEFAULT_ALPHA, detect_runs: int = 0,
             detect_simulations: int = 100) -> ScenarioResult:
    """``runs`` simulated runs of scenario ``s`` through the gate; the suite-level verdicts (with the smallest
    detectable drop, which costs more than the rest of a run) are computed in the first ``detect_runs``."""
    result = ScenarioResult(s)
    key = f"{seed}|{s.evaluations}|{s.questions}|{s.judge.name}|{s.repeats}|{s.drop}|{s.spread}"
    digest = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")
    rng = np.random.default_rng(digest)
    asker = random.Random(digest)
    r = s.repeats
    for run in range(runs):
        base_p = _probabilities(rng, s)
        new_p, regressed_cases, true_drop = _inject(rng, s, base_p)
        yb = rng.binomial(r, base_p)
        ya = rng.binomial(r, new_p)
        flips = [(int(c), int(d), int(q)) for c, d, q in np.argwhere((2 * yb > r) & (2 * ya <= r))]
        confirmed, asks = _confirm(asker, flips, base_p, new_p, alpha / 2)
        # the suite-level test: each evaluation's change on a dimension is sum(ya - yb) / (questions x repeats)
        numerators = (ya - yb).sum(axis=2)
        tests = [sign_flip_integers([int(v) for v in numerators[:, d]], seed=run) for d in range(DIMENSIONS)]
        adjusted = [min(1.0, 2 * a) for a in holm([t.p_value for t in tests])]
        regressed = [adj < alpha and int(numerators[:, d].sum()) < 0 for d, adj in enumerate(adjusted)]
        result.runs += 1
        result.flips += len(flips)
        result.reasks += asks
        result.true_drop += true_drop
        result.case_alarms += bool(confirmed)
        result.case_hits += bool(confirmed & regressed_cases)
        result.cases_found += len(confirmed & regressed_cases) / len(regressed_cases) if regressed_cases else 0.0
        result.suite_alarms += regressed[0] if s.drop > 0 else any(regressed)
        result.gate_alarms += bool(confirmed) or any(regressed)
        if run < detect_runs:  # the plugin's own path from question pairs, checked against the fast one above
            dims = {f"d{d}": [[(int(yb[c, d, q]), r, int(ya[c, d, q]), r) for q in range(s.questions)]
                              for c in range(s.evaluations)] for d in range(DIMENSIONS)}
            verdicts = suite_verdicts(dims, alpha=alpha, seed=run, simulations=detect_simulations)
            if [v.verdict == "regressed" for v in verdicts] != regressed:
                raise AssertionError(f"suite_verdicts disagrees with the simulation's test in {s}")
            first = verdicts[0]
            result.verdicts[first.verdict] = result.verdicts.get(first.verdict, 0) + 1
            if first.verdict != "regressed":
                result.detectable.append(first.detectable)
    return result


def null_scenarios() -> Iterator[Scenario]:
    for n in SIZES:
        for q in QUESTIONS:
            for judge in JUDGES:
                for r in REPEATS:
                    if judge.noise == 0 and r > 1:
                        continue  # a deterministic judge's repeats are copies
                    yield Scenario(n, q, judge, r)


def power_scenarios() -> Iterator[Scenario]:
    judges = [j for j in JUDGES if j.name in POWER_JUDGES]
    for n in SIZES:
        for q in QUESTIONS:
            for judge in judges:
                for drop in DROPS:
                    for spread in SPREADS:
                        yield Scenario(n, q, judge, 1, drop, spread)


def run_grid(runs: int, *, seed: int = 0, alpha: float = DEFAULT_ALPHA, detect_runs: int = DETECT_RUNS,
             power: bool = True, progress: bool = False) -> dict[str, list[ScenarioResult]]:
    grids = {"null": list(null_scenarios()), "power": list(power_scenarios()) if power else []}
    out: dict[str, list[ScenarioResult]] = {}
    total = sum(len(v) for v in grids.values())
    done = 0
    for name, scenarios in grids.items():
        out[name] = []
        for s in scenarios:
            out[name].append(simulate(s, runs, seed=seed, alpha=alpha,
                                      detect_runs=detect_runs if name == "null" else 0))
            done += 1
            if progress:
                print(f"\r{done}/{total} scenarios", end="", file=sys.stderr, flush=True)
    if progress:
        print(file=sys.stderr)
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _upper(count: int, runs: int) -> float:
    """The upper end of the 95% Wilson interval of a rate (is a rate above alpha beyond the simulation's error?)."""
    from ..repeats import wilson_interval

    bounds = wilson_interval(count, runs)
    return bounds[1] if bounds else 1.0


def _lower(count: int, runs: int) -> float:
    from ..repeats import wilson_interval

    bounds = wilson_interval(count, runs)
    return bounds[0] if bounds else 0.0


def render_markdown(grid: dict[str, list[ScenarioResult]], *, runs: int, alpha: float, seconds: float,
                    command: str) -> str:
    lines = [f"### The regression gate, simulated: `{command}`", "",
             f"{runs} simulated runs per row, alpha = {alpha:g} (each of the gate's two questions gets alpha / 2), "
             f"{DIMENSIONS} dimensions per evaluation, flips confirmed with a budget of {FLIP_ASKS} fresh asks per "
             f"side. {seconds:.0f} s on this machine.", "",
             "**No real change** (the rate at which each question, and the gate, fails a run; goal: at most "
             f"{alpha:g}). *Uninformative*: share of the first {min(runs, DETECT_RUNS)} runs whose first dimension "
             "the suite-level question calls uninformative (it could not detect a drop of "
             f"{MEANINGFUL_DROP * 100:.0f} points), with the median smallest detectable drop.", "",
             "| evaluations | questions | judge | repeats | flips / run | re-asks / run | per case | suite level "
             "| gate | uninformative (median detectable drop) |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|---|"]
    worst = 0.0
    for r in grid.get("null", []):
        s = r.scenario
        flag = " **(above alpha)**" if _lower(r.gate_alarms, r.runs) > alpha else ""
        worst = max(worst, r.rate(r.gate_alarms))
        det = [d for d in r.detectable if d is not None]
        informed = sum(r.verdicts.values())
        unin = r.verdicts.get("uninformative", 0)
        median = (f"{100 * statistics.median(det):.0f} pts" if det else "none") if informed else "-"
        lines.append(f"| {s.evaluations} | {s.questions} | {s.judge.name} | {s.repeats} | {r.flips / r.runs:.1f} | "
                     f"{r.reasks / r.runs:.1f} | {_pct(r.rate(r.case_alarms))} | {_pct(r.rate(r.suite_alarms))} | "
                     f"{_pct(r.rate(r.gate_alarms))}{flag} | "
                     f"{_pct(unin / informed) if informed else '-'} ({median}) |")
    lines += ["", f"Highest false-alarm rate of the gate: {_pct(worst)}.", ""]
    power = grid.get("power", [])
    if power:
        lines += ["**A real drop** in one dimension (repeats 1): the share of runs in which the per-case question "
                  "confirms a regression of a case that really regressed (and the mean share of those cases it "
                  "confirms), the suite-level question calls the dimension regressed, and the gate fails.", "",
                  "| evaluations | questions | judge | drop | spread | re-asks / run | per case (cases found) "
                  "| suite level | gate |", "|---:|---:|---|---:|---|---:|---:|---:|---:|"]
        for r in power:
            s = r.scenario
            lines.append(f"| {s.evaluations} | {s.questions} | {s.judge.name} | {s.drop * 100:.0f} pts "
                         f"({100 * r.true_drop / r.runs:.1f}) | {s.spread} | {r.reasks / r.runs:.1f} | "
                         f"{_pct(r.rate(r.case_hits))} ({_pct(r.cases_found / r.runs)}) | "
                         f"{_pct(r.rate(r.suite_alarms))} | {_pct(r.rate(r.gate_alarms))} |")
        lines.append("")
    return "\n".join(lines) + "\n"


def _as_json(grid: dict[str, list[ScenarioResult]]) -> dict[str, object]:
    def row(r: ScenarioResult) -> dict[str, object]:
        d = asdict(r)
        d["scenario"]["judge"] = r.scenario.judge.name
        return d
    return {name: [row(r) for r in rows] for name, rows in grid.items()}


def cmd_gate(args: argparse.Namespace) -> int:
    """Simulate the grid, write ``gate.json`` / ``gate.md`` to ``--out``, print the tables."""
    runs = 200 if args.limit is None else args.limit
    if runs < 1:
        raise ValueError("--limit (simulated runs per scenario) must be >= 1")
    alpha = DEFAULT_ALPHA
    command = "bineval bench gate" + (f" --limit {runs}" if args.limit is not None else "") + (
        f" --seed {args.seed}" if args.seed else "")
    start = time.perf_counter()
    grid = run_grid(runs, seed=args.seed, alpha=alpha, detect_runs=DETECT_RUNS, progress=not args.quiet)
    seconds = time.perf_counter() - start
    markdown = render_markdown(grid, runs=runs, alpha=alpha, seconds=seconds, command=command)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "gate.json").write_text(json.dumps({"command": command, "runs": runs, "alpha": alpha,
                                               "seconds": round(seconds, 1), **_as_json(grid)}, indent=1) + "\n",
                                   encoding="utf-8")
    (out / "gate.md").write_text(markdown, encoding="utf-8")
    sys.stdout.write(markdown)
    print(f"\nwrote {out / 'gate.json'} and {out / 'gate.md'}", file=sys.stderr)
    return 0
