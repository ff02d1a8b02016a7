"""A markdown body that fits a size limit by construction (GitHub's: a comment holds at most 65,536 characters, a
step's job summary at most 1 MiB): the body is a list of :class:`Section` s, each with a rank; while the body is too
large the least important section still in it is cut (the lowest rank; of equal ranks the last), and a note after
the headline says what was cut and where the full report is. Sections without a rank (the headline, the gate's
verdict, the confirmed regressions) are never cut; if they alone are too large, the body is clipped at a line
boundary, and the note says that too."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Section:
    """``lines`` of the body; ``name``: what the note calls it when cut (sections of one name are counted together:
    ``per-test detail (40 of 60)``); ``rank``: None, never cut, else the lower the sooner."""

    lines: list[str]
    name: str = ""
    rank: int | None = None


def _text(lines: Sequence[str]) -> str:
    return "\n".join(lines) + "\n"


def _note(sections: Sequence[Section], cut: set[int], clipped: bool, limit_text: str, where: str) -> list[str]:
    if not cut and not clipped:
        return []
    totals = Counter(s.name for s in sections)
    gone = Counter(sections[i].name for i in sorted(cut))
    said = [name + (f" ({n} of {totals[name]})" if totals[name] > 1 else "") for name, n in gone.items()]
    if clipped:
        said.append("the end of what was left (clipped)")
    return ["", f"> **Cut to stay under {limit_text}:** {', '.join(said)}. The full report: {where}."]


def fit(sections: Sequence[Section], limit: int, *, limit_text: str, where: str,
        size: Callable[[str], int] = len) -> str:
    """The sections' text, at most ``limit`` by ``size`` (characters by default; it must add up over lines, as
    ``len`` and the UTF-8 length do), with the note of what was cut after the first section (the headline)."""
    sections = [s for s in sections if s.lines]  # an empty section is nothing to cut, or to say
    order = sorted((i for i, s in enumerate(sections) if s.rank is not None),
                   key=lambda i: (sections[i].rank, -i))
    weight = [sum(size(line) + 1 for line in s.lines) for s in sections]  # each line and its newline
    cut: set[int] = set()

    def note(clipped: bool = False) -> list[str]:
        return _note(sections, cut, clipped, limit_text, where)

    total = sum(weight)
    while order and total + sum(size(line) + 1 for line in note()) > limit:
        i = order.pop(0)
        cut.add(i)
        total -= weight[i]
    kept = [i for i in range(len(sections)) if i not in cut]
    clipped = total + sum(size(line) + 1 for line in note()) > limit
    lines = list(sections[kept[0]].lines) if kept else []
    lines += note(clipped)
    for i in kept[1:]:
        lines += sections[i].lines
    if not clipped:
        return _text(lines)
    # the sections never cut are too large on their own: clip at a line boundary, the note kept (it is at the top)
    tail = ["", "… (clipped)"]
    room = limit - sum(size(line) + 1 for line in tail)
    shown: list[str] = []
    for line in lines:
        room -= size(line) + 1
        if room < 0:
            break
        shown.append(line)
    return _text([*shown, *tail])
