"""``bineval bench gate``: the regression gate simulated through its own functions -- seeded, false alarms at most
alpha with no real change (small configurations here; the docs' table is the whole grid), the power on a drop, and
the command line's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_bineval.bench import gate
from pytest_bineval.bench.gate import JUDGES, Scenario, simulate
from pytest_bineval.cli import main

NOISY = next(j for j in JUDGES if j.name == "20% noise")
STEADY = next(j for j in JUDGES if j.name == "deterministic")


def test_a_simulation_is_seeded() -> None:
    s = Scenario(10, 3, NOISY)
    first, again = simulate(s, 20, seed=3), simulate(s, 20, seed=3)
    assert (first.flips, first.reasks, first.gate_alarms) == (again.flips, again.reasks, again.gate_alarms)
    other = simulate(s, 20, seed=4)
    assert (other.flips, other.reasks) != (first.flips, first.reasks)


@pytest.mark.parametrize("scenario", [Scenario(10, 3, NOISY), Scenario(10, 8, NOISY, repeats=3),
                                      Scenario(50, 3, NOISY)], ids=["10x3", "10x8-repeats", "50x3"])
def test_no_real_change_fails_the_gate_at_most_alpha(scenario: Scenario) -> None:
    """400 runs with a judge that errs on 20% of its answers and has borderline questions, every flip examined:
    the gate fails at most 5% of them (plus the simulation's error: 2 standard errors, 2.2 points)."""
    result = simulate(scenario, 400, seed=11)
    assert result.flips > 0 and result.reasks > 0
    assert result.rate(result.gate_alarms) <= 0.05 + 0.022
    assert result.gate_alarms <= result.case_alarms + result.suite_alarms


def test_a_deterministic_judge_never_flips_without_a_change_and_always_finds_a_drop() -> None:
    quiet = simulate(Scenario(10, 3, STEADY), 50)
    assert (quiet.flips, quiet.reasks, quiet.gate_alarms) == (0, 0, 0)
    drop = simulate(Scenario(10, 3, STEADY, drop=0.2, spread="few"), 50)
    assert drop.rate(drop.gate_alarms) == 1.0 and drop.cases_found == drop.runs  # every regressed case confirmed
    assert drop.true_drop / drop.runs == pytest.approx(0.2)


def test_a_spread_drop_is_seen_by_the_suite_level_question() -> None:
    result = simulate(Scenario(50, 8, next(j for j in JUDGES if j.name == "10% noise"), drop=0.2, spread="many"),
                      40, detect_runs=0)
    assert result.rate(result.suite_alarms) >= 0.9


def test_the_command_writes_the_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gate, "SIZES", (10,))
    monkeypatch.setattr(gate, "QUESTIONS", (3,))
    monkeypatch.setattr(gate, "DROPS", (0.2,))
    out = tmp_path / "out"
    assert main(["bench", "gate", "--limit", "3", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert printed == (out / "gate.md").read_text(encoding="utf-8")
    assert "### The regression gate, simulated: `bineval bench gate --limit 3`" in printed
    assert "| 10 | 3 | 20% noise | 3 |" in printed and "| 10 | 3 | deterministic | 20 pts (20.0) | few |" in printed
    data = json.loads((out / "gate.json").read_text(encoding="utf-8"))
    assert data["runs"] == 3 and len(data["null"]) == 7 and len(data["power"]) == 4  # 1 + 3 x 2; 2 judges x 2
    assert {row["scenario"]["judge"] for row in data["null"]} == {j.name for j in JUDGES}
    assert main(["bench", "gate", "--limit", "0", "--out", str(out)]) == 2
    assert "--limit (simulated runs per scenario) must be >= 1" in capsys.readouterr().err
