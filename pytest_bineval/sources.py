"""The source an output was made from: one text, or a list of documents (what a retrieval pipeline retrieved).

``source=`` (of ``assert_passes``, ``evaluate``, the ``bineval`` fixture; ``bineval eval --source`` or
``--documents``) takes:

- a ``str``: the input as one text (an article, a transcript, the user's question with its context);
- a list (or tuple) of documents, each a ``str`` or a mapping with ``"text"`` (a ``str``) and optionally ``"id"``
  and ``"title"`` (each a ``str``; ``None`` or a blank one is the same as none given). No other key is read, so
  another key is an error (a misspelt ``"titel"`` would drop the title unseen); ids may repeat (chunks of one
  file). An empty list is a source all the same: the retriever found nothing, and the judge is told so
  (``None`` is no source at all).

Anything else is an :class:`~pytest_bineval.errors.ArgumentTypeError` (a value of the wrong type) or a
:class:`~pytest_bineval.errors.UsageError` (a mapping without ``"text"``, an unknown key), naming the document
(``source[2]``).

The judge sees the documents numbered, each between ``<document>`` markers inside the source's own ``<input>``
markers (:func:`render_documents`): its heading (``[2] Refund policy (id: kb-7)``) and its text are untrusted, so
the marker tags in them are neutralised (:func:`~pytest_bineval.prompting.delimit`) and neither can close its
document or the input; an id or title is written on one line, at most :data:`HEADING_MAX` characters. An
explanation can name a document by its heading.

A record keeps the digest of the source (:attr:`Source.digest`: of the text, or of the documents' ids, titles and
texts in order; never of how they are rendered) and, for documents, the digest of each document's text with its
number, id and title, so that a comparison with a baseline can say the source changed and which documents were
added or removed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import ArgumentTypeError, UsageError
from .prompting import MARKER_NAMES, _tag_pattern, delimit

DOCUMENT_KEYS = ("text", "id", "title")
HEADING_MAX = 200  # characters of a document's id or title kept (one line)
NO_SOURCE_DIGEST = "none"  # a record's source_digest when no source was given
NO_DOCUMENTS = "(no documents: the list of documents given as the input is empty)"
DOCUMENT_MARKER = "document"
# the tags a document's heading or text may not write: the judge prompt's markers and the document's own
DOCUMENT_TAGS = _tag_pattern((*MARKER_NAMES, DOCUMENT_MARKER))


def digest(text: str) -> str:
    """A short digest of a text (the same as a record's output digest)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _one_line(text: str | None) -> str | None:
    """An id or title on one line, clipped; None when blank."""
    if text is None:
        return None
    line = " ".join(text.split())[:HEADING_MAX]
    return line or None


@dataclass(frozen=True)
class Document:
    """One document of a source: its text, and its id and title when given (one line each)."""

    text: str
    id: str | None = None
    title: str | None = None

    @property
    def digest(self) -> str:
        """Digest of the document's text."""
        return digest(self.text)

    def heading(self, number: int) -> str:
        """``[2] Refund policy (id: kb-7)``: how the judge (and a report) names the document."""
        return heading(number, self.id, self.title)


def heading(number: int, id: str | None, title: str | None) -> str:
    """``[number] title (id: id)``, leaving out what is not given."""
    parts = [f"[{number}]"]
    if title:
        parts.append(title)
    if id:
        parts.append(f"(id: {id})")
    return " ".join(parts)


@dataclass(frozen=True)
class Source:
    """A source as the judge reads it: ``text`` (the string given, or the documents rendered by
    :func:`render_documents`), and ``documents`` when it was given as a list of documents (None: one string)."""

    text: str
    documents: tuple[Document, ...] | None = None

    @property
    def digest(self) -> str:
        """Digest of the source: of its text, or of its documents' ids, titles and texts in order (a reordered
        list is another source: the judge reads the documents in that order)."""
        if self.documents is None:
            return digest(self.text)
        body = json.dumps([[d.id, d.title, d.text] for d in self.documents], ensure_ascii=False)
        return digest("documents:" + body)


# What ``source=`` accepts (checked by :func:`read_source`).
SourceArg = str | Sequence[str | Mapping[str, object]] | Source | None


def render_documents(documents: Sequence[Document]) -> str:
    """The documents as the judge reads them: numbered, each between ``<document>`` markers that neither its
    heading nor its text can close (their marker tags neutralised), separated by a blank line."""
    if not documents:
        return NO_DOCUMENTS
    return "\n\n".join(
        f"<{DOCUMENT_MARKER}>\n{delimit(d.heading(n), DOCUMENT_TAGS)}\n{delimit(d.text, DOCUMENT_TAGS)}\n"
        f"</{DOCUMENT_MARKER}>"
        for n, d in enumerate(documents, 1))


def _text_field(value: Mapping[object, object], key: str, where: str) -> str | None:
    item = value.get(key)
    if item is None:
        return None
    if not isinstance(item, str):
        raise ArgumentTypeError(f"{where}[{key!r}] must be a str{'' if key == 'text' else ' (or None)'}, not "
                                f"{type(item).__name__}"
                                + (f": write str({item!r})" if isinstance(item, (int, float)) else ""))
    return item


def read_document(value: object, where: str) -> Document:
    """One document: a str, or a mapping with ``text`` and optionally ``id`` and ``title``."""
    if isinstance(value, str):
        return Document(text=value)
    if not isinstance(value, Mapping):
        raise ArgumentTypeError(f"{where} must be a str, or a mapping with 'text' and optionally 'id' and 'title', "
                                f"not {type(value).__name__}")
    unknown = [k for k in value if k not in DOCUMENT_KEYS]
    if unknown:
        raise UsageError(f"{where} has {'a key' if len(unknown) == 1 else 'keys'} the judge does not read: "
                         f"{', '.join(repr(k) for k in unknown)}; a document mapping has 'text' and optionally "
                         "'id' and 'title'")
    text = _text_field(value, "text", where)
    if text is None:
        raise UsageError(f"{where} has no 'text': a document mapping needs its text, {{'text': '...'}} (and "
                         "optionally 'id' and 'title')")
    return Document(text=text, id=_one_line(_text_field(value, "id", where)),
                    title=_one_line(_text_field(value, "title", where)))


def read_source(value: object, name: str = "source") -> Source | None:
    """``value`` (a ``source=`` argument) checked and made a :class:`Source`; None for None. ``name``: how the
    errors name it."""
    if value is None or isinstance(value, Source):
        return value
    if isinstance(value, str):
        return Source(text=value)
    if not isinstance(value, (list, tuple)):
        hint = " (one document: pass a list of one, [{...}])" if isinstance(value, Mapping) else ""
        raise ArgumentTypeError(f"{name} must be a str, a list of documents or None, not {type(value).__name__}"
                                + hint)
    documents = tuple(read_document(item, f"{name}[{i}]") for i, item in enumerate(value))
    return Source(text=render_documents(documents), documents=documents)


def source_text(value: object) -> str | None:
    """The text the judge reads of a ``source=`` argument (checked): the string, or the documents rendered."""
    source = read_source(value)
    return None if source is None else source.text
