"""The batches submitted and not yet fetched, written down where the reply cache is: ``batches/registry.json`` in the
cache directory (a lock file beside it, ``fcntl`` locks), or one key in Redis (``<prefix>batch:registry``, a Redis
lock) when the cache is there. Every process sharing the cache (pytest-xdist workers, shards, a later CI job, the
``bineval batch`` command) reads and edits the same record under the lock, so that

- a request pending in a batch is never submitted again: a run that needs it waits for that batch instead (an
  interrupted run, another worker or shard, or a later run resumes waiting);
- a finished batch is fetched once: the first process to find it finished downloads its replies into the reply
  cache and marks it fetched (with the reasons of the requests it failed), the others read the cache;
- the workers of one pytest-xdist run meet before their final pass (:meth:`Registry.arrive`): none judges until
  every worker's batches are fetched.

Nothing secret is written: a batch is known by its id, its provider, model and API base, and the keys of the
requests it covers (digests). Entries fetched more than a week ago, and meetings older than two days, are pruned.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from ..errors import UsageError
from ..files import write_text_atomic

__all__ = ["BatchEntry", "Registry", "RegistryData", "registry_for"]

State = Literal["pending", "fetched"]
KEEP_FETCHED = 7 * 86400.0
KEEP_MEETINGS = 2 * 86400.0
LOCK_WAIT = 900.0  # seconds to wait for the lock (another process may be uploading a large batch)


class BatchEntry(BaseModel):
    """One submitted batch."""

    id: str
    provider: str
    model: str
    api_base: str | None = None
    input_file_id: str = ""
    keys: list[str] = Field(default_factory=list, description="the requests it covers (batch_key digests)")
    checklist_keys: list[str] = Field(default_factory=list, description="of them, the checklist-writing ones")
    submitted: float = 0.0
    by: str = ""  # the run that submitted it (a pytest-xdist run id, or a process id)
    state: State = "pending"
    status: str = "submitted"  # the provider's status, as last seen
    completed: int = 0
    failed: int = 0
    fetched_at: float | None = None
    failures: dict[str, str] = Field(default_factory=dict, description="requests it failed -> why (when fetched)")


class Meeting(BaseModel):
    """The workers of one pytest-xdist run: how many, which have finished their batch rounds, which gave up."""

    workers: int = 1
    done: list[str] = Field(default_factory=list)
    gave_up: dict[str, str] = Field(default_factory=dict)
    started: float = Field(default_factory=time.time)


class RegistryData(BaseModel):
    format: Literal[1] = 1
    batches: dict[str, BatchEntry] = Field(default_factory=dict)
    meetings: dict[str, Meeting] = Field(default_factory=dict)

    def pending(self) -> dict[str, str]:
        """Request key -> id of the pending batch that covers it."""
        return {key: entry.id for entry in self.batches.values() if entry.state == "pending" for key in entry.keys}

    def prune(self, now: float) -> None:
        self.batches = {i: e for i, e in self.batches.items()
                        if e.state == "pending" or (e.fetched_at or now) > now - KEEP_FETCHED}
        self.meetings = {i: m for i, m in self.meetings.items() if m.started > now - KEEP_MEETINGS}


class Registry:
    """The record of one cache (see the module); a backend reads and writes its text under a lock."""

    def __init__(self, where: str) -> None:
        self.where = where  # for messages

    # -- backend -------------------------------------------------------------------------------------------------
    def _read_text(self) -> str | None:
        raise NotImplementedError

    def _write_text(self, text: str) -> None:
        raise NotImplementedError

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        raise NotImplementedError
        yield  # pragma: no cover

    # -- record --------------------------------------------------------------------------------------------------
    def read(self) -> RegistryData:
        """The record as it is now (without the lock: a snapshot)."""
        text = self._read_text()
        if not text:
            return RegistryData()
        try:
            return RegistryData.model_validate_json(text)
        except (ValidationError, ValueError) as exc:
            raise UsageError(f"the batch record at {self.where} cannot be read ({exc.__class__.__name__}): remove it "
                             "if no batch is pending (`bineval batch status` lists them)") from None

    @contextlib.contextmanager
    def edit(self) -> Iterator[RegistryData]:
        """The record under the lock; written back when the block ends without an exception."""
        with self._locked():
            data = self.read()
            yield data
            data.prune(time.time())
            self._write_text(data.model_dump_json(indent=1))

    def arrive(self, run: str, worker: str, workers: int, *, gave_up: str | None = None) -> None:
        """Worker ``worker`` of the pytest-xdist run ``run`` (of ``workers``) has fetched every batch of its rounds
        (or, with ``gave_up``, stopped waiting, saying why)."""
        with self.edit() as data:
            meeting = data.meetings.setdefault(run, Meeting(workers=workers))
            if worker not in meeting.done:
                meeting.done.append(worker)
            if gave_up is not None:
                meeting.gave_up[worker] = gave_up

    def meeting(self, run: str) -> Meeting | None:
        return self.read().meetings.get(run)


class DirRegistry(Registry):
    """The record in ``<cache dir>/batches/registry.json``, locked with ``fcntl`` on ``batches/lock``."""

    def __init__(self, directory: Path) -> None:
        super().__init__(str(directory / "batches" / "registry.json"))
        self.path = directory / "batches" / "registry.json"
        self.lock_path = directory / "batches" / "lock"

    def _read_text(self) -> str | None:
        try:
            return self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None

    def _write_text(self, text: str) -> None:
        write_text_atomic(self.path, text)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            _flock(fd, self.where)
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock


def _flock(fd: int, where: str) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: one process at a time is all that can be promised
        return
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                raise UsageError(f"the batch record at {where} stayed locked for {LOCK_WAIT:g} s") from None
            time.sleep(0.05)


class RedisRegistry(Registry):
    """The record in Redis at ``url``: the key ``<prefix>batch:registry``, locked with a Redis lock."""

    def __init__(self, url: str, prefix: str) -> None:
        from ..llm.redis_cache import display_url

        super().__init__(f"{display_url(url)} ({prefix}batch:registry)")
        self.url = url
        self.key = f"{prefix}batch:registry"
        self.lock_key = f"{prefix}batch:lock"
        self._client: Any = None

    def _redis(self) -> Any:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(self.url, socket_timeout=10, socket_connect_timeout=10)
        return self._client

    def _read_text(self) -> str | None:
        raw = self._call(lambda r: r.get(self.key))
        return None if raw is None else bytes(raw).decode("utf-8")

    def _write_text(self, text: str) -> None:
        self._call(lambda r: r.set(self.key, text.encode("utf-8")))

    def _call(self, command: Any) -> Any:
        try:
            return command(self._redis())
        except Exception as exc:
            from ..llm.redis_cache import url_secrets

            message = f"{type(exc).__name__}: {exc}"
            for secret in url_secrets(self.url):
                message = message.replace(secret, "***")
            raise UsageError(f"the batch record at {self.where} cannot be used ({message})") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        lock = self._call(lambda r: r.lock(self.lock_key, timeout=LOCK_WAIT, blocking_timeout=LOCK_WAIT))
        if not self._call(lambda r: lock.acquire()):
            raise UsageError(f"the batch record at {self.where} stayed locked for {LOCK_WAIT:g} s")
        try:
            yield
        finally:
            with contextlib.suppress(Exception):  # expired meanwhile: nothing left to release
                lock.release()

    def close(self) -> None:
        if self._client is not None:
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None


def registry_for(cache_dir: str | os.PathLike[str], cache_url: str | None, cache_prefix: str) -> Registry:
    """The record beside the reply cache of these settings: in Redis with ``cache_url``, else in ``cache_dir``."""
    if cache_url:
        return RedisRegistry(cache_url, cache_prefix)
    return DirRegistry(Path(cache_dir))


def dumps(data: dict[str, Any]) -> str:
    return json.dumps(data, sort_keys=True)
