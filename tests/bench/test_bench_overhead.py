"""``bineval bench overhead`` at a tiny size: every variant runs against the fake server in its own pytest process,
the requests seen match the tests', and the table has its rows and ratios (the figures themselves are in
docs/performance.md; no timing is asserted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_bineval.bench.overhead import VARIANTS
from pytest_bineval.cli import main


def test_overhead_runs_every_variant_and_prints_its_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(["bench", "overhead", "--limit", "3", "--questions", "2", "--rounds", "1", "--out", str(out),
                 "--quiet"]) == 0
    result = json.loads((out / "overhead.json").read_text(encoding="utf-8"))
    assert (result["tests"], result["questions"], result["repeats"]) == (3, 2, 1)
    assert len(result["load_before"]) == len(result["load_after"]) == 3
    assert list(result["variants"]) == [v.name for v in VARIANTS]
    for name, v in result["variants"].items():
        (run,) = v["rounds"]
        assert 3 * 2 <= run["requests"] <= 3 * 2 + 2, name  # every question a request (the cache is off)
        assert (run["streamed"] >= 3 * 2 - 1) if name == "bineval-stream" else run["streamed"] == 0, name
        assert v["cpu_ms_per_test"] > 0 and run["cpu_s"] > 0
    table = (out / "overhead.md").read_text(encoding="utf-8")
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) == 1 + len(VARIANTS)  # the header and a row per variant
    assert rows[1].startswith("| a plain pytest test posting them at once") and rows[1].split("|")[4].strip() == "1.0"
    assert "load average (1/5/15 min)" in table
    assert table in capsys.readouterr().out
