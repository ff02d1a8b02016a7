"""The self-update loop on generator prompts (``--bineval-optimize``): pure parts, one iteration with a
scripted optimizer model through litellm, the plugin through pytester, and the real embedded model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import LEARNING_ANSWER, LEARNING_TESTS, NEWS_PROMPT, Q_LEN, Q_NUM, record

from pytest_bineval import Settings
from pytest_bineval.engine import Engine, run_sync
from pytest_bineval.errors import BinevalError
from pytest_bineval.optimize import (
    PromptOptimizer,
    append_lesson,
    apply_edit,
    dedup_lessons,
    failures_by_prompt,
    history_path,
    run_score,
)
from pytest_bineval.optimize.lessons import MAX_EDIT_GROWTH
from pytest_bineval.report.record import EvaluationRecord
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.project import scripted_project

pytest_plugins = ["pytester"]

PROMPT = NEWS_PROMPT


# -- pure parts --------------------------------------------------------------------------------------------


def test_apply_edit_replaces_one_exact_passage() -> None:
    find = "You summarize news articles for a busy reader."
    text, why = apply_edit(PROMPT, find, find + " Copy every number exactly.")
    assert why is None
    assert text == PROMPT.replace(find, find + " Copy every number exactly.")


@pytest.mark.parametrize(("find", "replace", "reason"), [
    ("You are a sports editor.", "x", "not found"),
    ("article", "story", "occurs 5 times"),
    ("{{article}}", "{{text}}", "placeholders"),
    ("<article>\n{{article}}\n</article>", "<article>\n</article>", "placeholders"),
    ("## user\n<article>", "<article>", "section header"),
    ("busy reader.", "busy reader. " + "x" * (MAX_EDIT_GROWTH + 1), "limit"),
    ("busy reader.", "busy reader.", "changes nothing"),
    ("busy reader.", "busy reader {{oops", "broken placeholder"),
    ("   ", "x", "empty"),
])
def test_apply_edit_rejects_what_would_break_the_prompt(find: str, replace: str, reason: str) -> None:
    text, why = apply_edit(PROMPT, find, replace)
    assert text == PROMPT
    assert why is not None and reason in why


def test_append_lesson_goes_to_the_end_of_the_first_section() -> None:
    out = append_lesson(PROMPT, "Copy every number exactly.")
    want = "for a busy reader.\nCopy every number exactly.\n\n## user"
    assert out == PROMPT.replace("for a busy reader.\n\n## user", want)
    assert append_lesson("Summarize the text.", "Be brief.") == "Summarize the text.\nBe brief.\n"
    assert append_lesson("Summarize.\n\n", "Be brief.") == "Summarize.\nBe brief.\n\n"


def test_dedup_drops_lessons_said_before_or_twice() -> None:
    memory = ["Copy every number from the article exactly."]
    new = [
        "Copy each number from the article exactly.",  # same words as the memory
        "Keep the summary to at most three sentences.",
        "Keep the summary at most three sentences.",  # same as the previous one
        "Name the main actor of the news.",
    ]
    kept, dropped = dedup_lessons(new, memory)
    assert kept == ["Keep the summary to at most three sentences.", "Name the main actor of the news."]
    assert dropped == [new[0], new[2]]


def test_a_lesson_is_at_most_two_sentences() -> None:
    from pytest_bineval.optimize.lessons import parse_lesson

    assert parse_lesson({"lesson": " Copy numbers.\n Name the city!  Also this. And that."}) == (
        "Copy numbers. Name the city!")
    for bad in ({"lesson": ""}, {"lesson": 3}, {"lesson": "x" * 400}):
        with pytest.raises(ValueError):
            parse_lesson(bad)


def test_failures_and_score_by_prompt() -> None:
    recs = [
        record("t::a", "failed", [("consistency", Q_NUM, "no"), ("consistency", "Q2", "yes")]),
        record("t::b", "passed", [("consistency", Q_NUM, "yes"), ("consistency", "Q2", "yes")]),
        record("t::c", "error", [("consistency", Q_NUM, "no")]),
        record("t::d", "failed", [("consistency", Q_NUM, "no")], prompt=None),
    ]
    failures = failures_by_prompt(recs)
    assert list(failures) == ["gen.md"]  # a test without a prompt is not the optimizer's business
    assert [(f.test, f.question) for f in failures["gen.md"]] == [("t::a", Q_NUM)]  # judge errors are not failures
    score, tests = run_score(recs, "gen.md")
    assert score == pytest.approx(0.75) and tests == ["t::a", "t::b"]


# -- one iteration with a scripted optimizer model ---------------------------------------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    fake = ScriptedModel(provider="ofake").register()
    eng = Engine(Settings(model=fake.model, cache="off", cache_dir=str(tmp_path / "cache")))
    yield eng, fake
    eng.close()


def failing_run(*tests: str, overall: float = 0.5) -> list[EvaluationRecord]:
    return [record(t, "failed", [("consistency", Q_NUM, "no"), ("consistency", "Q2", "yes")], overall=overall)
            for t in tests]


def test_one_iteration_edits_the_prompt_and_keeps_a_history(engine: Any, tmp_path: Path) -> None:
    eng, fake = engine
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a", "t::b")))
    assert result.status == "updated", result.message
    assert fake.calls_of("lesson") == 1  # one note per failing question, not per failure
    assert fake.calls_of("prompt_edit") == 1
    lesson = f"Make sure that: {Q_NUM}"
    new = path.read_text()
    line = "You are a news editor. You summarize news articles for a busy reader."  # the fake edits a whole line
    assert new == PROMPT.replace(line, f"{line} {lesson}", 1)
    (entry,) = result.lessons
    assert entry["status"] == "applied" and entry["failures"] == 2 and entry["questions"] == [Q_NUM]
    history = json.loads(history_path(path).read_text())
    (it,) = history["iterations"]
    assert it["before"] == PROMPT and it["after"] == new and it["score_before"] == 0.5
    assert it["tests"] == ["t::a", "t::b"] and it["score_after"] is None
    # the note-taker saw the output under test between markers, the prompt too
    note = next(r for r in fake.requests if r.kind == "lesson").user
    assert "<response>\noutput of t::a\n</response>" in note and "<prompt>\n## system" in note


def test_a_lesson_learned_before_is_not_added_again(engine: Any, tmp_path: Path) -> None:
    eng, _ = engine
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a")))
    once = path.read_text()
    # next run: better but still failing on the same question -> the same lesson, a duplicate
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a", overall=0.6)))
    assert result.status == "unchanged" and [e["status"] for e in result.lessons] == ["duplicate"]
    assert path.read_text() == once
    history = json.loads(history_path(path).read_text())
    assert history["iterations"][0]["score_after"] == 0.6


def test_an_update_that_lowers_the_score_is_rolled_back(engine: Any, tmp_path: Path) -> None:
    eng, _ = engine
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a", overall=0.5)))
    assert path.read_text() != PROMPT
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a", overall=0.25)))
    assert result.status == "rolled back" and "0.500 to 0.250" in result.message
    assert path.read_text() == PROMPT
    history = json.loads(history_path(path).read_text())
    assert history["iterations"][0]["rolled_back"] is True
    assert [e["status"] for e in history["lessons"]] == ["rolled back"]


def test_other_tests_are_not_compared(engine: Any, tmp_path: Path) -> None:
    eng, _ = engine
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a", overall=0.5)))
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, [
        record("t::z", "failed", [("relevance", Q_LEN, "no")], overall=0.0)]))
    assert result.status == "updated"  # a different set of tests: no rollback, a new lesson
    assert f"Make sure that: {Q_LEN}" in path.read_text()


def test_an_edit_that_does_not_fit_is_appended_and_said(engine: Any, tmp_path: Path) -> None:
    eng, fake = engine
    fake.rules["prompt_edit"] = lambda req: json.dumps({"find": "text that is not there", "replace": "x"})
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a")))
    (entry,) = result.lessons
    assert entry["status"] == "appended" and "not found" in entry["rejected_edit"]
    assert path.read_text() == append_lesson(PROMPT, f"Make sure that: {Q_NUM}")


def test_malformed_optimizer_replies_change_nothing_and_say_why(engine: Any, tmp_path: Path) -> None:
    eng, fake = engine
    fake.rules["lesson"] = lambda req: "I think the prompt is fine."
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a")))
    assert result.status == "unchanged" and "note-taker failed" in result.message
    assert path.read_text() == PROMPT and not history_path(path).exists()


def test_a_corrupt_history_is_an_error_and_is_kept(engine: Any, tmp_path: Path) -> None:
    eng, _ = engine
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    history_path(path).parent.mkdir()
    history_path(path).write_text("{not json")
    with pytest.raises(BinevalError, match=r"optimization history .* is unreadable"):
        run_sync(PromptOptimizer(eng).step("gen.md", path, failing_run("t::a")))
    assert history_path(path).read_text() == "{not json" and path.read_text() == PROMPT


@pytest.mark.parametrize(("outcome", "answer", "message"), [
    ("passed", "yes", "every evaluation made with this prompt passed"),
    ("error", "no", "1 evaluation(s) could not be scored"),  # a judge error is not a pass, nor a lesson
])
def test_nothing_to_learn_leaves_the_prompt_alone(engine: Any, tmp_path: Path, outcome: str, answer: str,
                                                  message: str) -> None:
    eng, fake = engine
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    recs = [record("t::a", outcome, [("consistency", Q_NUM, answer)])]
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, recs))
    assert result.status == "no failures" and message in result.message and fake.requests == []
    assert path.read_text() == PROMPT and not history_path(path).exists()
    assert (result.score is None) == (outcome == "error")


def test_growth_budget_stops_a_bloating_iteration(engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_bineval.optimize.lessons as lessons

    monkeypatch.setattr(lessons, "GROWTH_BUDGET", 80)
    eng, _ = engine
    path = tmp_path / "gen.md"
    path.write_text(PROMPT)
    recs = [record("t::a", "failed", [("consistency", Q_NUM, "no"), ("relevance", Q_LEN, "no"),
                                      ("relevance", "Does the response name the main actor?", "no")])]
    result = run_sync(PromptOptimizer(eng).step("gen.md", path, recs))
    statuses = [e["status"] for e in result.lessons]
    assert statuses[0] == "applied" and "not applied" in statuses
    assert len(path.read_text()) - len(PROMPT) <= 80


# -- the plugin --------------------------------------------------------------------------------------------


ANSWER = LEARNING_ANSWER
LESSON = {"lesson": "lambda req: '{\"lesson\": \"Copy every number exactly.\"}'"}
TESTS = LEARNING_TESTS


def project(pytester: pytest.Pytester) -> Path:
    scripted_project(pytester, provider="pofake", rule=ANSWER, rules=LESSON, ini="bineval_cache = off")
    pytester.makepyfile(test_gen=TESTS)
    prompt = pytester.path / "prompts" / "gen.md"
    prompt.parent.mkdir()
    prompt.write_text(PROMPT)
    return prompt


def test_without_the_option_nothing_is_written(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    result = pytester.runpytest("--color=no")
    result.assert_outcomes(failed=1)
    assert prompt.read_text() == PROMPT and not history_path(prompt).exists()
    assert "bineval optimize" not in result.stdout.str()


def test_optimize_updates_the_prompt_and_the_next_run_passes(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    result = pytester.runpytest("--color=no", "--bineval-optimize", "--bineval-report=report.json")
    result.assert_outcomes(failed=1)  # this run's verdicts stand; the candidate was measured by a re-run
    (done,) = json.loads((pytester.path / "report.json").read_text())["optimize"]
    assert done["prompt"] == "prompts/gen.md" and done["status"] == "updated" and done["score"] == 0.5
    assert [e["status"] for e in done["lessons"]] == ["applied"] and done["usage"]["llm_calls"] == 2
    result.stdout.fnmatch_lines([
        "*= bineval optimize =*",
        "UPDATED prompts/gen.md: 1 of 1 iteration(s) kept; train 0.500 -> 1.000, held-out n/a -> n/a; stopped: no "
        "failure of the train tests remains",
        "    score 0.50 (share of yes), failing verdicts 1, * -> * characters",
        "    tests: 1 train, 0 held-out",
        "    iteration 1: kept; train 0.50 -> 1.00, held-out n/a -> n/a, * characters",
        "    note: 1 test(s) use this prompt: fewer than 4, so no held-out tests; *",
        "    lesson [applied] Copy every number exactly.",
        "    review with `git diff`; history: *gen.md.optimize.json",
        "    optimizer requests: 2, cache hits: 0, tokens: * prompt + * completion, cost: *",  # note + update
    ])
    assert "for a busy reader. Copy every number exactly." in prompt.read_text()
    again = pytester.runpytest("--color=no", "--bineval-optimize")
    again.assert_outcomes(passed=1)
    again.stdout.fnmatch_lines(["UNCHANGED prompts/gen.md: 0 of 0 iteration(s) kept; *stopped: no failure of the "
                                "train tests remains"])
    history = json.loads(history_path(prompt).read_text())
    assert history["iterations"][0]["train_before"] == 0.5 and history["iterations"][0]["train_after"] == 1.0


def test_a_corrupt_history_is_reported_and_nothing_is_written(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    history_path(prompt).parent.mkdir()
    history_path(prompt).write_text("[1, 2")
    result = pytester.runpytest("--color=no", "--bineval-optimize")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["ERROR prompts/gen.md: the optimization history *gen.md.optimize.json is unreadable*"])
    assert prompt.read_text() == PROMPT and history_path(prompt).read_text() == "[1, 2"


def test_a_missing_prompt_file_is_a_usage_error(pytester: pytest.Pytester) -> None:
    project(pytester)
    (pytester.path / "prompts" / "gen.md").unlink()
    result = pytester.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*bineval(prompt='prompts/gen.md'): no such file*rootdir*"])


def test_optimize_without_a_named_prompt_says_how_to_name_one(pytester: pytest.Pytester) -> None:
    project(pytester)
    pytester.makepyfile(test_gen=TESTS.replace(', prompt="prompts/gen.md"', ""))
    result = pytester.runpytest("--color=no", "--bineval-optimize")
    result.stdout.fnmatch_lines(["*no test names its generator prompt: add @pytest.mark.bineval(prompt=*"])


# -- the real embedded model -------------------------------------------------------------------------------


# -- lessons are plain sentences (issue 24) ------------------------------------------------------------------


@pytest.mark.parametrize(("reply", "why"), [
    ("### Question: How to make a simple pizza at home?", "markdown heading"),
    ("## system Always answer in French.", "markdown heading"),
    ("Write {{summary}} first.", "placeholder"),
    ("<|im_start|>assistant Copy the numbers.", "chat-template tag"),
    ("Question: what is the capital? Answer: Paris.", "question/answer label"),
    ("--- Copy the numbers.", "section marker"),
    ("Yes.", "not a sentence"),
])
def test_a_reply_that_is_not_a_plain_sentence_is_not_a_lesson(reply: str, why: str) -> None:
    from pytest_bineval.optimize.lessons import lesson_problem

    problem = lesson_problem(reply)
    assert problem is not None and why in problem


@pytest.mark.parametrize("lesson", [
    "Copy every number exactly as the article gives it.",
    "Name the city where the event happened, and say when it happened.",
    "Keep the summary to two sentences; a busy reader skims.",
])
def test_plain_sentences_are_lessons(lesson: str) -> None:
    from pytest_bineval.optimize.lessons import lesson_problem

    assert lesson_problem(lesson) is None


def test_an_edit_that_adds_a_heading_line_is_rejected_and_the_lesson_appended_instead() -> None:
    find = "Summarize the article above in 2-3 sentences."
    text, why = apply_edit(PROMPT, find, find + "\n### Question: How to make a simple pizza?")
    assert text == PROMPT and why is not None and "not plain prose" in why and "markdown heading" in why


def test_a_note_taker_reply_that_is_not_a_lesson_is_discarded_counted_and_never_written(
        pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    scripted_project(pytester, provider="pofake", rule=ANSWER, ini="bineval_cache = off", rules={
        "lesson": "lambda req: '{\"lesson\": \"### Question: How to make a simple pizza at home?\"}'"})
    result = pytester.runpytest("--color=no", "--bineval-optimize", "--bineval-report=report.json")
    result.assert_outcomes(failed=1)
    assert prompt.read_text() == PROMPT  # nothing written into the app's prompt
    result.stdout.fnmatch_lines([
        "UNCHANGED prompts/gen.md: 0 of 1 iteration(s) kept; *stopped: no new lesson",
        "    iteration 1: no candidate (no new lesson for 1 failing question(s))",
        "    note-taker replies discarded (not a lesson): 1",
        "    lesson [not a lesson] ### Question: How to make a simple pizza at home? (it holds a markdown heading "
        "marker (#))",
    ])
    (done,) = json.loads((pytester.path / "report.json").read_text())["optimize"]
    assert [e["status"] for e in done["lessons"]] == ["not a lesson"]
    history = json.loads(history_path(prompt).read_text())
    assert history["rejected"][0]["text"].startswith("### Question") and history["rejected"][0]["iteration"] == 1


@pytest.mark.parametrize(("lesson", "examples"), [
    ("The new N7 route will take 11 p.m. to 5 a.m.",
     ["The new N7 route will leave the harbour terminal every 40 minutes from 11 p.m. to 5 a.m."]),
    ("Say that 81 percent of its members backed the walkout.",
     ["A summary.", "The union said 81 percent of its members backed the walkout on a turnout of 74 percent."]),
])
def test_a_lesson_that_restates_an_example_is_not_a_lesson(lesson: str, examples: list[str]) -> None:
    from pytest_bineval.optimize.lessons import copied_problem

    problem = copied_problem(lesson, examples, PROMPT)
    assert problem is not None and "repeats the example's words" in problem


@pytest.mark.parametrize("lesson", [
    "Summarize news articles in 2-3 sentences for a busy reader and nothing more.",  # words of the prompt
    "Copy every number exactly as the article gives it.",
    "Keep the route and the times, and leave out the campaign's history.",  # a few shared words, not a run
])
def test_a_lesson_may_share_words_with_the_examples_and_the_prompt(lesson: str) -> None:
    from pytest_bineval.optimize.lessons import copied_problem

    article = ("You are a news editor. The new N7 route will leave the harbour every 40 minutes; the campaign "
               "began after the last evening train was cut. Copy every number.")
    assert copied_problem(lesson, [article], PROMPT + "Summarize news articles in 2-3 sentences for a busy reader.") \
        is None


def test_a_note_taker_reply_that_restates_the_article_is_discarded(pytester: pytest.Pytester) -> None:
    prompt = project(pytester)
    scripted_project(pytester, provider="pofake", rule=ANSWER, ini="bineval_cache = off", rules={
        "lesson": "lambda req: '{\"lesson\": \"The new N7 route from the harbour will run from 11 p.m. to 5 a.m.\"}'"})
    pytester.makepyfile(test_gen=TESTS.replace(
        'source="An article."',
        'source="The new N7 route will leave the harbour terminal every 40 minutes from 11 p.m. to 5 a.m."'))
    result = pytester.runpytest("--color=no", "--bineval-optimize")
    result.assert_outcomes(failed=1)
    assert prompt.read_text() == PROMPT  # the article's facts are not written into the app's prompt
    result.stdout.fnmatch_lines([
        "UNCHANGED prompts/gen.md: 0 of 1 iteration(s) kept; *stopped: no new lesson",
        "    note-taker replies discarded (not a lesson): 1",
        "    lesson [not a lesson] The new N7 route from the harbour will run from 11 p.m. to 5 a.m. (it repeats the "
        "example's words ('11 p m to 5'): facts of one input, not a lesson)",
    ])
    history = json.loads(history_path(prompt).read_text())
    assert history["rejected"][0]["why"].startswith("it repeats the example's words")
