"""--bineval-confirm: the Wilson interval at a confidence level (hand-computed values), the stopping rule, the
majority verdict, which verdicts are re-asked, and the engine's re-asks (counts, cache keys, code checks)."""

from __future__ import annotations

import argparse
import itertools
import threading
from pathlib import Path
from typing import Any

import pytest

from pytest_bineval.confirm import ask_again, confirmed, decided, interval, needs_confirmation, z_of
from pytest_bineval.engine import Engine
from pytest_bineval.errors import UsageError
from pytest_bineval.models import Checklist, ConfirmCost, Question, Usage, Verdict
from pytest_bineval.report.ledger import RunLedger
from pytest_bineval.report.record import ConfirmationSummary
from pytest_bineval.settings import Settings, confidence_level
from pytest_bineval.testing import ScriptedModel
from pytest_bineval.testing.scripted import Request


def verdict(answer: str, *, p_yes: float | None = None, explanation: str = "", decided_by: str = "judge",
            cached: bool = False, error: str | None = None) -> Verdict:
    return Verdict(question_id="c-1", dimension="consistency", question="Is it right?", answer=answer,  # type: ignore[arg-type]
                   p_yes=p_yes, explanation=explanation, decided_by=decided_by, cached=cached,  # type: ignore[arg-type]
                   error=error, explain="failing")


# -- the interval and the stopping rule -----------------------------------------------------------------------
def test_z_of_a_level_is_the_two_sided_normal_quantile() -> None:
    assert z_of(0.95) == pytest.approx(1.959964, abs=1e-6)
    assert z_of(0.90) == pytest.approx(1.644854, abs=1e-6)
    assert z_of(0.99) == pytest.approx(2.575829, abs=1e-6)
    with pytest.raises(ValueError):
        z_of(1.0)


@pytest.mark.parametrize(("answers", "low", "high"), [
    # by hand, z = 1.959964, z^2 = 3.841459: n yes of n -> low = n / (n + z^2); 0 of n -> high = z^2 / (n + z^2)
    (["yes"] * 3, 3 / 6.841459, 1.0),                      # 0.43850
    (["no"] * 5, 0.0, 3.841459 / 8.841459),                # 0.43448
    (["yes", "yes", "no"], 0.207659, 0.938509),            # p = 2/3: center 0.573084, half-width 0.365425
    (["yes", "error", "no", "no"], 0.061492, 0.792340),    # an error does not count: 1 yes of 3
])
def test_wilson_interval_at_95_percent_against_hand_computed_values(answers: list[str], low: float,
                                                                   high: float) -> None:
    bounds = interval(answers, 0.95)  # type: ignore[arg-type]
    assert bounds is not None
    assert bounds == (pytest.approx(low, abs=1e-5), pytest.approx(high, abs=1e-5))


def test_an_interval_decides_only_when_it_lies_on_one_side_of_one_half() -> None:
    assert not decided(["no"] * 3, 0.95)  # high 0.56 > 0.5: three equal answers are not enough at 95%
    assert decided(["no"] * 4, 0.95)  # high 3.84 / 7.84 = 0.49
    assert decided(["yes"] * 4, 0.95)  # low 4 / 7.84 = 0.51
    assert decided(["no"] * 3, 0.80)  # z 1.28: high 1.64 / 4.64 = 0.35
    assert not decided(["yes"] * 6 + ["no"] * 2, 0.95)  # 6 of 8: low 0.41
    assert decided(["yes"] * 7 + ["no"], 0.95)  # 7 of 8: low 0.529
    assert not decided(["no", "no", "no", "no", "error"], 0.95)  # a judge error never decides


def test_the_stopping_rule() -> None:
    assert ask_again(["no"], 2, 0.95)
    assert ask_again(["no", "no"], 2, 0.95)
    assert not ask_again(["no", "no", "no"], 2, 0.95)  # K re-asks made
    assert ask_again(["no", "no", "no"], 5, 0.95)  # undecided, re-asks left
    assert not ask_again(["no"] * 4, 5, 0.95)  # decided after 3 re-asks: stop early
    assert not ask_again(["no", "error"], 5, 0.95)  # a failed re-ask ends the asking
    assert not ask_again(["no"], 0, 0.95)


# -- which verdicts, and the verdict of the asks --------------------------------------------------------------
def test_which_verdicts_are_re_asked() -> None:
    assert needs_confirmation(verdict("no"))
    assert needs_confirmation(verdict("yes", p_yes=0.55))  # within 0.1 of 0.5
    assert needs_confirmation(verdict("yes", p_yes=0.41))
    assert not needs_confirmation(verdict("yes", p_yes=0.9))
    assert not needs_confirmation(verdict("yes"))  # P(yes) unknown
    assert not needs_confirmation(verdict("no", decided_by="code"))  # a code check is never re-asked
    assert not needs_confirmation(verdict("error", error="503"))


def test_the_verdict_is_the_majority_and_a_split_without_decision_is_unstable() -> None:
    first = verdict("no", explanation="it is wrong", p_yes=0.2)
    kept = confirmed(first, [verdict("no", p_yes=0.4), verdict("yes", p_yes=0.6)], 0.95)
    assert (kept.answer, kept.explanation, kept.agreement) == ("no", "it is wrong", 2 / 3)
    assert kept.p_yes == pytest.approx(0.4)
    assert kept.confirmation is not None and kept.confirmation.answers == ["no", "no", "yes"]
    assert kept.unstable and not kept.confirmation.decided and kept.asks == ["no", "no", "yes"]
    assert kept.samples == ["no"]  # the score counts the majority once, not every ask

    flipped = confirmed(first, [verdict("yes", p_yes=0.7), verdict("yes", p_yes=0.8)], 0.95)
    assert (flipped.answer, flipped.explanation, flipped.unstable) == ("yes", "", True)

    tie = confirmed(verdict("yes", p_yes=0.55), [verdict("no", p_yes=0.45)], 0.95)
    assert tie.answer == "no"  # no on a tie, like --bineval-repeats
    assert tie.reason() == "(no by 1 of 2 asks; the first said yes, and re-asks are not explained)"
    unexplained = confirmed(verdict("no").model_copy(update={"explain": "none"}), [verdict("no")], 0.95)
    assert unexplained.reason() == "(not explained: explain mode none)"

    steady = confirmed(first, [verdict("no")] * 3, 0.95)
    assert steady.answer == "no" and steady.confirmation is not None and steady.confirmation.decided
    assert not steady.unstable and steady.p_yes is None  # one ask without P(yes): no mean

    unanimous = confirmed(first, [verdict("no")] * 2, 0.95)
    assert not unanimous.unstable and not unanimous.confirmation.decided  # type: ignore[union-attr]


def test_a_failed_re_ask_is_an_error_verdict_never_outvoted() -> None:
    out = confirmed(verdict("no", explanation="x"), [verdict("no"), verdict("error", error="provider 503")], 0.95)
    assert out.answer == "error"
    assert out.error == "re-ask 2 of --bineval-confirm got no answer: provider 503"


def test_a_confirmed_verdict_round_trips_and_an_unconfirmed_one_serializes_as_before() -> None:
    plain = verdict("yes")
    assert "confirmation" not in plain.model_dump(mode="json")
    out = confirmed(verdict("no"), [verdict("yes")], 0.95)
    assert Verdict.model_validate(out.model_dump(mode="json")) == out


# -- settings ------------------------------------------------------------------------------------------------
def test_confirm_and_repeats_do_not_combine() -> None:
    with pytest.raises(UsageError, match=r"confirm=2 \(--bineval-confirm\) and repeats=3 \(--bineval-repeats\) do "
                                         r"not combine"):
        Settings(confirm=2, repeats=3)
    with pytest.raises(UsageError, match="confidence"):
        Settings(confidence=1.0)


@pytest.mark.parametrize("text", ["0", "1", "1.5", "-0.1", "high"])
def test_a_confidence_level_is_strictly_between_0_and_1(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        confidence_level(text)
    assert confidence_level(" 0.9 ") == 0.9


# -- the ledger and the report -------------------------------------------------------------------------------
def test_the_confirm_cost_merges_and_round_trips_in_the_ledger() -> None:
    a = RunLedger(confirm_cost=ConfirmCost(questions=4, reasked=2, reasks=3, usage=Usage(llm_calls=3)))
    b = RunLedger(confirm_cost=ConfirmCost(questions=2, reasked=1, reasks=2, usage=Usage(cache_hits=2)))
    merged = RunLedger.loads(a.merge(b).dumps()).confirm_cost
    assert (merged.questions, merged.reasked, merged.reasks) == (6, 3, 5)
    assert (merged.usage.llm_calls, merged.usage.cache_hits) == (3, 2)
    summary = ConfirmationSummary.of(2, 0.95, merged)
    assert (summary.asks, summary.repeats_asks, summary.requests, summary.cache_hits) == (11, 18, 3, 2)


# -- the engine ----------------------------------------------------------------------------------------------
TASK = "Summarize the article."


def checklist(*, code_check: bool = False) -> Checklist:
    questions = [Question(id=f"consistency-{i}", dimension="consistency", text=f"Is check {i} met?")
                 for i in (1, 2, 3)]
    if code_check:  # a code check answering no (the output does not end with xyz)
        questions.append(Question(id="consistency-4", dimension="consistency", text="Does it end with xyz?",
                                  check={"kind": "ends_with", "text": "xyz"}))
    return Checklist(task=TASK, dimensions={"consistency": "true to the source"}, questions=questions)


def by_call(script: dict[str, list[str]]) -> Any:
    """A rule answering each question's calls in turn from ``script`` (question text -> answers; else yes)."""
    counts: dict[str, itertools.count[int]] = {}
    lock = threading.Lock()

    def rule(req: Request) -> str:
        answers = script.get(req.question, ["yes"])
        with lock:
            n = next(counts.setdefault(req.question, itertools.count()))
        return answers[n % len(answers)]

    return rule


@pytest.mark.parametrize("prefill", [False, True], ids=["turns", "prefill"])
def test_the_engine_re_asks_only_failing_questions_and_caches_each_re_ask(prefill: bool, cache_dir: Path) -> None:
    fake = ScriptedModel(provider=f"confirm{'prefill' if prefill else 'turns'}", prefill=prefill).register()
    fake.answers = by_call({"Is check 1 met?": ["no"], "Is check 2 met?": ["no", "yes", "yes"]})
    settings = Settings(model=fake.model, cache_dir=str(cache_dir), confirm=5, explain="none")
    engine = Engine(settings)
    try:
        ev = engine.evaluate("A summary of it.", checklist(code_check=True))
    finally:
        engine.close()
    by_id = {v.question_id: v for v in ev.verdicts}
    # check 1: no x4 decides after 3 re-asks; check 2: no yes yes no yes yes (5 re-asks, 4 of 6, undecided)
    assert by_id["consistency-1"].asks == ["no"] * 4 and by_id["consistency-1"].answer == "no"
    assert by_id["consistency-2"].asks == ["no", "yes", "yes", "no", "yes", "yes"]
    assert by_id["consistency-2"].answer == "yes" and by_id["consistency-2"].unstable
    assert by_id["consistency-3"].confirmation is None  # yes with P(yes) 0.9: not re-asked
    assert by_id["consistency-4"].confirmation is None and by_id["consistency-4"].decided_by == "code"
    assert fake.calls_of("verdict") == 3 + 3 + 5  # first asks (the code check asks none) + re-asks
    cost = engine.ledger.confirm_cost
    assert (cost.questions, cost.reasked, cost.reasks, cost.usage.llm_calls) == (3, 2, 8, 8)
    assert ev.usage.llm_calls == 11 and engine.usage.llm_calls == 11

    again = Engine(settings)  # a second run: every ask, each re-ask under its own key, from the cache
    try:
        ev2 = again.evaluate("A summary of it.", checklist(code_check=True))
    finally:
        again.close()
    assert fake.calls_of("verdict") == 11
    assert [v.asks for v in ev2.verdicts] == [v.asks for v in ev.verdicts]
    assert (again.ledger.confirm_cost.usage.llm_calls, again.ledger.confirm_cost.usage.cache_hits) == (0, 8)


def test_without_confirm_nothing_is_re_asked(fake: ScriptedModel, cache_dir: Path) -> None:
    fake.answers = {"Is check 1 met?": "no"}
    engine = Engine(Settings(model=fake.model, cache_dir=str(cache_dir), explain="none"))
    try:
        ev = engine.evaluate("A summary of it.", checklist())
    finally:
        engine.close()
    assert fake.calls_of("verdict") == 3 and all(v.confirmation is None for v in ev.verdicts)
    assert engine.ledger.confirm_cost == ConfirmCost()


def test_against_a_baseline_an_unstable_confirmed_question_flips_and_a_decided_one_regresses() -> None:
    from pytest_bineval.report.comparison import classify

    before = verdict("yes")
    split = confirmed(verdict("no"), [verdict("yes"), verdict("no")], 0.95)  # no by 2 of 3, undecided
    steady = confirmed(verdict("no"), [verdict("no")] * 3, 0.95)  # decided no
    assert classify(before, split) == "unstable flip"
    assert classify(before, steady) == "regression"
