"""Did the source change between the baseline and this run? :class:`SourceChange` of one evaluation, made by
:func:`diff_sources` from the two records' source digests (:attr:`EvaluationRecord.source_digest`), documents
(:attr:`EvaluationRecord.documents`) and kept source texts.

A flip on the same output is the judge's noise only when the source is the same too: when the retrieved documents
changed (a retriever's ``k``, an index rebuilt), the judge was asked about other evidence. So a comparison tells
four cases apart (:meth:`SourceChange.label`): *output changed*, *source changed* (the same output judged against
another source), *same output and source*, and *source unknown* (a baseline written before sources were
recorded: never taken for unchanged).

Documents are matched by id, else by title, else by the digest of their text: one found in one run only is
*added* or *removed*, one whose id (or title) is found in both with another text (or title) is *changed*; the
same documents in another order are *reordered*. The text diff compares the kept source texts (the first
:data:`~pytest_bineval.report.record.SOURCE_IN_REPORT` characters, as the judge read them), clipped.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from .record import SOURCE_IN_REPORT, EvaluationRecord, SourceDocument

SourceState = Literal["same", "changed", "unknown"]
DIFF_LINES = 60  # lines of a source's text diff kept
DIFF_CHARS = 6000  # characters of a source's text diff kept


class SourceChange(BaseModel):
    """How one evaluation's source differs from the baseline's."""

    state: SourceState = Field(default="unknown", description="same or changed (by digest); unknown when either "
                               "record has no source digest (a report written before sources were recorded)")
    added: list[SourceDocument] = Field(default_factory=list, description="documents of this run's source the "
                                        "baseline's does not have (by id, else title, else text)")
    removed: list[SourceDocument] = Field(default_factory=list, description="documents of the baseline's source "
                                          "this run's does not have (numbered as in the baseline)")
    changed: list[SourceDocument] = Field(default_factory=list, description="documents of this run whose id (or "
                                          "title) the baseline has with another text or title")
    reordered: bool = Field(default=False, description="the same documents in another order")
    text_diff: str = Field(default="", description="unified diff of the kept source texts (baseline first), "
                           f"clipped to {DIFF_LINES} lines")

    @property
    def changed_source(self) -> bool:
        return self.state == "changed"

    def label(self, output_changed: bool) -> str:
        """What changed of what the judge was asked about: ``output changed``, ``source changed``, ``output and
        source changed``, ``same output and source`` or ``same output, source unknown``."""
        if output_changed:
            return "output and source changed" if self.state == "changed" else "output changed"
        return {"changed": "source changed", "same": "same output and source"}.get(self.state,
                                                                                  "same output, source unknown")

    def summary(self) -> str:
        """``1 document removed: [2] Refund policy (id: kb-7); 1 added: ...``, or what else changed; "" when the
        source is the same or unknown."""
        if self.state != "changed":
            return ""
        parts = [f"{len(docs)} document{'s' if len(docs) != 1 else ''} {what}: "
                 + ", ".join(d.heading for d in docs)
                 for what, docs in (("removed", self.removed), ("added", self.added), ("changed", self.changed))
                 if docs]
        if self.reordered:
            parts.append("the same documents in another order")
        if not parts:
            parts.append("its text changed" if self.text_diff else
                         f"its text changed after the first {SOURCE_IN_REPORT} characters the reports keep")
        return "; ".join(parts)


def _key(d: SourceDocument) -> tuple[str, str]:
    if d.id:
        return ("id", d.id)
    if d.title:
        return ("title", d.title)
    return ("digest", d.digest)


def _match(old: list[SourceDocument], new: list[SourceDocument],
           same: Callable[[SourceDocument, SourceDocument], bool]) -> list[SourceDocument]:
    """Take out of ``old`` and ``new`` the pairs that are ``same`` (first come, first matched); the matched new
    documents."""
    matched = []
    for d in list(new):
        found = next((o for o in old if same(o, d)), None)
        if found is not None:
            old.remove(found)
            new.remove(d)
            matched.append(d)
    return matched


def _documents(before: Sequence[SourceDocument], after: Sequence[SourceDocument]) -> SourceChange:
    old, new = list(before), list(after)
    _match(old, new, lambda o, d: (o.id, o.title, o.digest) == (d.id, d.title, d.digest))  # the same document
    changed = _match(old, new, lambda o, d: _key(o) == _key(d))
    reordered = not old and not new and not changed and [_key(d) for d in before] != [_key(d) for d in after]
    return SourceChange(state="changed", added=new, removed=old, changed=changed, reordered=reordered)


def text_diff(before: str, after: str) -> str:
    """Unified diff of two kept source texts (baseline first), at most :data:`DIFF_LINES` lines and
    :data:`DIFF_CHARS` characters; what was left out is said."""
    lines = list(difflib.unified_diff(before.splitlines(), after.splitlines(), "baseline", "this run", n=1,
                                      lineterm=""))
    whole = "\n".join(lines)
    text = "\n".join(lines[:DIFF_LINES])[:DIFF_CHARS]
    return text if text == whole else f"{text}\n… (clipped: the diff has {len(lines)} lines)"


def diff_sources(before: EvaluationRecord, after: EvaluationRecord) -> SourceChange:
    """How ``after``'s source differs from ``before``'s (the baseline's)."""
    if before.source_digest is None or after.source_digest is None:
        return SourceChange(state="unknown")
    if before.source_digest == after.source_digest:
        return SourceChange(state="same")
    if before.documents is not None or after.documents is not None:
        change = _documents(before.documents or [], after.documents or [])
    else:
        change = SourceChange(state="changed")
    if before.source != after.source:
        change.text_diff = text_diff(before.source or "", after.source or "")
    return change
