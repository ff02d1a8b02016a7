"""``bineval scale`` at a tiny size: the shards run against the fake server, their reports merge, the page renders,
and the table says what was measured (the figure itself is in docs/performance.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_bineval.bench.scale import find_chromium, markdown, measure, page_load
from pytest_bineval.cli import main
from pytest_bineval.report.document import ReportDocument


def test_scale_runs_two_shards_and_merges_their_reports(tmp_path: Path) -> None:
    result = measure(tests=5, questions=2, shards=2, workers=1, latency=0.0, browser=False, workdir=tmp_path)
    assert result["requests"] == 5 * 2  # the cache is off: every question is a request
    assert result["records"] == 5 and result["totals"]["passed"] == 5 and result["partial"] is False
    assert result["total_concurrency"] == 2 * 1 * 2 and result["bound_s"] == 0.0
    merged = ReportDocument.load(tmp_path / "merged.json")
    assert sorted(r.test for r in merged.evaluations) == sorted(
        f"test_shard_{1 if i < 2 else 2}.py::test_summary[{i}]" for i in range(5))  # 2 + 3: a plain split
    assert (tmp_path / "merged.html").stat().st_size == result["html_bytes"] > 0
    assert result["memory_per_1000_records_bytes"] > 0
    table = markdown(result)
    assert "| requests the server received | 10 |" in table
    assert "| evaluations in the merged report (passed / below / error) | 5 (5 / 0 / 0) |" in table
    assert "| the HTML page in headless Chromium | not measured (--no-browser) |" in table


def test_scale_times_the_page_in_chromium(tmp_path: Path) -> None:
    if find_chromium() is None and not os.environ.get("CI"):
        pytest.skip("no Chromium found (apt-get install -y chromium): the page's load time is not measured here")
    ReportDocument().write(tmp_path / "r.json")
    assert main(["report", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"), "--github", "off"]) == 0
    facts = page_load(tmp_path / "r.html")
    assert isinstance(facts, dict), facts
    assert facts["js"] is True and facts["rows"] == 0 and facts["load_ms"] > 0
