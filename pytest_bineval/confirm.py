"""Confirming failing verdicts (``--bineval-confirm K``): statistics instead of one draw of luck per question.

After an evaluation, the questions answered *no* (and those answered *yes* with P(yes) within
:data:`CONFIRM_MARGIN` of 0.5, when the judge gave P(yes)) are asked again, one re-ask at a time, up to K more
times. A question stops as soon as the Wilson score interval of its share of yes, at the confidence level
(``--bineval-confidence``, default 0.95), lies on one side of 0.5. Its verdict is the majority of its asks (*no* on
a tie, like ``--bineval-repeats``); a question whose asks got both answers without the interval deciding is
*unstable*. Re-ask k of a question is cached apart from the first ask, under the key ``--bineval-repeats`` gives
its k-th repeat; re-asks ask for no explanation (one request each). Questions a code check decides
(``Question.check``) and judge errors are never re-asked.

At 95%, an interval clears 0.5 only after 4 equal answers (n / (n + 1.96²) > 0.5): with K < 3 no question stops
early, and a unanimous one is confirmed but not decided. A judge that never varies (temperature 0, like the
embedded model) gives the same answer every time: confirming pays with a judge that samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import NormalDist

from .models import Answer, Confirmation, Verdict
from .repeats import wilson_interval

CONFIRM_MARGIN = 0.1  # a yes with |P(yes) - 0.5| below this is re-asked too


def z_of(level: float) -> float:
    """The standard normal quantile of a two-sided interval at ``level`` (0.95 -> 1.96)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"a confidence level is within (0, 1), not {level}")
    return NormalDist().inv_cdf(0.5 + level / 2)


def interval(answers: Sequence[Answer], level: float) -> tuple[float, float] | None:
    """The Wilson interval of the share of yes among the answered ``answers`` (errors left out); None if none."""
    answered = [a for a in answers if a != "error"]
    return wilson_interval(answered.count("yes"), len(answered), z_of(level))


def decided(answers: Sequence[Answer], level: float) -> bool:
    """Whether the interval of ``answers`` lies on one side of 0.5 (never once a judge error is among them)."""
    if "error" in answers:
        return False
    bounds = interval(answers, level)
    return bounds is not None and (bounds[0] > 0.5 or bounds[1] < 0.5)


def needs_confirmation(verdict: Verdict, margin: float = CONFIRM_MARGIN) -> bool:
    """Whether ``verdict`` is re-asked: a judge's *no*, or a judge's *yes* whose P(yes) is within ``margin`` of 0.5."""
    if verdict.decided_by == "code" or verdict.answer == "error":
        return False
    if verdict.answer == "no":
        return True
    return verdict.p_yes is not None and abs(verdict.p_yes - 0.5) < margin


def ask_again(answers: Sequence[Answer], rounds: int, level: float) -> bool:
    """The stopping rule: ask once more while fewer than ``rounds`` re-asks were made, none failed, and the
    interval of ``answers`` (the first ask's included) still holds 0.5."""
    return len(answers) - 1 < rounds and "error" not in answers and not decided(answers, level)


def confirmed(first: Verdict, reasks: Sequence[Verdict], level: float) -> Verdict:
    """The verdict of ``first`` and its re-asks: their majority (no on a tie), or the first re-ask's judge error
    (a judge failure is never outvoted). The first ask's explanation is kept when the majority agrees with it."""
    answers: list[Answer] = [first.answer, *(r.answer for r in reasks)]
    bounds = interval(answers, level) or (0.0, 1.0)
    confirmation = Confirmation(answers=answers, level=level, low=bounds[0], high=bounds[1],
                                decided=decided(answers, level))
    cached = first.cached and all(r.cached for r in reasks)
    failed = next((i for i, r in enumerate(reasks, 1) if r.answer == "error"), None)
    if failed is not None:
        return first.model_copy(update={
            "answer": "error", "explanation": "", "p_yes": None, "confirmation": confirmation, "cached": cached,
            "error": f"re-ask {failed} of --bineval-confirm got no answer: {reasks[failed - 1].error}"})
    yes = answers.count("yes")
    no = len(answers) - yes
    majority: Answer = "yes" if yes > no else "no"
    ps = [first.p_yes, *(r.p_yes for r in reasks)]
    p_yes = None if any(p is None for p in ps) else sum(p for p in ps if p is not None) / len(ps)
    update: dict[str, object] = {"answer": majority, "p_yes": p_yes, "confirmation": confirmation, "cached": cached,
                                 "agreement": max(yes, no) / len(answers)}
    if majority != first.answer:
        update.update(explanation="", error=None)
    return first.model_copy(update=update)
