"""The tables of "Know your judge" (``docs/know-your-judge.md``), computed so that they cannot drift from the code:
how wide the 95% interval of an agreement is on n labels (:func:`pytest_bineval.agreement.Share`), and how often
``bineval calibrate --min-kappa 0.6`` decides wrongly on n labels (a seeded simulation of labelling).

The page holds them between ``<!-- labels-table:start -->`` and ``<!-- labels-table:end -->``. As an mkdocs hook this
module writes them into the page at build time; ``tests/unit/test_docs.py`` fails when the committed page differs,
and ``python docs/hooks/labels_table.py`` rewrites it.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

# the sibling hook: mkdocs (and the tests) load a hook with its directory on the path
from options_reference import fill_between

PAGE = Path(__file__).resolve().parent.parent / "know-your-judge.md"
START, END = "<!-- labels-table:start -->", "<!-- labels-table:end -->"
SIZES = (10, 20, 30, 50, 100, 200)
OBSERVED = (0.80, 0.90, 0.95)
BASE_RATE = 0.7  # the share of yes among the labelled verdicts of the simulation
BAR = 0.6  # --min-kappa of the simulation
RUNS = 2000
SEED = 20261202


def true_kappa(base: float, accuracy: float) -> float:
    """The kappa of a judge right with probability ``accuracy`` on yes and no alike, at a base rate of yes."""
    judge_yes = base * accuracy + (1 - base) * (1 - accuracy)
    chance = base * judge_yes + (1 - base) * (1 - judge_yes)
    return (accuracy - chance) / (1 - chance)


def accuracy_for(kappa: float, base: float = BASE_RATE) -> float:
    """The accuracy whose :func:`true_kappa` is ``kappa`` (bisection)."""
    low, high = 0.5, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if true_kappa(base, mid) < kappa else (low, mid)
    return (low + high) / 2


def fails_the_bar(n: int, accuracy: float, rng: random.Random) -> bool:
    """One simulated labelling of ``n`` verdicts: does ``--min-kappa BAR`` fail it (undefined kappa fails)?"""
    from pytest_bineval.agreement import Table, cohen_kappa

    cells = [0, 0, 0, 0]
    for _ in range(n):
        yes = rng.random() < BASE_RATE
        right = rng.random() < accuracy
        cells[(0 if right else 1) if yes else (3 if right else 2)] += 1
    kappa = cohen_kappa(Table(*cells))
    return kappa is None or kappa < BAR


def tables() -> str:
    from pytest_bineval.agreement import Share

    lines = ["| labels | " + " | ".join(f"agreement near {p:.0%}" for p in OBSERVED) + " |",
             "|---|" + "---|" * len(OBSERVED)]
    for n in SIZES:
        cells = []
        for p in OBSERVED:
            s = Share.of(round(p * n), n)
            cells.append(f"{s.k}/{n}: [{s.low:.2f}, {s.high:.2f}]")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    good, bad = accuracy_for(0.8), accuracy_for(0.4)
    rng = random.Random(SEED)
    lines += ["", f"`bineval calibrate --min-kappa {BAR}` on simulated labels ({RUNS} labellings per row, "
              f"{BASE_RATE:.0%} of the verdicts labelled yes, the judge right on yes and no alike):", "",
              f"| labels | fails a good judge (true kappa 0.8, {good:.1%} right) "
              f"| passes a poor judge (true kappa 0.4, {bad:.1%} right) |", "|---|---|---|"]
    for n in SIZES:
        false_alarm = sum(fails_the_bar(n, good, rng) for _ in range(RUNS)) / RUNS
        missed = sum(not fails_the_bar(n, bad, rng) for _ in range(RUNS)) / RUNS
        lines.append(f"| {n} | {false_alarm:.1%} | {missed:.1%} |")
    no_labels = round(50 * (1 - BASE_RATE))
    tnr = Share.of(round(0.8 * no_labels), no_labels)
    lines += ["", f"The TPR and TNR rest on part of the labels only: of 50 labels at a base rate of {BASE_RATE:.0%} "
              f"yes, about {no_labels} are *no*, and a TNR of {tnr.value:.2f} observed on them has the interval "
              f"[{tnr.low:.2f}, {tnr.high:.2f}]."]
    return "\n".join(lines) + "\n"


def fill(markdown: str) -> str:
    """``markdown`` with the computed tables between the markers (a ValueError when a marker is missing)."""
    return fill_between(markdown, START, END, tables(), PAGE.name)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    """mkdocs hook: the page always shows the tables of the code being documented."""
    return fill(markdown) if page.file.src_uri == PAGE.name else markdown


if __name__ == "__main__":
    PAGE.write_text(fill(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PAGE}", file=sys.stderr)
