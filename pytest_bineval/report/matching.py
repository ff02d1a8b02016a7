"""How the questions of two runs are matched within one evaluation (:mod:`.comparison`): by id and normalized text,
then by text under another id, then by id after a small edit (a :func:`similarity` of at least
:data:`EDIT_SIMILARITY`); the same measure tells near-duplicate questions apart (:mod:`pytest_bineval.lint`,
:mod:`pytest_bineval.labels`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from difflib import SequenceMatcher

from ..models import Verdict

Pair = tuple[Verdict, Verdict]

EDIT_SIMILARITY = 0.8  # difflib ratio of two normalized texts at or above which an edit is small


def normalized(text: str) -> str:
    """Whitespace collapsed, case folded: how two texts of a question are compared."""
    return " ".join(text.split()).casefold()


def similarity(a: str, b: str) -> float:
    """``difflib.SequenceMatcher`` ratio of the normalized texts: 1.0 the same, 0.0 nothing in common."""
    return SequenceMatcher(None, normalized(a), normalized(b), autojunk=False).ratio()


def match_questions(before: Sequence[Verdict], after: Sequence[Verdict]) -> tuple[list[Pair], int, int,
                                                                                   list[Verdict], list[Verdict]]:
    """(pairs (before, after), matched by text only, matched by id after a small edit, added, removed)."""
    old = list(before)
    new = list(after)
    pairs: list[Pair] = []
    counts = {"text": 0, "id": 0}

    def take(how: str, same: Callable[[Verdict, Verdict], bool]) -> None:
        nonlocal new
        left: list[Verdict] = []
        for a in new:
            found = next((b for b in old if same(b, a)), None)
            if found is None:
                left.append(a)
                continue
            old.remove(found)
            pairs.append((found, a))
            if how in counts:
                counts[how] += 1
        new = left

    take("exact", lambda b, a: (b.question_id == a.question_id and b.dimension == a.dimension and b.turn == a.turn
                                and normalized(b.question) == normalized(a.question)))
    take("text", lambda b, a: (b.dimension == a.dimension and b.turn == a.turn
                               and normalized(b.question) == normalized(a.question)))
    take("id", lambda b, a: (b.question_id == a.question_id and b.dimension == a.dimension and b.turn == a.turn
                             and similarity(b.question, a.question) >= EDIT_SIMILARITY))
    return pairs, counts["text"], counts["id"], new, old


def same_text(a: Verdict, b: Verdict) -> bool:
    """The two verdicts ask the same question text (normalized): a slightly edited question is not the same."""
    return normalized(a.question) == normalized(b.question)
