"""``bineval bench cost``: the recording fake server's figures come from the real request path (streamed: requests =
questions; two requests: questions + explanations; the cached tokens it reports reach Usage), and the billing
arithmetic per provider."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_bineval.bench.cost import QUESTIONS, Request, billed, joined_sources, measure_cost, render_cost
from pytest_bineval.bench.datasets import Item
from pytest_bineval.cli import main

ARTICLE = " ".join(f"Sentence {i}: the council said the bridge on route {i} opened in 1932." for i in range(80))


def items(n: int) -> list[Item]:
    return [Item(id=f"A0:S{i}", group="A0", source=ARTICLE, output=f"The bridge {i} opened in 1932.", human={})
            for i in range(n)]


def test_recording_server_figures_come_from_the_request_path() -> None:
    result = measure_cost(items(2))
    streamed, new, two, one = result["rows"]
    assert new["requests"] == streamed["requests"] and new["prompt"] == streamed["prompt"]
    # both summaries judge one source: the second reads it where the first wrote it, unless every source is new
    assert streamed["billed"]["Anthropic claude-haiku-4-5"] < new["billed"]["Anthropic claude-haiku-4-5"]
    no = round(result["no_share"] * 2 * len(QUESTIONS))
    assert 0 < no < 2 * len(QUESTIONS)
    assert streamed["requests"] == len(QUESTIONS) and streamed["explanation_share"] == 0  # one request per question
    assert result["reported"]["bineval"]["requests"] == len(QUESTIONS)
    assert result["estimated"] == (2 * len(QUESTIONS) - no) / 2  # every "yes" was closed after its answer
    assert two["requests"] == (2 * len(QUESTIONS) + no) / 2  # an explanation request per "no"
    assert one["requests"] == 1.0
    # the prefix (~1600 tokens) was seen before from the second question on: cached, as Usage read it
    assert result["reported"]["bineval, two requests"]["cached"] == two["cached"] > 0
    assert result["reported"]["bineval, two requests"]["prompt"] == two["prompt"]
    anthropic = "Anthropic claude-haiku-4-5"
    assert two["billed"][anthropic] < two["prompt"] / 2  # reads at 0.1x
    assert streamed["billed"][anthropic] < two["billed"][anthropic]
    text = render_cost(result)
    assert "| bineval streamed / one-call | " in text and "billed, Anthropic claude-haiku-4-5" in text


def test_billing_ratios() -> None:
    shared = "x" * 4400  # 1100 tokens
    group = [Request("answer", 1200, 0, 2, shared + "a" * 400), Request("answer", 1200, 1100, 2, shared + "b" * 400)]
    ratios = {"read": 0.1, "write": 1.25, "output": 5.0}
    assert billed(group, "anthropic", ratios) == pytest.approx(1.25 * 1100 + 100 + 0.1 * 1100 + 100 + 20)
    assert billed(group, "openai", ratios) == pytest.approx(1200 + (1200 - 1024) + 0.1 * 1024 + 20)
    short = [Request("answer", 600, 0, 2, "y" * 2000), Request("answer", 600, 500, 2, "y" * 2000)]
    assert billed(short, "anthropic", ratios) == billed(short, "none", ratios) == 1200 + 20  # below the minimum


def test_a_source_written_by_an_earlier_assertion_is_read() -> None:
    source = "s" * 4800  # 1200 tokens, then the output
    first = [Request("answer", 1300, 0, 0, f"{source}<response>A</response> q1"),
             Request("answer", 1300, 0, 0, f"{source}<response>A</response> q2")]
    second = [Request("answer", 1300, 0, 0, f"{source}<response>B</response> q1"),
              Request("answer", 1300, 0, 0, f"{source}<response>B</response> q2")]
    ratios = {"read": 0.1, "write": 1.25, "output": 5.0}
    sources: set[str] = set()
    alone = billed(second, "anthropic", ratios)
    assert billed(first, "anthropic", ratios, sources) == pytest.approx(alone)  # nothing to read yet
    # the second assertion reads the 1200 source tokens (0.1x) instead of writing them (1.25x)
    assert billed(second, "anthropic", ratios, sources) == pytest.approx(alone - (1.25 - 0.1) * 1200)


def test_joined_sources_make_a_long_source() -> None:
    data = [Item(id=f"A{i}:S0", group=f"A{i}", source=f"article {i}", output="s", human={}) for i in range(3)]
    joined = joined_sources(data, 2)
    assert [i.source for i in joined] == ["article 0\n\narticle 1", "article 1\n\narticle 2", "article 2\n\narticle 0"]
    assert joined_sources(data, 1) == data


def test_cli_writes_the_table(tmp_path: Path) -> None:
    data = tmp_path / "data" / "summeval"
    data.mkdir(parents=True)
    rows = [{"article_id": "A0", "summary_id": f"S{i}", "article": ARTICLE, "summary": f"The bridge {i} opened.",
             "coherence": 3, "consistency": 4, "fluency": 5, "relevance": 3} for i in range(2)]
    (data / "summeval.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out = tmp_path / "out"
    assert main(["bench", "cost", "--limit", "1", "--join-articles", "2", "--data-dir", str(tmp_path / "data"),
                 "--out", str(out)]) == 0
    table = (out / "cost-recorder.md").read_text(encoding="utf-8")
    assert "1 summaries" in table and "| one-call G-Eval-style metric | 1.00 |" in table
    assert json.loads((out / "cost-recorder.json").read_text(encoding="utf-8"))["summaries"] == 1
