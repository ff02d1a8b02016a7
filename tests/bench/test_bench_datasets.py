"""Loaders of pytest_bineval.bench.datasets on small fixture files in the real formats.

Only the tests marked "real data" read the shared benchmark data; they are skipped when it is absent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.bench import datasets
from pytest_bineval.bench.datasets import (
    DataNotFoundError,
    Item,
    load_custom,
    load_ifbench,
    load_qags,
    load_summeval,
    load_topical_chat,
    resolve_data_dir,
    select_items,
)
from pytest_bineval.bench.specs import DATASETS


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _write_json(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _summeval_record(article: int, summary: int) -> dict[str, Any]:
    return {
        "article_id": f"A{article}",
        "summary_id": f"S{summary}",
        "article": f"Article {article} text.",
        "summary": f"summary {summary} of article {article} .",
        "coherence": 1.3333333333,
        "fluency": 3.0,
        "consistency": 5.0,
        "relevance": 1.6666666667 + summary,
    }


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """A data directory with a few records of every dataset in its real layout and field names."""
    root = tmp_path / "data"
    _write_jsonl(
        root / "summeval" / "summeval.jsonl",
        [_summeval_record(a, s) for a in range(3) for s in range(2)],
    )
    topical = []
    for context in range(2):
        for system in ("Original Ground Truth", "Argmax Decoding"):
            topical.append(
                {
                    "source": f"hi , topic {context} \n hello there \n\n",
                    "system_id": system,
                    "system_output": f"reply of {system} ",
                    "context": f"fact number {context}",
                    "scores": {
                        "understandability": 1.0,
                        "naturalness": 3.0,
                        "coherence": 2.3333333333,
                        "engagingness": 3.0,
                        "groundedness": 0.6666666667,
                        "overall": 4.6666666667,
                    },
                }
            )
    _write_json(root / "topical_chat" / "topical_chat.json", topical)
    for which, values in (("cnndm", [1.0, 0.3333333333333333, 0.0]), ("xsum", [1.0, 0.0, 0.0])):
        _write_json(
            root / "qags" / f"qags_{which}.json",
            [
                {
                    "doc_id": i,
                    "system_id": 0,
                    "source": f"document {i}",
                    "reference": f"document {i}",
                    "system_output": f"summary {i}",
                    "scores": {"consistency": v},
                }
                for i, v in enumerate(values)
            ],
        )
    blank_kwargs = {"N": None, "keyword1": None, "num_words": None, "relation": None}
    tests: list[dict[str, Any]] = [
        {
            "key": "0",
            "prompt": "Write about cats. Use the word purr twice.",
            "instruction_id_list": ["count:keywords_multiple"],
            "kwargs": [{**blank_kwargs, "keyword1": "purr"}],
        },
        {
            "key": "1",
            "prompt": "Write 50 words. No commas.",
            "instruction_id_list": ["words:count", "punctuation:no_comma"],
            "kwargs": [{**blank_kwargs, "num_words": 50, "relation": "at least"}, dict(blank_kwargs)],
        },
        {
            "key": "2",
            "prompt": "Skipped by the model run.",
            "instruction_id_list": ["words:vowel"],
            "kwargs": [dict(blank_kwargs)],
        },
        {
            "key": "3",
            "prompt": "Generate CSV data with 7 rows.",
            "instruction_id_list": ["custom:csv_city"],
            "kwargs": [dict(blank_kwargs)],
        },
    ]
    _write_jsonl(root / "ifbench" / "IFBench_test.jsonl", tests)
    evals: list[dict[str, Any]] = [
        {  # prompt with a trailing space more than in the test file
            "follow_all_instructions": False,
            "follow_instruction_list": [False],
            "instruction_id_list": ["count:keywords_multiple"],
            "prompt": "Write about cats. Use the word purr twice. ",
            "response": "Cats purr.",
        },
        {
            "follow_all_instructions": False,
            "follow_instruction_list": [False, True],
            "instruction_id_list": ["words:count", "punctuation:no_comma"],
            "prompt": "Write 50 words. No commas.",
            "response": "Short answer",
        },
        {  # prompt mangled upstream (rows glued together), as in the real eval file
            "follow_all_instructions": True,
            "follow_instruction_list": [True],
            "instruction_id_list": ["custom:csv_city"],
            "prompt": 'Skipped by the model run."\t[...]\n3\tGenerate CSV data with 7 rows.',
            "response": "ID,City\n1,Paris",
        },
    ]
    _write_jsonl(root / "ifbench" / "eval_results_strict.jsonl", evals)
    return root


# --------------------------------------------------------------------------------------------------
# data directory resolution


def test_resolve_data_dir_order(data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env_dir = tmp_path / "env_data"
    env_dir.mkdir()
    monkeypatch.setenv("BINEVAL_DATA_DIR", str(env_dir))
    assert resolve_data_dir(data_dir) == data_dir  # explicit argument wins
    assert resolve_data_dir() == env_dir  # then the environment variable

    monkeypatch.delenv("BINEVAL_DATA_DIR")
    work = tmp_path / "project" / "main"
    work.mkdir(parents=True)
    shared = tmp_path / "project" / "shared" / "data"
    shared.mkdir(parents=True)
    monkeypatch.chdir(work)
    assert resolve_data_dir().resolve() == shared.resolve()  # then ../shared/data from the cwd


def test_resolve_data_dir_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "nowhere"
    with pytest.raises(DataNotFoundError, match="--data-dir") as info:
        resolve_data_dir(missing)
    assert str(missing) in str(info.value)
    assert isinstance(info.value, FileNotFoundError)

    monkeypatch.setenv("BINEVAL_DATA_DIR", str(missing))
    with pytest.raises(DataNotFoundError, match="BINEVAL_DATA_DIR"):
        resolve_data_dir()

    monkeypatch.delenv("BINEVAL_DATA_DIR")
    fallbacks = [(tmp_path / "a", "first fallback"), (tmp_path / "b", "second fallback")]
    monkeypatch.setattr(datasets, "_default_candidates", lambda: fallbacks)
    with pytest.raises(DataNotFoundError) as info:
        resolve_data_dir()
    message = str(info.value)
    assert str(tmp_path / "a") in message and str(tmp_path / "b") in message
    assert "--data-dir" in message and "BINEVAL_DATA_DIR" in message


def test_missing_data_file_names_it(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=r"summeval\.jsonl"):
        load_summeval(tmp_path)


# --------------------------------------------------------------------------------------------------
# benchmark loaders on fixtures


def test_load_summeval(data_dir: Path) -> None:
    items = load_summeval(data_dir)
    assert len(items) == 6
    first = items[0]
    assert first == Item(
        id="A0:S0",
        group="A0",
        source="Article 0 text.",
        output="summary 0 of article 0 .",
        human={"coherence": 1.3333333333, "consistency": 5.0, "fluency": 3.0, "relevance": 1.6666666667},
        extra={"summary_id": "S0"},
    )
    limited = load_summeval(data_dir, limit_docs=2)
    assert [i.id for i in limited] == ["A0:S0", "A0:S1", "A1:S0", "A1:S1"]
    assert load_summeval(data_dir, limit_docs=0) == []
    with pytest.raises(ValueError):
        load_summeval(data_dir, limit_docs=-1)


def test_load_summeval_reads_env_var(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BINEVAL_DATA_DIR", str(data_dir))
    assert len(load_summeval(limit_docs=1)) == 2


def test_load_topical_chat(data_dir: Path) -> None:
    items = load_topical_chat(data_dir)
    assert [i.group for i in items] == ["C0", "C0", "C1", "C1"]
    first = items[0]
    assert first.source == "Fact: fact number 0\n\nDialogue:\nhi , topic 0\nhello there"
    assert first.output == "reply of Original Ground Truth"
    assert first.extra == {
        "fact": "fact number 0",
        "dialogue": "hi , topic 0\nhello there",
        "system_id": "Original Ground Truth",
    }
    assert set(first.human) == set(datasets.TOPICAL_CHAT_DIMENSIONS)
    assert first.human["overall"] == pytest.approx(4.6666666667)
    assert len({i.id for i in items}) == 4
    assert len(load_topical_chat(data_dir, limit=3)) == 3


def test_load_qags(data_dir: Path) -> None:
    cnndm = load_qags(data_dir, "cnndm")
    assert [i.human for i in cnndm] == [
        {"consistency": 1.0},
        {"consistency": 0.3333333333333333},
        {"consistency": 0.0},
    ]
    assert (cnndm[1].id, cnndm[1].group, cnndm[1].source, cnndm[1].output) == (
        "cnndm:1",
        "1",
        "document 1",
        "summary 1",
    )
    xsum = load_qags(data_dir, which="xsum", limit=2)
    assert [i.id for i in xsum] == ["xsum:0", "xsum:1"]
    with pytest.raises(ValueError):
        load_qags(data_dir, which="bbc")  # type: ignore[arg-type]


def test_load_ifbench_joins_kwargs_per_constraint(data_dir: Path) -> None:
    items = load_ifbench(data_dir)
    assert [i.id for i in items] == ["0:0", "1:0", "1:1", "3:0"]
    first = items[0]
    assert first.source == "Write about cats. Use the word purr twice."
    assert first.output == "Cats purr."
    assert first.human == {"follows": 0.0}
    assert first.extra["instruction_id"] == "count:keywords_multiple"
    assert first.extra["kwargs"] == {"keyword1": "purr"}  # None-valued kwargs dropped
    assert first.extra["gold_pass"] is False
    assert "prompt_mismatch" not in first.extra  # only whitespace differs

    words, commas = items[1], items[2]
    assert words.extra["kwargs"] == {"num_words": 50, "relation": "at least"}
    assert commas.extra["kwargs"] == {}
    assert commas.human == {"follows": 1.0} and commas.extra["gold_pass"] is True
    assert (commas.group, commas.extra["index"], commas.extra["n_constraints"]) == ("1", 1, 2)

    mangled = items[3]  # recovered by position and constraint ids
    assert mangled.group == "3"
    assert mangled.source == "Generate CSV data with 7 rows."
    assert mangled.extra["prompt_mismatch"] is True

    assert [i.id for i in load_ifbench(data_dir, limit=2)] == ["0:0", "1:0"]  # limit counts constraints


def test_load_ifbench_unjoinable_row_keeps_its_prompt(data_dir: Path) -> None:
    _write_jsonl(
        data_dir / "ifbench" / "eval_results_strict.jsonl",
        [
            {
                "follow_all_instructions": True,
                "follow_instruction_list": [True],
                "instruction_id_list": ["detectable_format:title"],
                "prompt": "A prompt that is not in the test file.",
                "response": "<<Title>>",
            }
        ],
    )
    (item,) = load_ifbench(data_dir)
    assert item.id == "line1:0"
    assert item.source == "A prompt that is not in the test file."
    assert item.extra["kwargs"] is None


def test_every_registered_spec_loads_itself(data_dir: Path) -> None:
    sizes = {"summeval": 6, "topical-chat": 4, "qags-cnndm": 3, "qags-xsum": 3, "ifbench": 4}
    assert set(sizes) == set(DATASETS)
    for name, spec in DATASETS.items():
        items = spec.load(data_dir)
        assert len(items) == sizes[name], name
        assert all(set(spec.dimension_names) <= set(item.human) for item in items), name
    # --docs: the first N groups with all their items; --limit: the first N items
    assert [i.id for i in DATASETS["summeval"].load(data_dir, docs=2)] == ["A0:S0", "A0:S1", "A1:S0", "A1:S1"]
    assert [i.id for i in DATASETS["qags-xsum"].load(data_dir, limit=2)] == ["xsum:0", "xsum:1"]
    assert [i.human["consistency"] for i in DATASETS["qags-cnndm"].load(data_dir)] == [1.0, 1 / 3, 0.0]


def test_select_items_by_group_then_item() -> None:
    items = [Item(id=str(k), group=g, source="", output="", human={}) for k, g in enumerate("aabbbc")]
    assert [i.id for i in select_items(items, docs=2)] == ["0", "1", "2", "3", "4"]
    assert [i.id for i in select_items(items, docs=2, limit=3)] == ["0", "1", "2"]
    assert select_items(items, limit=0) == []
    with pytest.raises(ValueError, match="docs must be >= 0"):
        select_items(items, docs=-1)


# --------------------------------------------------------------------------------------------------
# custom data


def test_load_custom_jsonl_with_dotted_keys(tmp_path: Path) -> None:
    path = tmp_path / "custom.jsonl"
    path.write_text(
        json.dumps({"doc": {"text": "Source A"}, "out": "Output A", "scores": {"consistency": 4}, "g": "x"})
        + "\n\n"  # blank line: skipped, but line numbers stay those of the file
        + json.dumps(
            {"doc": {"text": "Source B"}, "out": "Output B", "scores": {"consistency": "2.5"}, "g": 7}
        )
        + "\n",
        encoding="utf-8",
    )
    items = load_custom(path, "doc.text", "out", ["scores.consistency"], group_key="g")
    assert [(i.id, i.group, i.source, i.output) for i in items] == [
        ("1", "x", "Source A", "Output A"),
        ("3", "7", "Source B", "Output B"),
    ]
    assert [i.human for i in items] == [{"scores.consistency": 4.0}, {"scores.consistency": 2.5}]
    assert load_custom(path, "doc.text", "out", ["scores.consistency"], limit=1)[0].group == "all"


def test_load_custom_missing_key_names_the_line(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "custom.jsonl",
        [
            {"src": "a", "out": "b", "scores": {"consistency": 1}},
            {"src": "a", "out": "b", "scores": {"relevance": 1}},
        ],
    )
    with pytest.raises(ValueError, match=r"line 2: missing key 'scores\.consistency'"):
        load_custom(path, "src", "out", ["scores.consistency"])
    with pytest.raises(ValueError, match="line 1: missing key 'output'"):
        load_custom(path, "src", "output", ["scores.consistency"])


def test_load_custom_bad_values(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "custom.jsonl", [{"src": "a", "out": "b", "score": "high"}])
    with pytest.raises(ValueError, match="line 1: score 'score' is not a number"):
        load_custom(path, "src", "out", ["score"])
    bad_json = tmp_path / "bad.jsonl"
    bad_json.write_text('{"src": "a", "out": "b", "score": 1}\n{not json\n', encoding="utf-8")
    with pytest.raises(ValueError, match="line 2: invalid JSON"):
        load_custom(bad_json, "src", "out", ["score"])
    with pytest.raises(FileNotFoundError):
        load_custom(tmp_path / "absent.jsonl", "src", "out", ["score"])


def test_load_custom_json_list(tmp_path: Path) -> None:
    path = _write_json(
        tmp_path / "custom.json",
        [
            {"input": "q1", "answer": "a1", "human": [0.5, 1.0]},
            {"input": "q2", "answer": "a2", "human": [0.0, 0.0], "dotted.key": 3},
        ],
    )
    items = load_custom(path, "input", "answer", ["human.1"])
    assert [(i.id, i.human) for i in items] == [("1", {"human.1": 1.0}), ("2", {"human.1": 0.0})]
    with pytest.raises(ValueError, match=r"item 1: missing key 'dotted\.key'"):
        load_custom(path, "input", "answer", ["dotted.key"])
    literal = _write_json(tmp_path / "literal.json", [{"a.b": "src", "out": "o", "s.t": 2}])
    (item,) = load_custom(literal, "a.b", "out", ["s.t"])  # keys that contain a dot are found first
    assert (item.source, item.human) == ("src", {"s.t": 2.0})
    _write_json(tmp_path / "object.json", {"not": "a list"})
    with pytest.raises(ValueError, match="expected a JSON list"):
        load_custom(tmp_path / "object.json", "a", "b", ["c"])


# --------------------------------------------------------------------------------------------------
# real data (read in place from the shared data directory; skipped when it is absent)


def _real_data_dir() -> Path:
    try:
        return resolve_data_dir()
    except DataNotFoundError as exc:
        pytest.skip(f"shared benchmark data not available (set BINEVAL_DATA_DIR to run): {exc}")


def test_real_summeval() -> None:
    items = load_summeval(_real_data_dir(), limit_docs=2)
    assert len(items) == 32
    assert [i.group for i in items[::16]] == ["A0", "A1"]
    assert len({i.id for i in items}) == 32
    for item in items:
        assert set(item.human) == set(datasets.SUMMEVAL_DIMENSIONS)
        assert all(1.0 <= v <= 5.0 for v in item.human.values())
        assert item.source and item.output


def test_real_topical_chat() -> None:
    items = load_topical_chat(_real_data_dir(), limit=12)
    assert len(items) == 12
    assert [i.group for i in items] == ["C0"] * 6 + ["C1"] * 6
    for item in items:
        assert set(item.human) == set(datasets.TOPICAL_CHAT_DIMENSIONS)
        assert item.source.startswith("Fact: ") and "\n\nDialogue:\n" in item.source
        assert item.extra["fact"] and item.extra["system_id"]


@pytest.mark.parametrize(("which", "n_total"), [("cnndm", 235), ("xsum", 239)])
def test_real_qags(which: str, n_total: int) -> None:
    data_dir = _real_data_dir()
    items = load_qags(data_dir, which, limit=5)  # type: ignore[arg-type]
    assert len(items) == 5
    assert all(set(i.human) == {"consistency"} and 0.0 <= i.human["consistency"] <= 1.0 for i in items)
    assert len(load_qags(data_dir, which)) == n_total  # type: ignore[arg-type]


def test_real_ifbench() -> None:
    data_dir = _real_data_dir()
    items = load_ifbench(data_dir, limit=10)
    assert len(items) == 10
    for item in items:
        assert item.human["follows"] == (1.0 if item.extra["gold_pass"] else 0.0)
        assert isinstance(item.extra["instruction_id"], str) and ":" in item.extra["instruction_id"]
        assert isinstance(item.extra["kwargs"], dict)
    everything = load_ifbench(data_dir)
    assert len(everything) == 335  # 294 evaluated prompts, 253 with one constraint and 41 with two
    assert all(i.extra["kwargs"] is not None for i in everything)  # every row joined to IFBench_test
