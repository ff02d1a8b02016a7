"""The computed tables of docs/know-your-judge.md (docs/hooks/labels_table.py) match the code."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("labels_table", ROOT / "docs" / "hooks" / "labels_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_committed_tables_are_the_computed_ones() -> None:
    hook = load_hook()
    committed = (ROOT / "docs" / "know-your-judge.md").read_text(encoding="utf-8")
    assert committed == hook.fill(committed), (
        "docs/know-your-judge.md is out of date with the code: run `python docs/hooks/labels_table.py`")


def test_the_simulated_judges_have_the_kappas_the_table_names() -> None:
    hook = load_hook()
    assert hook.true_kappa(0.7, hook.accuracy_for(0.8)) == pytest.approx(0.8)
    assert hook.true_kappa(0.7, hook.accuracy_for(0.4)) == pytest.approx(0.4)
    assert hook.true_kappa(0.5, 0.9) == pytest.approx(0.8)  # symmetric errors at a 50% base rate: 2 * 0.9 - 1


def test_the_hook_fills_only_between_its_markers() -> None:
    hook = load_hook()
    filled = hook.fill(f"intro\n{hook.START}\nOLD\n{hook.END}\noutro\n")
    assert filled.startswith(f"intro\n{hook.START}\n| labels |") and "OLD" not in filled
    with pytest.raises(ValueError, match="lacks the markers"):
        hook.fill("no markers")
