"""Pinned checklists: reviewable JSON files beside the tests, written only with ``--bineval-update-checklists``.

``__bineval__/<test module stem>/<[Class.]test name>.json`` holds one checklist per (task, dimensions,
question, strategy) that the test used: a test parametrized over cases with different tasks (or, with
``criteria="qworld"``, different questions) keeps every case's checklist, each listing the tests (with their
parameter ids) that use it. A changed task or question text of a test makes its old entry *stale*; an entry
no test uses any more is removed when its last user is re-pinned.

Pins are reviewed code. Each entry records what was generated (``"generated"``: a digest of its questions as the
checklist writer produced them), so a hand edit is detectable. ``--bineval-update-checklists`` (mode ``missing``)
writes only the entries that are missing, stale (the task or question text changed) or lists a test the entry does
not list yet; an entry edited by hand is never rewritten, not even when stale, unless the mode is ``all``
(``--bineval-update-checklists=all``: every entry the run uses is written again). :func:`update_pin` returns what
it did (:class:`PinAction`): created, rewritten, listed (a test added to an entry) or kept (edited by hand).

File names: ``<[Class.]test name>.json`` with every character other than letters, digits, ``.``, ``-`` and ``_``
replaced by ``_``; a name longer than :data:`MAX_PIN_NAME` bytes (UTF-8) is cut to a readable prefix and ended
with ``-`` and 12 hex digits of the SHA-256 of the full name, so it stays unique and well under the 255 bytes a
file name may have, also with the atomic writer's temporary suffix.

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
import warnings
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .errors import PinError
from .files import write_text_atomic
from .kinds import PinUpdate
from .models import Checklist, task_digest
from .report.document import PinAction, PinActionKind
from .report.record import questions_digest as digest_of_questions

PIN_DIR = "__bineval__"
PIN_FORMAT = 2
MAX_PIN_NAME = 120  # bytes (UTF-8) of a pin file's name before ".json"; longer names are shortened
# A checklist longer than this is said (PinSizeWarning): a BinEval checklist has tens of questions, and every one is
# asked about every output (100,000 questions took 200-400 s per evaluation and 74 MB of report in the probe).
LARGE_CHECKLIST = 1000
REPORT_BYTES_PER_QUESTION = 750  # about what one verdict adds to the JSON report (74 MB / 100,000)


class PinSizeWarning(UserWarning):
    """A pinned checklist with more than :data:`LARGE_CHECKLIST` questions: it is used, and what it costs is said."""

def _short_name(name: str) -> str:
    raw = name.encode("utf-8", "surrogatepass")
    if len(raw) <= MAX_PIN_NAME:
        return name
    digest = hashlib.sha256(raw).hexdigest()[:12]
    return raw[:MAX_PIN_NAME - 13].decode("utf-8", "ignore") + "-" + digest


def pin_path(module_path: Path, test_name: str) -> Path:
    """``__bineval__/<module stem>/<[Class.]test name without parameters>.json`` beside the test module; a long
    name is shortened (see the module's docstring)."""
    base = re.sub(r"\[.*\]$", "", test_name).replace("::", ".")
    safe = re.sub(r"[^\w.-]", "_", base)
    return module_path.parent / PIN_DIR / module_path.stem / f"{_short_name(safe)}.json"


def questions_digest(checklist: Checklist) -> str:
    """What a pin entry records of its generated questions: an edit to any question changes it."""
    return digest_of_questions(checklist.questions)


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
    generated: str | None = None  # questions_digest of the questions as generated; None: not recorded

    @property
    def edited(self) -> bool:
        """The questions are not the ones generated (edited by hand), or the entry does not record what was
        generated (written by hand, or by a version before 0.x recorded it): either way, reviewed."""
        return self.generated != questions_digest(self.checklist)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = self.checklist.model_dump(mode="json")
        body["tests"] = sorted(self.tests or [])
        if self.generated is not None:
            body["generated"] = self.generated
        return body


@dataclass
class PinFile:
    """The checklists pinned for one test function."""

    path: Path
    entries: list[PinEntry] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> PinFile:
        """The file's entries (none when it does not exist); a malformed file is a :class:`PinError` that
        names the file and the field, and says how to repair it (an update run does not overwrite it: the file
        may hold other reviewed entries)."""
        check_folders(path)  # a file where a pin folder belongs: said as it is
        try:
            return cls._parse(path)
        except PinError as exc:
            raise PinError(f"{exc}. Fix the file by hand (your version control shows what changed), or delete it and "
                           "run pytest --bineval-update-checklists to pin its tests again: an update run does not "
                           "overwrite a pin file it cannot read") from None

    @classmethod
    def _parse(cls, path: Path) -> PinFile:
        pins = cls(path)
        try:
            if not path.is_file():
                return pins
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
            generated = raw.pop("generated", None)
            try:
                checklist = Checklist.model_validate(raw)
            except ValidationError as exc:
                fields = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors()[:5])
                raise PinError(f"{where}: invalid field(s) {fields}: {exc.errors()[0]['msg']}") from None
            _check(checklist, where)
            if tests is not None and (not isinstance(tests, list) or not all(isinstance(t, str) for t in tests)):
                raise PinError(f"{where}.tests must be a list of test names")
            if generated is not None and not isinstance(generated, str):
                raise PinError(f"{where}.generated must be a string (the digest of the generated questions)")
            pins.entries.append(PinEntry(checklist, tests, generated))
            _say_size(checklist, where)
        return pins

    def lookup(self, task: str, dimensions: dict[str, str], test: str, *, question: str | None = None,
               strategy: str = "bineval") -> tuple[PinEntry | None, list[PinEntry]]:
        """(the entry of this task, these dimensions and this question; the entries that are this test's stale
        pins: for these dimensions but for another task or question text, or strategy)."""
        wanted = (task_digest(task), None if question is None else task_digest(question), strategy)
        dims = _dims_key(dimensions)
        stale: list[PinEntry] = []
        for e in self.entries:
            if _dims_key(e.checklist.dimensions) != dims:
                continue
            if _identity(e.checklist) == wanted:
                return e, []
            if e.tests is None or test in e.tests:
                stale.append(e)
        return None, stale

    def find(self, task: str, dimensions: dict[str, str], test: str, *, question: str | None = None,
             strategy: str = "bineval") -> tuple[Checklist | None, bool]:
        """(the pin of this task, these dimensions and this question, whether this test's pin is stale: the
        file has its checklist for these dimensions but for another task or question text, or strategy)."""
        entry, stale = self.lookup(task, dimensions, test, question=question, strategy=strategy)
        return (entry.checklist if entry is not None else None), bool(stale)

    def entry_of(self, checklist: Checklist) -> PinEntry | None:
        """The entry for ``checklist``'s task (question, strategy) and dimensions, if the file has one."""
        wanted, dims = _identity(checklist), _dims_key(checklist.dimensions)
        return next((e for e in self.entries
                     if _identity(e.checklist) == wanted and _dims_key(e.checklist.dimensions) == dims), None)

    def _put(self, checklist: Checklist, test: str, generated: str | None = None) -> bool:
        """Pin ``checklist`` for ``test`` (``generated``: the digest to record when the entry's questions are
        replaced by ``checklist``'s); True when the file's content changed."""
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
            kept.append(PinEntry(checklist, [test], generated))
        else:
            if target.checklist != checklist:
                target.checklist, target.generated = checklist, generated
            target.tests = sorted({*(target.tests or []), test})
        self.entries = kept
        return [e.to_json() for e in self.entries] != before

    def _write(self) -> None:
        body = {"format": PIN_FORMAT, "checklists": [e.to_json() for e in self.entries]}
        try:
            write_text_atomic(self.path, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
        except OSError as exc:
            raise PinError(f"cannot write the pinned checklist file {self.path}: {exc}") from None


def _say_size(checklist: Checklist, where: str) -> None:
    """A :class:`PinSizeWarning` for a checklist of more than :data:`LARGE_CHECKLIST` questions, with what it
    costs each evaluation that uses it."""
    n = len(checklist.questions)
    if n <= LARGE_CHECKLIST:
        return
    judged = sum(1 for q in checklist.questions if q.check is None)
    warnings.warn(PinSizeWarning(
        f"{where} has {n:,} questions (more than {LARGE_CHECKLIST:,}): every evaluation with it asks the judge "
        f"{judged:,} of them ({judged:,} requests per output not in the cache, each within --bineval-timeout) and "
        f"adds about {n * REPORT_BYTES_PER_QUESTION / 1e6:,.0f} MB to the JSON report; a BinEval checklist has "
        "tens of questions: pin fewer, or split the test"), stacklevel=4)


def check_folders(path: Path) -> None:
    """A :class:`PinError` when the folder of the pin file ``path`` (``__bineval__/<module>``) or ``__bineval__``
    itself is a file: no pin can be read or written there."""
    for folder in (path.parent.parent, path.parent):
        if folder.exists() and not folder.is_dir():
            raise PinError(f"{folder} is a file, but pytest-bineval keeps pinned checklists in a folder there "
                           f"({PIN_DIR}/<test module>/<test>.json): move or delete that file (or rename it), then "
                           "run again")


def _check(checklist: Checklist, where: str) -> None:
    if not checklist.dimensions:
        raise PinError(f"{where}.dimensions is empty")
    if not checklist.questions:
        raise PinError(f"{where}.questions is empty: a pinned checklist needs at least one question")
    first: dict[str, int] = {}
    for j, q in enumerate(checklist.questions):
        k = first.setdefault(q.id, j)
        if k != j:  # verdicts, failing questions and the baseline comparison go by id
            raise PinError(f"{where}.questions[{j}].id {q.id!r} is the id of questions[{k}] too: give each question "
                           "its own id")
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
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way (check_folders says which), or no permission
        check_folders(directory / "pin.json")
        raise PinError(f"cannot make the pin folder {directory}: {exc}") from None
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
        changed = pins._put(checklist, test, questions_digest(checklist))
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


def pin_in_run(path: Path, checklist: Checklist, test: str, *, since_ns: int, marker_dir: Path,
               keep_existing: bool = False) -> tuple[Checklist, bool]:
    """Pin ``checklist`` for ``test``, unless the entry for its task and dimensions was written in this run: then
    list ``test`` under that entry and return its checklist, the one to judge ``test`` with (an adopted checklist).
    Returns (the pinned checklist, whether the file changed).

    "In this run": written at or after ``since_ns`` (``time.time_ns()``), the instant this process's session
    started. pytest-xdist starts every worker's session before any worker runs a test (the controller waits for
    every worker's collection), so what one worker pins, the others count as this run's; what an earlier run
    pinned is rewritten. (Two update runs at once on one project share their pins the same way. A worker that
    pytest-xdist restarts after a crash starts later: it rewrites the entries it pins.) The check and the write
    happen under the pin directory's lock, so two workers never both write an entry.

    ``keep_existing``: an entry an earlier run wrote is adopted too, never rewritten (``--bineval-update-checklists``
    in mode ``missing``)."""
    checklist, action = _pin_in_run(path, checklist, test, since_ns=since_ns, marker_dir=marker_dir,
                                    keep_existing=keep_existing)
    return checklist, action is not None


def _pin_in_run(path: Path, checklist: Checklist, test: str, *, since_ns: int, marker_dir: Path,
                keep_existing: bool) -> tuple[Checklist, PinActionKind | None]:
    marker = _marker(marker_dir, path, checklist)
    with _locked(path.parent):
        pins = PinFile.read(path)
        existing = pins.entry_of(checklist)
        generated: str | None = questions_digest(checklist)
        if existing is not None and (keep_existing or _written_since(marker, since_ns)):
            checklist, generated = existing.checklist, existing.generated
        _, stale = pins.lookup(checklist.task, checklist.dimensions, test, question=checklist.question,
                               strategy=checklist.strategy)
        action: PinActionKind | None
        if existing is None:
            action = "rewritten" if stale else "created"
        elif existing.checklist != checklist:
            action = "rewritten"
        else:
            action = "listed"
        if pins._put(checklist, test, generated):
            pins._write()
        else:
            action = None
        _mark(marker)
    return checklist, action


# -- --bineval-update-checklists: what to write, what to keep -----------------------------------------------------
def _action(action: PinActionKind, path: Path, checklist: Checklist, rootpath: Path, why: str = "",
            test: str = "") -> PinAction:
    """The :class:`~pytest_bineval.report.document.PinAction` of ``checklist``'s entry in the file at ``path`` (shown
    relative to the rootdir); ``test``: the test an action ``listed`` added to the entry."""
    try:
        shown = path.relative_to(rootpath).as_posix()
    except ValueError:
        shown = str(path)
    subject = checklist.question if checklist.question is not None else checklist.task
    return PinAction(action=action, path=shown, dimensions=tuple(sorted(checklist.dimensions)), task=subject,
                     why=why, test=test if action == "listed" else "")


def check_inside(path: Path, rootpath: Path) -> None:
    """Refuse to write a pin through a symbolic link (the ``__bineval__`` folder, the module's folder in it, or the
    file) that leads outside the rootdir: a :class:`PinError` naming the link and where it points."""
    root = rootpath.resolve()
    for link in (path.parent.parent, path.parent, path):
        if not link.is_symlink():
            continue
        target = link.resolve()
        if not target.is_relative_to(root):
            raise PinError(
                f"{link} is a symbolic link to {target}, outside the rootdir {root}: pytest-bineval does not write "
                "pinned checklists through it. Replace the link by a folder (or a file) inside the project.")


async def update_pin(path: Path, test: str, task: str, dimensions: dict[str, str], *, question: str | None,
                     strategy: str, mode: PinUpdate, generate: Callable[[], Awaitable[Checklist]], since_ns: int,
                     marker_dir: Path, rootpath: Path) -> tuple[Checklist, bool, list[PinAction]]:
    """``--bineval-update-checklists``: the checklist to judge ``test`` with, whether it is pinned now (False: a
    stale pin kept because it was edited by hand; the generated checklist is returned), and what was done.

    Mode ``missing``: an existing entry is used as it is (``test`` listed under it when it is not yet), and
    nothing is generated; a missing entry is generated and written; a stale one is rewritten unless edited by
    hand. Mode ``all``: every entry is generated and written again (once per run, see :func:`pin_in_run`)."""
    check_inside(path, rootpath)
    entry, stale = PinFile.read(path).lookup(task, dimensions, test, question=question, strategy=strategy)
    actions: list[PinAction] = []
    edited_note = "edited by hand; --bineval-update-checklists=all rewrites it"
    if entry is not None and mode == "missing":
        checklist = entry.checklist
        if entry.tests is not None and test not in entry.tests:
            checklist, action = _pin_in_run(path, checklist, test, since_ns=since_ns, marker_dir=marker_dir,
                                            keep_existing=True)
            if action is not None:
                actions.append(_action(action, path, checklist, rootpath, test=test))
        if entry.edited:
            actions.append(_action("kept", path, checklist, rootpath, edited_note))
        return checklist, True, actions
    kept = [e for e in stale if e.edited] if mode == "missing" else []
    checklist = await generate()
    if kept:
        what = "question" if question is not None else "task"
        why = (f"stale (the {what} text changed), but {edited_note}; {test} is judged with a checklist generated "
               "for it, not pinned")
        actions += [_action("kept", path, e.checklist, rootpath, why) for e in kept]
        return checklist, False, actions
    checklist, action = _pin_in_run(path, checklist, test, since_ns=since_ns, marker_dir=marker_dir,
                                    keep_existing=mode == "missing")
    if action is not None:
        actions.append(_action(action, path, checklist, rootpath, test=test))
    return checklist, True, actions


def checklist_from_json(text: str, where: str, *, entry: int | None = None, task: str | None = None) -> Checklist:
    """A checklist file (``bineval checklist``'s output) or a pin file, for ``bineval eval/align --checklist``: a
    pin file's entry is chosen by ``entry`` (its 1-based number) or ``task`` (its task or question text), and
    needs neither when it holds one. Any problem is a :class:`~pytest_bineval.errors.UsageError` naming the file."""
    from .errors import UsageError

    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{where} is not JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("checklists"), list) and "questions" not in data:
        entries = data["checklists"]
        if not entries:
            raise UsageError(f"{where} is a pin file without entries")
        def label(i: int, e: Any) -> str:
            subject = e.get("question") or e.get("task") if isinstance(e, dict) else None
            dims = ", ".join(e.get("dimensions") or {}) if isinstance(e, dict) else ""
            return f"  --entry {i + 1}: [{dims}] {str(subject)[:70]!r}"
        listing = "\n".join(label(i, e) for i, e in enumerate(entries))
        if entry is not None:
            if not 1 <= entry <= len(entries):
                raise UsageError(f"{where} has {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, "
                                 f"no entry {entry}:\n{listing}")
            chosen = [entry - 1]
        elif task is not None:
            wanted = " ".join(task.split())
            chosen = [i for i, e in enumerate(entries) if isinstance(e, dict) and wanted in
                      (" ".join(str(e.get("task", "")).split()), " ".join(str(e.get("question") or "").split()))]
            if not chosen:
                raise UsageError(f"{where}: no entry has the task {task!r}; its entries:\n{listing}")
        else:
            chosen = list(range(len(entries)))
        if len(chosen) > 1:
            raise UsageError(f"{where} is a pin file with {len(chosen)} matching checklists: choose one with "
                             f"--entry N (or --task TEXT):\n{listing}")
        raw = entries[chosen[0]]
        where = f"{where}: checklists[{chosen[0]}]"
        if isinstance(raw, dict):
            raw = {k: v for k, v in raw.items() if k not in ("tests", "generated")}
        data = raw
    if not isinstance(data, dict):
        raise UsageError(f"{where} is not a checklist (a JSON object with task, dimensions and questions)")
    try:
        checklist = Checklist.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or '(top)'}: {e['msg']}" for e in exc.errors()[:5])
        raise UsageError(f"{where} is not a valid checklist ({problems}); write one with `bineval checklist` "
                         "or give a pin file from __bineval__/") from None
    try:
        _check(checklist, where)
    except PinError as exc:
        raise UsageError(str(exc)) from None
    return checklist
