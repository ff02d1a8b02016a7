"""``bineval bench`` with a scripted fake judge: each method's scoring path, the IFBench classification,
the question audit, cost accounting, resumption from the cache, and the command line.

The data are tiny fixture files in the real formats, written per test; no model weights are needed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import re
import shlex
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.bench import stats
from pytest_bineval.bench.cli import _methods, config_from_args
from pytest_bineval.bench.datasets import Item, load_custom, resolve_data_dir
from pytest_bineval.bench.methods import (
    ScoreClient,
    expected_score,
    geval_schema,
    overlap_score,
)
from pytest_bineval.bench.report import model_slug
from pytest_bineval.bench.runner import BenchConfig, load_items
from pytest_bineval.bench.specs import DATASETS, DatasetSpec, Dimension, Scale, ifbench_question
from pytest_bineval.cli import build_parser, main
from pytest_bineval.engine import Engine, Settings
from pytest_bineval.llm.cache import ResponseCache
from pytest_bineval.llm.client import ModelSettings
from pytest_bineval.settings import SETTING_SPECS
from pytest_bineval.testing import Request, ScriptedModel

_ids = itertools.count(1)


@pytest.fixture
def judge() -> ScriptedModel:
    """A scripted fake judge under its own provider name (no script leaks between tests)."""
    return ScriptedModel(provider=f"benchfake{next(_ids)}").register()


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def _json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")


# Human consistency per (article, summary); the summary text carries its "quality" so the fake can read it.
SUMMEVAL_HUMAN = {0: [1.0, 3.0, 5.0, 4.0], 1: [2.0, 5.0, 1.0, 3.0], 2: [3.0, 3.0, 3.0, 3.0]}


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    _jsonl(root / "summeval" / "summeval.jsonl", [
        {"article_id": f"A{a}", "summary_id": f"S{s}",
         "article": f"the mayor of town {a} opened a new bridge on monday .",
         "summary": f"quality {int(h)} the mayor opened a bridge" + " extra" * (5 - int(h)),
         "coherence": h, "fluency": 6.0 - h, "consistency": h, "relevance": 3.0}
        for a, hs in SUMMEVAL_HUMAN.items() for s, h in enumerate(hs)
    ])
    _json(root / "topical_chat" / "topical_chat.json", [
        {"source": f"hi , topic {c} \n hello there \n\n", "system_id": f"sys{k}",
         "system_output": f"quality {k + 1} reply about the fact", "context": f"fact number {c}",
         "scores": {"understandability": 1.0, "naturalness": float(k % 3 + 1), "coherence": float(k % 3 + 1),
                    "engagingness": float(k % 3 + 1), "groundedness": float(k % 2), "overall": 3.0}}
        for c in range(2) for k in range(3)
    ])
    for which, values in (("cnndm", [1.0, 0.5, 0.0, 1.0]), ("xsum", [1.0, 0.0, 0.0, 1.0])):
        _json(root / "qags" / f"qags_{which}.json", [
            {"doc_id": i, "system_id": 0, "source": "the cat sat on the mat", "reference": "",
             "system_output": "the cat sat" if v == 1.0 else "a dog flew to paris", "scores": {"consistency": v}}
            for i, v in enumerate(values)
        ])
    blank = {"N": None, "keyword1": None}
    tests = [
        {"key": "0", "prompt": "Write about cats. Use the word purr twice.",
         "instruction_id_list": ["count:keywords_multiple"], "kwargs": [{**blank, "keyword1": "purr"}]},
        {"key": "1", "prompt": "Write 50 words. No commas.",
         "instruction_id_list": ["words:count", "punctuation:no_comma"], "kwargs": [{**blank, "N": 50}, blank]},
        {"key": "2", "prompt": "Answer in French.", "instruction_id_list": ["language:french"], "kwargs": [blank]},
    ]
    _jsonl(root / "ifbench" / "IFBench_test.jsonl", tests)
    _jsonl(root / "ifbench" / "eval_results_strict.jsonl", [
        {"follow_all_instructions": False, "follow_instruction_list": [False],
         "instruction_id_list": ["count:keywords_multiple"], "prompt": tests[0]["prompt"], "response": "Cats purr."},
        {"follow_all_instructions": False, "follow_instruction_list": [False, True],
         "instruction_id_list": ["words:count", "punctuation:no_comma"], "prompt": tests[1]["prompt"],
         "response": "Short answer"},
        {"follow_all_instructions": True, "follow_instruction_list": [True],
         "instruction_id_list": ["language:french"], "prompt": tests[2]["prompt"], "response": "Bonjour"},
    ])
    return root


def _quality(req: Request) -> int:
    m = re.search(r"quality (\d)", req.user)
    return int(m.group(1)) if m else 3


def _run(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, Any], str]:
    out = tmp_path / "out"
    code = main(["bench", *args, "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--quiet",
                 "--bootstrap", "50"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    files = sorted(out.glob("*.json"))
    assert len(files) == 1
    assert files[0].with_suffix(".md").read_text(encoding="utf-8") == printed
    return json.loads(files[0].read_text(encoding="utf-8")), printed


# --------------------------------------------------------------------------------------------------
# pure helpers


def test_overlap_score_hand_computed() -> None:
    # output words: the, cat, sat, on, a, hat -> 4 of 6 occur in the source
    assert overlap_score("The cat sat on a HAT.", "the cat sat on the mat") == pytest.approx(4 / 6)
    assert overlap_score("...", "anything") is None


def test_expected_score_weights_the_score_token() -> None:
    logprobs = {"content": [
        {"token": '{"score":', "logprob": 0.0, "top_logprobs": []},
        {"token": " 4", "logprob": math.log(0.5), "top_logprobs": [
            {"token": " 4", "logprob": math.log(0.5)},
            {"token": "3", "logprob": math.log(0.3)},
            {"token": "5", "logprob": math.log(0.1)},
            {"token": "x", "logprob": math.log(0.05)},   # not a score: ignored
            {"token": "9", "logprob": math.log(0.05)},   # outside the scale: ignored
        ]},
        {"token": "}", "logprob": 0.0, "top_logprobs": []},
    ]}
    expected = (4 * 0.5 + 3 * 0.3 + 5 * 0.1) / 0.9
    assert expected_score(logprobs, range(1, 6)) == pytest.approx(expected)
    # A blank token between the colon and the digit is skipped; a digit forced by a grammar (absent from
    # the model's top alternatives) still counts with its own probability.
    forced = {"content": [
        {"token": '{ "score":', "logprob": 0.0, "top_logprobs": []},
        {"token": " ", "logprob": 0.0, "top_logprobs": [{"token": " ", "logprob": 0.0}]},
        {"token": "1", "logprob": math.log(0.01), "top_logprobs": [
            {"token": "5", "logprob": math.log(0.03)},
            {"token": "\n", "logprob": math.log(0.9)},
        ]},
    ]}
    assert expected_score(forced, range(1, 6)) == pytest.approx((1 * 0.01 + 5 * 0.03) / 0.04)
    assert expected_score(None, range(1, 6)) is None
    assert expected_score({"content": [{"token": '{"answer": "yes"}', "logprob": 0.0}]}, range(1, 6)) is None


def test_ifbench_question_is_readable() -> None:
    q = ifbench_question("count:keywords_multiple", {"keyword1": "kaleidoscope", "keyword2": "nebula"})
    assert q == ('Does the response follow the prompt\'s instruction on "count: keywords multiple" '
                 "(keyword1: kaleidoscope, keyword2: nebula)?")
    assert ifbench_question("punctuation:no_comma", {}) == (
        'Does the response follow the prompt\'s instruction on "punctuation: no comma"?')


def test_method_selection_and_slug() -> None:
    assert _methods(None) == ["bineval", "bineval-turns", "geval", "unieval", "likelihood", "overlap"]
    assert _methods(["overlap,geval", "geval"]) == ["overlap", "geval"]
    with pytest.raises(ValueError, match="unknown method"):
        _methods(["bleu"])
    assert model_slug("openai/gpt-4o-mini") == "openai-gpt-4o-mini"


def test_scale_mapping() -> None:
    assert Scale(0, 1).map_to(0.25, Scale(1, 5)) == 2.0
    assert Scale(1, 3).map_to(3, Scale(0, 1)) == 1.0


# --------------------------------------------------------------------------------------------------
# data selection


def test_limit_and_docs_select_items(data_dir: Path) -> None:
    settings = Settings(model="x/y", cache="off")
    spec, items = load_items(BenchConfig("summeval", settings, docs=2, data_dir=str(data_dir)))
    assert [it.group for it in items] == ["A0"] * 4 + ["A1"] * 4
    assert spec.dimension_names == ["coherence", "consistency", "fluency", "relevance"]
    _, items = load_items(BenchConfig("summeval", settings, limit=5, data_dir=str(data_dir)))
    assert len(items) == 5
    spec, items = load_items(BenchConfig("topical-chat", settings, docs=1, data_dir=str(data_dir),
                                         dimensions=["groundedness"]))
    assert len(items) == 3 and spec.dimension_names == ["groundedness"]
    with pytest.raises(ValueError, match="no dimension"):
        load_items(BenchConfig("summeval", settings, data_dir=str(data_dir), dimensions=["naturalness"]))


def test_engine_options_are_the_settings_options() -> None:
    # One definition of the engine options: every Settings option, with the Settings defaults.
    dests = {a.dest for a in _bench_parser()._actions}
    assert {spec.attr for spec in SETTING_SPECS} <= dests
    assert config_from_args(build_parser().parse_args(["bench", "summeval"])).settings == Settings()
    given = {"model": "a/judge", "checklist-model": "b/writer", "api-base": "http://127.0.0.1:9/v1",
             "cache": "read-only", "cache-dir": "cache dir", "concurrency": "3", "timeout": "5", "retries": "0",
             "temperature": "0.5", "judge-prompt": "my judge.md"}
    argv = ["bench", "qags-xsum", "--limit", "3"] + [x for name, value in given.items() for x in (f"--{name}", value)]
    config = config_from_args(build_parser().parse_args(argv))
    assert config.settings == Settings(model="a/judge", checklist_model="b/writer", api_base="http://127.0.0.1:9/v1",
                                       cache="read-only", cache_dir="cache dir", concurrency=3, timeout=5.0,
                                       retries=0, temperature=0.5, judge_prompt="my judge.md")
    assert config.model == "a/judge"
    # the reproducing command names every engine option that was given, and reparses to the same settings
    command = shlex.split(config.command)
    assert command[:3] == ["bineval", "bench", "qags-xsum"]
    assert config_from_args(build_parser().parse_args(command[1:])).settings == config.settings
    assert config_from_args(build_parser().parse_args(["bench", "summeval"])).command == "bineval bench summeval"


def _bench_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["bench"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("option", "value", "message"), [
    ("--concurrency", "0", "must be >= 1"), ("--cache", "sometimes", "invalid choice"),
    ("--temperature", "3", "within [0, 2]"), ("--timeout", "-1", "within (0, 3600]"),
])
def test_bad_engine_option_is_an_argparse_error(option: str, value: str, message: str,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "summeval", option, value])
    assert message in capsys.readouterr().err


def test_limit_and_docs_are_exclusive(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "summeval", "--limit", "2", "--docs", "1", "--data-dir", str(data_dir)])
    assert "not allowed with" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------------
# each method's scoring path, end to end through the command


def test_geval_and_unieval_scores_follow_the_script(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    judge.rules = {
        "geval_score": lambda req: json.dumps({"score": _quality(req)}),
        "unieval_answer": lambda req: json.dumps({"answer": "yes" if _quality(req) >= 3 else "no"}),
    }
    result, printed = _run(["summeval", "--model", judge.model, "--data-dir", str(data_dir),
                            "--method", "geval,unieval,likelihood,overlap"], tmp_path, capsys)
    methods = result["methods"]
    consistency = methods["geval"]["variants"]["geval-int"]["dimensions"]["consistency"]
    # The geval score equals the human score: rho = tau = r = 1 in A0 and A1; A2 is constant (skipped).
    assert consistency["correlation"]["spearman"] == pytest.approx(1.0)
    assert consistency["correlation"]["n_groups"] == 2 and consistency["correlation"]["n_skipped"] == 1
    # Without logprobs for the score, the weighted variant falls back to the integer.
    weighted = methods["geval"]["variants"]["geval"]["dimensions"]["consistency"]["correlation"]
    assert weighted["spearman"] == pytest.approx(1.0)
    # The fake gives P(yes) = 0.9 for yes and 0.1 for no; hand-computed per article.
    uni = methods["unieval"]["variants"]["unieval"]["dimensions"]["consistency"]["correlation"]
    by_article = {a: stats.summary_level({"g": [(0.9 if h >= 3 else 0.1, h) for h in hs]})
                  for a, hs in SUMMEVAL_HUMAN.items() if a != 2}
    assert uni["spearman"] == pytest.approx(sum(r.spearman or 0 for r in by_article.values()) / 2)
    assert methods["likelihood"]["status"] == "n/a" and "prompt logprobs" in methods["likelihood"]["reason"]
    assert methods["overlap"]["status"] == "ok"
    # distribution: geval-int on 1-5 equals the human distribution
    dist = consistency["distribution"]
    assert dist["metric_top_share"] == pytest.approx(dist["human_top_share"])
    assert dist["std_ratio"] == pytest.approx(1.0)
    # cost: one geval call per item and dimension, no cache hits on the first run
    assert methods["geval"]["cost"]["llm_calls"] == 12 * 4
    assert methods["geval"]["cost"]["cache_hits"] == 0
    assert "| geval-int | consistency | +1.000" in printed
    assert "| likelihood | all | n/a" in printed
    assert result["command"].startswith("bineval bench summeval --model ")


def test_rerun_is_served_from_the_cache(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    judge.rules = {"unieval_answer": lambda req: json.dumps({"answer": "yes"})}
    args = ["qags-cnndm", "--model", judge.model, "--data-dir", str(data_dir), "--method", "unieval"]
    first, _ = _run(args, tmp_path, capsys)
    calls = len(judge.requests)
    for path in (tmp_path / "out").glob("*"):
        path.unlink()
    second, _ = _run(args, tmp_path, capsys)
    assert len(judge.requests) == calls  # nothing asked again
    assert first["methods"]["unieval"]["cost"]["llm_calls"] == 4
    assert second["methods"]["unieval"]["cost"]["llm_calls"] == 0
    assert second["methods"]["unieval"]["cost"]["cache_hits"] == 4
    assert first["items"] == second["items"]


def test_bineval_scores_and_question_audit(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    judge.questions_per_dimension = 3

    def answer(req: Request) -> str:
        q = _quality(req)
        if req.question.endswith("check 3?"):  # independent of quality: yes for even-length outputs
            return "yes" if len(req.output) % 2 == 0 else "no"
        return "yes" if q >= 3 else "no"  # checks 1 and 2 always agree -> phi = 1, redundant

    judge.answers = answer
    result, printed = _run(["summeval", "--model", judge.model, "--data-dir", str(data_dir),
                            "--method", "bineval", "--dimension", "consistency"], tmp_path, capsys)
    checklist = result["checklist"]
    assert [q["id"] for q in checklist["questions"]] == ["consistency-1", "consistency-2", "consistency-3"]
    shares = [it["scores"]["bineval"]["consistency"] for it in result["items"]]
    assert all(s in (0.0, 1 / 3, 2 / 3, 1.0) for s in shares)
    audit = result["audit"]["consistency"]
    rates = {q["id"]: q["yes_rate"] for q in audit["questions"]}
    n_yes = sum(h >= 3 for hs in SUMMEVAL_HUMAN.values() for h in hs)
    assert rates["consistency-1"] == pytest.approx(n_yes / 12)
    assert audit["redundant_pairs"] == [{"a": "consistency-1", "b": "consistency-2", "phi": pytest.approx(1.0)}]
    assert "consistency-1~consistency-2 (+1.00)" in printed
    # P(yes)-mean variant: the fake gives 0.9 / 0.1
    pyes = [it["scores"]["bineval-pyes"]["consistency"] for it in result["items"]]
    for share, p in zip(shares, pyes, strict=True):
        assert p == pytest.approx(0.1 + 0.8 * share)
    # checklist generation is counted as setup cost: 1 requirements + 1 questions call
    assert result["methods"]["bineval"]["cost"]["setup"]["llm_calls"] == 2
    # one answer request per question, an explanation request per "no" (the default explain mode, failing)
    n_no = round(sum((1 - share) * 3 for share in shares))
    assert result["methods"]["bineval"]["cost"]["llm_calls"] == 2 + 12 * 3 + n_no


def test_ifbench_classification_against_the_verifier(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # gold: keywords fail, words:count fail, no_comma pass, french pass
    # bineval says no to "keywords" and "no comma", yes to the others
    judge.answers = lambda req: "no" if ("keywords" in req.question or "no comma" in req.question) else "yes"
    judge.rules = {"unieval_answer": lambda req: json.dumps({"answer": "yes"})}
    result, printed = _run(["ifbench", "--model", judge.model, "--data-dir", str(data_dir)], tmp_path, capsys)
    c = result["methods"]["bineval"]["classification"]
    # predicted no: keywords (gold fail: TP), no_comma (gold pass: FP); missed: words:count (FN); french TN
    assert (c["tp"], c["fp"], c["fn"], c["tn"]) == (1, 1, 1, 1)
    assert c["accuracy"] == 0.5 and c["precision"] == 0.5 and c["recall"] == 0.5
    assert c["always_yes"]["accuracy"] == 0.5 and c["always_yes"]["recall"] == 0.0
    u = result["methods"]["unieval"]["classification"]
    assert u["n_pred_no"] == 0 and u["accuracy"] == 0.5
    assert result["methods"]["geval"]["status"] == "n/a"
    assert "| always yes | 0.500 |" in printed
    questions = [r.question for r in judge.requests if r.kind == "verdict"]
    assert 'Does the response follow the prompt\'s instruction on "count: keywords multiple" (keyword1: purr)?' \
        in questions


def test_qags_xsum_reports_auroc(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    result, printed = _run(["qags-xsum", "--model", judge.model, "--data-dir", str(data_dir), "--method", "overlap"],
                           tmp_path, capsys)
    entry = result["methods"]["overlap"]["variants"]["overlap"]["dimensions"]["consistency"]
    # consistent summaries ("the cat sat") overlap fully, the others not at all
    assert entry["auroc"] == 1.0
    assert entry["correlation"]["spearman"] == pytest.approx(1.0)
    assert "AUROC against the binary human labels" in printed


def test_custom_dataset(judge: ScriptedModel, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "judged.jsonl"
    _jsonl(data, [
        {"input": {"q": f"question {i}"}, "answer": f"quality {q} answer", "human": {"politeness": q},
         "topic": f"t{i % 2}"}
        for i, q in enumerate([1, 2, 3, 4, 5, 2])
    ])
    judge.rules = {"geval_score": lambda req: json.dumps({"score": _quality(req)})}
    args = ["custom", "--model", judge.model, "--data", str(data), "--source-key", "input", "--output-key",
            "answer", "--score-key", "human.politeness", "--task", "Answer politely.", "--method", "geval",
            "--dimension", "politeness=The answer is polite."]
    result, _ = _run(args, tmp_path, capsys)
    assert result["protocol"] == "pooled"
    entry = result["methods"]["geval"]["variants"]["geval-int"]["dimensions"]["human.politeness"]
    assert entry["correlation"]["spearman"] == pytest.approx(1.0)
    prompts = [r.user for r in judge.requests if r.kind == "geval_score"]
    assert "The answer is polite." in prompts[0]
    for path in (tmp_path / "out").glob("*"):
        path.unlink()
    grouped, _ = _run([*args, "--group-key", "topic"], tmp_path, capsys)
    assert grouped["protocol"] == "summary-level"
    assert grouped["subset"]["n_groups"] == 2


def test_custom_needs_its_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "custom", "--data", "x.jsonl"]) == 2
    assert "needs --source-key" in capsys.readouterr().err


def test_unparseable_judge_replies_become_missing_scores(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    judge.rules = {"geval_score": lambda req: "I think it is good."}
    result, _ = _run(["qags-cnndm", "--model", judge.model, "--data-dir", str(data_dir), "--method", "geval"],
                     tmp_path, capsys)
    cost = result["methods"]["geval"]["cost"]
    assert cost["errors"] == 4 and "unparseable" in cost["first_error"]
    assert all(it["scores"]["geval"]["consistency"] is None for it in result["items"])


# --------------------------------------------------------------------------------------------------
# probability weighting through the real client path (litellm -> provider -> cache)


def _score_handler() -> Any:
    from litellm import CustomLLM, ModelResponse

    def response() -> Any:
        return ModelResponse(
            model="wprov/judge",
            choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": '{"score": 4}'},
                      "logprobs": {"content": [
                          {"token": '{"score": ', "logprob": 0.0, "bytes": None, "top_logprobs": []},
                          {"token": "4", "logprob": math.log(0.5), "bytes": None, "top_logprobs": [
                              {"token": "4", "logprob": math.log(0.5), "bytes": None},
                              {"token": "3", "logprob": math.log(0.3), "bytes": None},
                              {"token": "5", "logprob": math.log(0.2), "bytes": None}]},
                          {"token": "}", "logprob": 0.0, "bytes": None, "top_logprobs": []}]}}],
            usage={"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13},
        )

    class Handler(CustomLLM):  # type: ignore[misc]
        calls = 0

        def completion(self, *args: Any, **kwargs: Any) -> Any:
            Handler.calls += 1
            return response()

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            Handler.calls += 1
            return response()

    return Handler()


@pytest.mark.asyncio
async def test_geval_weighting_survives_the_cache(tmp_path: Path) -> None:
    from pytest_bineval.bench.methods import GEVAL_SCHEMA_NAME, _geval_validator
    from pytest_bineval.llm.providers import register_provider

    handler = _score_handler()
    register_provider("wprov", handler)
    cache = ResponseCache(tmp_path / "cache")
    client = ScoreClient(ModelSettings(model="wprov/judge"), cache)
    scale = Scale(1, 5)
    kwargs: dict[str, Any] = {"schema_name": GEVAL_SCHEMA_NAME, "schema": geval_schema(scale),
                              "validate": _geval_validator(scale), "max_tokens": 8, "want_p_yes": True}
    messages = [{"role": "user", "content": "rate it"}]
    first = await client.complete_json(messages, **kwargs)
    assert first.value == (4, pytest.approx(4 * 0.5 + 3 * 0.3 + 5 * 0.2))
    second = await client.complete_json(messages, **kwargs)
    assert second.cached and second.value == first.value
    assert type(handler).calls == 1
    cache.close()


def test_engine_client_settings_are_reused() -> None:
    engine = Engine(Settings(model="x/y", cache="off", temperature=0.0))
    base = engine.client("x/y")
    client = ScoreClient(base.settings, base.cache)
    assert client.model == "x/y" and client.cache is None


def test_specs_cover_the_datasets() -> None:
    assert DATASETS["summeval"].protocol == "summary-level"
    assert DATASETS["topical-chat"].dimension_names == ["naturalness", "coherence", "engagingness", "groundedness"]
    assert DATASETS["qags-xsum"].binary_dimension == "consistency"
    assert DATASETS["ifbench"].methods == ("bineval", "unieval", "overlap")


def test_a_dataset_added_to_the_registry_is_a_choice_and_runs(judge: ScriptedModel, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # The registry is the only list of datasets: a new spec with its loader is accepted by the command
    # line and run end to end, with nothing else to change.
    root = tmp_path / "data"
    _jsonl(root / "toy.jsonl", [{"q": f"topic {i % 2}: the cat sat on the mat", "a": a, "h": h, "g": f"t{i % 2}"}
                                for i, (a, h) in enumerate([("the cat sat", 5), ("a dog flew", 1),
                                                            ("the mat rug", 4), ("paris mat", 2)])])

    def load_toy(data_dir: str | Path | None) -> list[Item]:
        return load_custom(resolve_data_dir(data_dir) / "toy.jsonl", "q", "a", ["h"], group_key="g")

    dim = Dimension("h", "The reply repeats the input.", Scale(1, 5), Scale(1, 5), (), "Does it repeat the input?")
    toy = DatasetSpec("toy", "Repeat the input.", (dim,), "summary-level", "Input", "Reply", load_toy,
                      methods=("unieval", "overlap"))
    with pytest.raises(SystemExit):
        main(["bench", "toy", "--data-dir", str(root)])
    assert "invalid choice: 'toy'" in capsys.readouterr().err
    monkeypatch.setitem(DATASETS, "toy", toy)
    judge.rules = {"unieval_answer": lambda req: json.dumps({"answer": "yes"})}
    result, printed = _run(["toy", "--model", judge.model, "--data-dir", str(root), "--method", "all"],
                           tmp_path, capsys)
    assert (result["dataset"], result["task"], result["protocol"]) == ("toy", "Repeat the input.", "summary-level")
    assert result["subset"] == {"limit": None, "docs": None, "n_items": 4, "n_groups": 2, "dimensions": ["h"]}
    methods = result["methods"]
    assert {name: entry["status"] for name, entry in methods.items()} == {
        "bineval": "n/a", "bineval-turns": "n/a", "geval": "n/a", "unieval": "ok", "likelihood": "n/a", "overlap": "ok"}
    assert methods["unieval"]["cost"]["llm_calls"] == 4
    overlap = methods["overlap"]["variants"]["overlap"]["dimensions"]["h"]["correlation"]
    assert overlap["spearman"] == pytest.approx(1.0) and overlap["n_groups"] == 2
    assert (tmp_path / "out" / f"toy-{model_slug(judge.model)}.md").read_text(encoding="utf-8") == printed


def test_checklist_falls_back_to_one_dimension_at_a_time(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # A weak model writes the same question for every dimension: the joint generation rejects the
    # duplicates, so the benchmark generates each dimension on its own and keeps them.
    same = {"questions": [{"requirement": "r", "question": "Is the response good?", "no_example": "bad"}]}
    judge.rules = {"questions": lambda req: json.dumps(same)}
    result, _ = _run(["summeval", "--model", judge.model, "--data-dir", str(data_dir), "--method", "bineval",
                      "--dimension", "coherence", "--dimension", "consistency"], tmp_path, capsys)
    notes = result["methods"]["bineval"]["notes"]
    assert notes["checklist source"].startswith("generated by the judge model one dimension at a time")
    assert [(q["id"], q["text"]) for q in result["checklist"]["questions"]] == [
        ("coherence-1", "Is the response good?"), ("consistency-1", "Is the response good?")]
    assert result["methods"]["bineval"]["status"] == "ok"


def test_engine_options_reach_the_model_calls(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # --checklist-model writes the bineval checklist, the judge answers; --temperature reaches every call.
    writer = ScriptedModel(provider=f"benchfake{next(_ids)}").register()
    judge.rules = {"unieval_answer": lambda req: json.dumps({"answer": "yes"})}
    result, _ = _run(["qags-cnndm", "--model", judge.model, "--checklist-model", writer.model, "--temperature", "0.5",
                      "--data-dir", str(data_dir), "--method", "bineval,unieval"], tmp_path, capsys)
    assert (writer.calls_of("requirements"), writer.calls_of("questions")) == (1, 1)
    assert writer.calls_of("verdict") == 0 and writer.calls_of("unieval_answer") == 0
    assert (judge.calls_of("requirements"), judge.calls_of("questions")) == (0, 0)
    assert judge.calls_of("verdict") == 4 * 2 and judge.calls_of("unieval_answer") == 4
    assert result["methods"]["bineval"]["notes"]["checklist source"] == (
        f"generated by {writer.model} (--checklist-model)")
    assert result["checklist"]["model"] == writer.model
    assert {r.params.get("temperature") for r in [*judge.requests, *writer.requests]} == {0.5}
    assert f"--checklist-model {writer.model} " in result["command"] and "--temperature 0.5" in result["command"]


def test_failed_checklist_generation_is_reported_not_fatal(judge: ScriptedModel, data_dir: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    judge.rules = {"requirements": lambda req: "no json here"}
    result, printed = _run(["qags-cnndm", "--model", judge.model, "--data-dir", str(data_dir),
                            "--method", "bineval,overlap"], tmp_path, capsys)
    assert result["methods"]["bineval"]["status"] == "error"
    assert "ChecklistGenerationError" in result["methods"]["bineval"]["reason"]
    assert result["methods"]["overlap"]["status"] == "ok"
    assert "| bineval | all | n/a" in printed


# --------------------------------------------------------------------------------------------------
# bineval perf: the same Settings options (bar the cache, which perf manages itself)


def test_perf_engine_options_come_from_settings(judge: ScriptedModel, data_dir: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    data = data_dir / "summeval" / "summeval.jsonl"
    judge.answers = {"Does the response avoid claims that contradict the input?": "no"}  # q1 no, q2 yes
    assert main(["perf", "--model", judge.model, "--temperature", "0.25", "--retries", "0", "--data", str(data),
                 "--questions", "2", "--repeats", "2", "--no-cold", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model"] == judge.model and result["questions"] == 2
    rows = {r["variant"][:3]: r for r in result["rows"]}
    assert set(rows) == {"(a0", "(a)", "(b)", "(c)", "(e)"}  # no physical limit for a model that is not embedded
    # (a0): the request shape before answer-first, one JSON verdict (with explanation) per question
    assert (rows["(a0"]["llm_calls_per_eval"], rows["(a0"]["no_per_eval"]) == (2, 1)
    # per evaluation: an answer request per question, an explanation request per explained answer
    assert (rows["(a)"]["llm_calls_per_eval"], rows["(a)"]["explained_per_eval"]) == (4, 2)
    assert (rows["(b)"]["llm_calls_per_eval"], rows["(b)"]["explained_per_eval"]) == (3, 1)
    assert (rows["(c)"]["llm_calls_per_eval"], rows["(c)"]["explained_per_eval"]) == (2, 0)
    assert rows["(e)"]["cache_hits_per_eval"] == 2 and rows["(e)"]["llm_calls_per_eval"] == 0
    # warm-up (all) + per mode (and for (a0)) a warm-up and 2 evaluations + filling the cache for (e) (failing)
    assert (judge.calls_of("verdict"), judge.calls_of("explanation")) == (2 + 4 * 6 + 4, 2 + 6 + 3 + 0 + 2)
    assert {r.params.get("temperature") for r in judge.requests} == {0.25}
    for option in ("--cache", "--cache-dir", "--checklist-model", "--explain"):  # perf's own cache, every mode
        with pytest.raises(SystemExit):
            main(["perf", option, "x"])
        assert "unrecognized arguments" in capsys.readouterr().err


def test_perf_judges_the_article_asked_for_and_names_a_missing_one(judge: ScriptedModel, data_dir: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    data = data_dir / "summeval" / "summeval.jsonl"
    assert main(["perf", "--model", judge.model, "--data", str(data), "--article", "1",
                 "--questions", "1", "--repeats", "1", "--no-cold", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["article"] == 1
    asked = [str(r.messages) for r in judge.requests]
    assert asked and all("town 1 opened" in m and "town 0 opened" not in m for m in asked)
    articles = len(SUMMEVAL_HUMAN)
    assert main(["perf", "--model", judge.model, "--data", str(data), "--article", str(articles), "--no-cold"]) == 2
    assert f"no article {articles} (it has articles 0 to {articles - 1})" in capsys.readouterr().err
    assert main(["perf", "--model", judge.model, "--data", str(data), "--repeats", "99", "--no-cold"]) == 2
    err = capsys.readouterr().err
    assert "article 0 has 4 summaries, 100 are needed" in err


# --------------------------------------------------------------------------------------------------
# dialogue turn by turn


def test_topical_chat_turn_by_turn_beside_the_whole_reply(data_dir: Path, judge: ScriptedModel, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """bineval-turns: the dialogue as a conversation (the reply its last assistant turn, the fact its source), every
    question asked of each assistant turn, the item scored on the reply's turn; the same checklist and judge as the
    whole-reply run; the history's turns come from the reply cache after a context's first reply."""
    seen: list[tuple[str | None, bool]] = []

    def answer(req: Request) -> str:
        turn = re.search(r"\(Answer about turn (\d+),", req.user)
        seen.append((turn.group(1) if turn else None, "reply about the fact" in req.output))
        if turn and turn.group(1) == "1":
            return "no"  # the history's assistant turn: never in an item's score
        return "yes" if _quality(req) >= 2 else "no"

    judge.answers = answer  # type: ignore[assignment]
    checklist = tmp_path / "checklist.json"
    checklist.write_text(json.dumps({"task": "t", "dimensions": {"groundedness": "uses the fact"}, "questions": [
        {"id": "groundedness-1", "dimension": "groundedness", "text": "Does the reply use the fact?"}]}))
    result, printed = _run(["topical-chat", "--data-dir", str(data_dir), "--model", judge.model, "--method",
                            "bineval,bineval-turns", "--dimension", "groundedness", "--checklist", str(checklist),
                            "--concurrency", "1"],
                           tmp_path, capsys)
    turns = result["methods"]["bineval-turns"]
    assert turns["status"] == "ok" and turns["cost"]["errors"] == 0
    whole = [it["scores"]["bineval"]["groundedness"] for it in result["items"]]
    by_turn = [it["scores"]["bineval-turns"]["groundedness"] for it in result["items"]]
    assert whole == by_turn == [0.0, 1.0, 1.0] * 2  # the reply's turn alone: quality 1, 2, 3 in each context
    # whole reply: 6 requests (no turn); per turn: the reply's turn 3 of each item (6) and the history's turn 1 once
    # per context (2): the other replies' turn 1 is the same request, answered by the cache
    assert sorted(seen, key=str) == sorted([(None, True)] * 6 + [("3", True)] * 6 + [("1", False)] * 2, key=str)
    assert "bineval-turns" in printed
