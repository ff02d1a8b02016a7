"""``--bineval-budget``: how much a run may spend on models, and the refusal once it is spent.

The syntax: dollars, ``0.50`` or ``$0.50`` (litellm's prices), or tokens, ``200000tok`` (also ``200ktok``,
``2Mtok``: k = 1,000, M = 1,000,000), prompt and completion tokens together, for models litellm has no price for
(the embedded model, an OpenAI-compatible server of your own). Everything the engine spends counts: checklist
generation and judging, failed requests included; cache hits cost nothing.

The check comes before each evaluation (and each checklist generation): once the spent amount has reached the
budget, the operation is refused with :class:`BudgetReachedError`, which the plugin turns into an error of the
test (never a pass, never a skip). An evaluation that started under the budget finishes, so a run can pass its
budget by what the evaluations in flight at that moment spend. A budget in dollars cannot be kept once a reply
had no known price: from then on the operations are refused too, saying to give the budget in tokens.

The budget is kept per process. Under pytest-xdist each of the N workers keeps its own count against an equal share
(budget / N): the run as a whole never passes the budget by more than what the evaluations in flight spend (one
per worker and concurrent request), and a worker whose tests are done leaves the rest of its share unused (no file
or counter is shared between the workers); the summary line says so (``budget $0.0010, $0.0005 per worker (2
workers, each counting its own)``). Each shard of a CI matrix (a separate pytest run) keeps the whole budget:
K shards may spend K times it.

A light module: it imports nothing heavy (the options parse the budget text with it).
"""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from typing import Literal

from .errors import BudgetReachedError

__all__ = ["Budget", "BudgetReachedError", "budget_value", "parse_budget"]

Unit = Literal["usd", "tokens"]

_DOLLARS = re.compile(r"\$?\s*(\d+(?:\.\d*)?|\.\d+)")
_TOKENS = re.compile(r"(\d+(?:\.\d*)?)\s*([kKmM]?)\s*tok(?:ens?)?")
_SCALE = {"": 1, "k": 1_000, "m": 1_000_000}
SYNTAX = "dollars like 0.50 or $0.50, or tokens like 200000tok, 200ktok or 2Mtok"


@dataclass(frozen=True)
class Budget:
    """An amount of dollars or tokens; ``workers``: the share of it this process keeps (pytest-xdist)."""

    amount: float
    unit: Unit
    workers: int = 1

    @property
    def share(self) -> float:
        return self.amount / max(1, self.workers)

    def text(self, amount: float | None = None) -> str:
        value = self.amount if amount is None else amount
        if self.unit == "usd":
            return f"${value:.4f}"
        return f"{value:,.0f} tokens" if float(value).is_integer() else f"{value:,.1f} tokens"

    def limit_text(self) -> str:
        """``$0.0500`` or, on a worker, ``$0.0250 (this worker's share of $0.0500 over 2 workers)``."""
        if self.workers <= 1:
            return self.text()
        return f"{self.text(self.share)} (this worker's share of {self.text()} over {self.workers} workers)"

    def spent(self, cost_usd: float | None, tokens: int) -> float:
        return (cost_usd or 0.0) if self.unit == "usd" else float(tokens)

    def refusal(self, cost_usd: float | None, tokens: int, unpriced: int) -> str | None:
        """Why the next operation is refused (None: it may go on), given what was spent so far."""
        if self.unit == "usd" and unpriced:
            return (f"the budget {self.text()} (--bineval-budget) is in dollars, but {unpriced} repl"
                    f"{'y' if unpriced == 1 else 'ies'} had no known price (litellm has none for the model), so "
                    f"it cannot be kept: this was not judged. Give the budget in tokens, e.g. --bineval-budget "
                    f"200000tok")
        spent = self.spent(cost_usd, tokens)
        if spent < self.share:
            return None
        return (f"the budget is reached: {self.text(spent)} spent of {self.limit_text()} (--bineval-budget), so "
                "this was not judged. Raise the budget, or run fewer tests (-k, a test path)")


def parse_budget(text: str) -> Budget:
    """The :class:`Budget` of ``text`` (see the module's syntax); ``argparse.ArgumentTypeError`` otherwise."""
    raw = text.strip()
    tokens = _TOKENS.fullmatch(raw)
    if tokens is not None:
        amount = float(tokens.group(1)) * _SCALE[tokens.group(2).lower()]
        if amount < 1:
            raise argparse.ArgumentTypeError(f"a token budget is at least 1 token, not {text!r}")
        return Budget(amount, "tokens")
    dollars = _DOLLARS.fullmatch(raw)
    if dollars is None:
        raise argparse.ArgumentTypeError(f"not a budget: {text!r} (give {SYNTAX})")
    amount = float(dollars.group(1))
    if amount <= 0:
        raise argparse.ArgumentTypeError(f"a budget is more than $0, not {text!r}")
    return Budget(amount, "usd")


def budget_value(text: str) -> str:
    """The option's parser: ``text`` validated (kept as text: settings stay plain values)."""
    parse_budget(text)
    return text.strip()
