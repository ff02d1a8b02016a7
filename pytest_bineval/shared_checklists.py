"""Under pytest-xdist, a checklist generated once per run, not once per worker.

Each worker generates the checklists of its tests when they are not pinned; two workers with tests of one task
would each generate it (twice the requests, and maybe two different checklists for one task). With
:class:`SharedChecklists`, the first worker to need a checklist takes an exclusive lock on a file named by the
checklist's key (``flock``: released when the worker ends, even by a crash), generates it and stores it in the
run's directory; a worker that needs it meanwhile waits on the lock, then reads it. The directory is the run's own
(``<cache dir>/checklists-shared/<pytest-xdist's testrun uid>``): nothing is shared between runs (that is what pins
and the reply cache are for), and the controller removes it when the run ends. Where ``fcntl`` is missing
(Windows) each worker generates its own, as without this.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
from collections.abc import Awaitable, Callable, Hashable
from pathlib import Path

from .files import write_text_atomic
from .models import Checklist

DIRECTORY = "checklists-shared"


def run_directory(cache_dir: str | os.PathLike[str], run: str) -> Path:
    """Where the workers of run ``run`` (pytest-xdist's testrun uid) share their checklists."""
    return Path(cache_dir) / DIRECTORY / "".join(c for c in run if c.isalnum() or c in "-_")


def remove(cache_dir: str | os.PathLike[str], run: str) -> None:
    """The run is over (the controller): its shared checklists go."""
    shutil.rmtree(run_directory(cache_dir, run), ignore_errors=True)


class SharedChecklists:
    """The checklists of one run's workers, by key (see the module)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def once(self, key: Hashable, generate: Callable[[], Awaitable[Checklist]]) -> tuple[Checklist, bool]:
        """The checklist of ``key``: read when another worker generated it (False), else ``generate`` d here and
        stored for the others (True)."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no sharing
            return await generate(), True
        name = hashlib.sha256(repr(key).encode("utf-8")).hexdigest()[:32]
        stored = self.directory / f"{name}.json"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.directory / f"{name}.lock", os.O_CREAT | os.O_RDWR, 0o600)
        except OSError:  # a cache directory this worker cannot write (read-only): it generates its own
            return await generate(), True
        try:
            # waiting must not stop this worker's event loop (a test's other threads judge meanwhile)
            await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
            if stored.exists():
                return Checklist.model_validate_json(stored.read_text(encoding="utf-8")), False
            checklist = await generate()
            with contextlib.suppress(OSError):  # not stored: the others generate it themselves
                write_text_atomic(stored, checklist.model_dump_json())
            return checklist, True
        finally:
            os.close(fd)  # releases the lock
