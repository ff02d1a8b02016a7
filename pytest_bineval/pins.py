"""Pinned checklists: reviewable JSON files beside the tests, written only with ``--bineval-update-checklists``.

``__bineval__/<test module stem>/<[Class.]test name>.json`` holds one checklist per (task, dimensions,
question, strategy) that the test used: a test parametrized over cases with different tasks (or, with
``criteria="qworld"``, different questions) keeps every case's checklist, each listing the tests (with their
parameter ids) that use it. A changed task or question text of a test makes its old entry *stale*; an entry
no test uses any more is removed when its last user is re-pinned.

Writers take an exclusive lock on the pin directory and re-read the file before writing, so
pytest-xdist workers that pin into one file never lose each other's updates; files are replaced
atomically, so a reader never sees half a file.

One run pins one checklist per entry (:func:`pin_in_run`): the first test of the run to pin an entry writes the
checklist it was judged with; every later test of the run that pins the same entry, in any pytest-xdist worker
(whose own checklist of the task may differ: workers generate independently), adopts the pinned checklist and is
judged with it, so every test listed under an entry was judged with exactly that checklist. Which entries the run
has written is kept in marker files in the cache directory (see :func:`pin_in_run`), not in the pin files.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import PinError
from .files import write_text_atomic
from .models import Checklist, task_digest

PIN_DIR = "__bineval__"
PIN_FORMAT = 2


def pin_path(module_path: Path, test_name: str) -> Path:
    """``__bineval__/<module stem>/<[Class.]test name without parameters>.json`` beside the test module."""
    base = re.sub(r"\[.*\]$", "", test_name).replace("::", ".")
    safe = re.sub(r"[^\w.-]", "_", base)
    return module_path.parent / PIN_DIR / module_path.stem / f"{safe}.json"


def _dims_key(dimensions: dict[str, str]) -> list[list[str]]:
    return sorted([name, definition] for name, definition in dimensions.items())


def _identity(checklist: Checklist) -> tuple[str, str | None, str]:
    """What a pin entry is for, besides its dimensions: the task, the question (per-question criteria), the
    strategy that wrote it."""
    return checklist.task_digest, checklist.question_digest, checklist.strategy


@dataclass
class PinEntry:
    checklist: Checklist
    tests: list[str] | None = None  # None: a format-1 entry (its users are not recorded)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = self.checklist.model_dump(mode="json")
        body["tests"] = sorted(self.tests or [])
        return body


@dataclass
class PinFile:
    """The checklists pinned for one test function."""

    path: Path
    entries: list[PinEntry] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> PinFile:
        """The file's entries (none when it does not exist); a malformed file is a :class:`PinError` that
        names the file and the field."""
        pins = cls(path)
        if not path.is_file():
            return pins
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise PinError(f"pinned checklist file {path} is unreadable: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("checklists"), list):
            raise PinError(f"pinned checklist file {path}: field 'checklists' is missing or not a list "
                           f"(expected {{\"format\": {PIN_FORMAT}, \"checklists\": [...]}})")
        for i, raw in enumerate(data["checklists"]):
            where = f"pinned checklist file {path}: checklists[{i}]"
            if not isinstance(raw, dict):
                raise PinError(f"{where} is not an object")
            raw = dict(raw)
            tests = raw.pop("tests", None)
            try:
                checklist = Checklist.model_validate(raw)
            except ValidationError as exc:
                fields = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors()[:5])
                raise PinError(f"{where}: invalid field(s) {fields}: {exc.errors()[0]['msg']}") from None
            _check(checklist, where)
            if tests is not None and (not isinstance(tests, list) or not all(isinstance(t, str) for t in tests)):
                raise PinError(f"{where}.tests must be a list of test names")
            pins.entries.append(PinEntry(checklist, tests))
        return pins

    def find(self, task: str, dimensions: dict[str, str], test: str, *, question: str | None = None,
             strategy: str = "bineval") -> tuple[Checklist | None, bool]:
        """(the pin of this task, these dimensions and this question, whether this test's pin is stale: the
        file has its checklist for these dimensions but for another task or question text, or strategy)."""
        wanted = (task_digest(task), None if question is None else task_digest(question), strategy)
        dims = _dims_key(dimensions)
        stale = False
        for e in self.entries:
            if _dims_key(e.checklist.dimensions) != dims:
                continue
            if _identity(e.checklist) == wanted:
                return e.checklist, False
            if e.tests is None or test in e.tests:
                stale = True
        return None, stale

    def entry_of(self, checklist: Checklist) -> PinEntry | None:
        """The entry for ``checklist``'s task (question, strategy) and dimensions, if the file has one."""
        wanted, dims = _identity(checklist), _dims_key(checklist.dimensions)
        return next((e for e in self.entries
                     if _identity(e.checklist) == wanted and _dims_key(e.checklist.dimensions) == dims), None)

    def _put(self, checklist: Checklist, test: str) -> bool:
        """Pin ``checklist`` for ``test``; True when the file's content changed."""
        wanted, dims = _identity(checklist), _dims_key(checklist.dimensions)
        before = [e.to_json() for e in self.entries]
        kept: list[PinEntry] = []
        target: PinEntry | None = None
        for e in self.entries:
            same_dims = _dims_key(e.checklist.dimensions) == dims
            if same_dims and _identity(e.checklist) == wanted:
                target = e
            elif same_dims and e.tests is None:
                continue  # a format-1 entry: one checklist per dimensions, this test's old one
            elif same_dims and test in (e.tests or []):
                e.tests = [t for t in (e.tests or []) if t != test]  # this test's task or question changed
                if not e.tests:
                    continue
            kept.append(e)
        if target is None:
            kept.append(PinEntry(checklist, [test]))
        else:
            target.checklist = checklist
            target.tests = sorted({*(target.tests or []), test})
        self.entries = kept
        return [e.to_json() for e in self.entries] != before

    def _write(self) -> None:
        body = {"format": PIN_FORMAT, "checklists": [e.to_json() for e in self.entries]}
        write_text_atomic(self.path, json.dumps(body, indent=2, ensure_ascii=False) + "\n")


def _check(checklist: Checklist, where: str) -> None:
    if not checklist.dimensions:
        raise PinError(f"{where}.dimensions is empty")
    if not checklist.questions:
        raise PinError(f"{where}.questions is empty: a pinned checklist needs at least one question")
    for j, q in enumerate(checklist.questions):
        if q.dimension not in checklist.dimensions:
            raise PinError(f"{where}.questions[{j}].dimension {q.dimension!r} is not one of the checklist's "
                           f"dimensions ({', '.join(map(repr, checklist.dimensions))})")
        if not q.text.strip():
            raise PinError(f"{where}.questions[{j}].text is empty")
    missing = [d for d in checklist.dimensions if not any(q.dimension == d for q in checklist.questions)]
    if missing:
        raise PinError(f"{where}: dimension(s) {', '.join(map(repr, missing))} have no question")


@contextlib.contextmanager
def _locked(directory: Path, timeout: float = 60.0) -> Iterator[None]:
    """An exclusive lock on ``directory`` between processes (flock on the directory itself: no lock file)."""
    directory.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: a lock file made with O_EXCL
        lock = directory / ".bineval-pin.lock"
        deadline = time.monotonic() + timeout
        while True:
            try:
                os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                break
            except FileExistsError:
                if time.monotonic() > deadline:
                    raise PinError(f"cannot lock {directory}: {lock} is held (remove it if no run is active)") from None
                time.sleep(0.05)
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def entry_id(path: Path, checklist: Checklist) -> str:
    """A name of one pinned checklist (file and entry), for counting what a run wrote."""
    parts = [*map(str, _identity(checklist)), json.dumps(_dims_key(checklist.dimensions))]
    return f"{path}#{'/'.join(parts)}"


def pin(path: Path, checklist: Checklist, test: str) -> bool:
    """Pin ``checklist`` for ``test`` in the file at ``path`` (locked read-modify-write); True if written."""
    with _locked(path.parent):
        pins = PinFile.read(path)
        changed = pins._put(checklist, test)
        if changed:
            pins._write()
    return changed


# Markers of the entries written recently: one small file per entry (named by a digest of the pin file's absolute
# path, the entry's identity and dimensions) holding the time it was written, in the run's cache directory (the
# project's own, shared by its xdist workers; not a shared temporary directory another user could plant files in);
# markers older than a week are removed.
_MARKER_TTL = 7 * 24 * 3600


def _marker(marker_dir: Path, path: Path, checklist: Checklist) -> Path:
    digest = hashlib.sha256(entry_id(path.resolve(), checklist).encode("utf-8", "surrogatepass")).hexdigest()
    return marker_dir / digest


def _written_since(marker: Path, since_ns: int) -> bool:
    try:
        return int(marker.read_text(encoding="ascii")) >= since_ns
    except (OSError, ValueError):  # no marker (or an unreadable one): not written in this run
        return False


def _mark(marker: Path) -> None:
    """Record that the entry was written now (best effort: without a marker, a later test re-pins as before)."""
    try:
        marker.parent.mkdir(parents=True, exist_ok=True)
        new = not marker.exists()
        marker.write_text(str(time.time_ns()), encoding="ascii")
        if not new:
            return
        old = time.time() - _MARKER_TTL  # a new entry: clear the markers no run needs any more
        for other in marker.parent.iterdir():
            with contextlib.suppress(OSError):
                if other.stat().st_mtime < old:
                    other.unlink()
    except OSError:
        pass


def pin_in_run(path: Path, checklist: Checklist, test: str, *, since_ns: int,
               marker_dir: Path) -> tuple[Checklist, bool]:
    """Pin ``checklist`` for ``test``, unless the entry for its task and dimensions was written in this run: then
    list ``test`` under that entry and return its checklist, the one to judge ``test`` with (an adopted checklist).
    Returns (the pinned checklist, whether the file changed).

    "In this run": written at or after ``since_ns`` (``time.time_ns()``), the instant this process's session
    started. pytest-xdist starts every worker's session before any worker runs a test (the controller waits for
    every worker's collection), so what one worker pins, the others count as this run's; what an earlier run
    pinned is rewritten. (Two update runs at once on one project share their pins the same way. A worker that
    pytest-xdist restarts after a crash starts later: it rewrites the entries it pins.) The check and the write
    happen under the pin directory's lock, so two workers never both write an entry."""
    marker = _marker(marker_dir, path, checklist)
    with _locked(path.parent):
        pins = PinFile.read(path)
        existing = pins.entry_of(checklist)
        if existing is not None and _written_since(marker, since_ns):
            checklist = existing.checklist
        changed = pins._put(checklist, test)
        if changed:
            pins._write()
        _mark(marker)
    return checklist, changed
