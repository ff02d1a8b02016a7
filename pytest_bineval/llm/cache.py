"""A disk cache of model replies (diskcache), safe to share between processes (pytest-xdist).

Values are JSON text carrying their own key, so a damaged or foreign entry is recognised and ignored; they
pass the redaction step (:func:`~pytest_bineval.redaction.redact_obj`) before they are written.
A cache that cannot be opened or read warns (:class:`BinevalCacheWarning`) and the work is recomputed:
the cache never crashes a run and never returns a wrong entry. In mode ``on`` a database that cannot be
opened is moved aside (nothing is deleted) and a fresh one is made. Mode ``read-only`` writes nothing at all:
no file in the cache directory is created, modified or moved (the database is read as an SQLite snapshot,
``immutable=1``, without diskcache, which rewrites its settings when it opens a cache); a corrupt cache is
ignored with a warning. Mode ``replay`` reads as ``read-only`` does, and a miss sends no request: the client
raises :data:`REPLAY_MISS` instead (fork pull requests, which get no API key, judged from the shared cache only).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
import urllib.parse
import warnings
from pathlib import Path
from typing import Any, Literal

from ..errors import UsageError
from ..redaction import redact_obj

CacheMode = Literal["on", "off", "read-only", "replay"]
CACHE_MODES: tuple[CacheMode, ...] = ("on", "off", "read-only", "replay")

# What a request missing from the cache is under --bineval-cache replay (the client raises it, sending nothing).
REPLAY_MISS = ("not in the shared cache (--bineval-cache replay sends no request); a maintainer must run this pull "
               "request with the judge's key")

# Keys of request parameters that may carry credentials: never part of a key or a stored value.
_SECRET_PARAMS = frozenset({"api_key", "azure_ad_token", "aws_secret_access_key", "headers", "extra_headers"})


class BinevalCacheWarning(UserWarning):
    """The cache could not be used for an entry or at all; results were recomputed."""


def cache_key(request: dict[str, Any]) -> str:
    """A stable digest of a request (model, messages, decoding parameters, prompt version)."""
    clean = {k: v for k, v in request.items() if k not in _SECRET_PARAMS}
    blob = json.dumps(clean, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()  # lone surrogates are keyed too


class ResponseCache:
    """Get and set JSON-able dicts by key; ``mode`` is ``on``, ``off`` or ``read-only``."""

    def __init__(self, directory: str | os.PathLike[str], mode: CacheMode = "on") -> None:
        if mode not in CACHE_MODES:
            raise UsageError(f"cache mode must be one of {CACHE_MODES}, not {mode!r}")
        self.directory = Path(directory)
        self.mode: CacheMode = mode
        self._cache: Any = None
        self._broken = False

    def _open(self) -> Any:
        if self._cache is not None or self._broken or self.mode == "off":
            return self._cache
        if self.mode in ("read-only", "replay"):
            self._cache = _open_snapshot(self.directory)
            self._broken = self._cache is None
            return self._cache
        import diskcache

        try:
            self._cache = diskcache.Cache(str(self.directory))
        except Exception as exc:  # a damaged database: keep it aside, start afresh
            aside = self.directory / f"cache.db.corrupt-{os.getpid()}-{int(time.time())}"
            self._warn(f"cannot open cache at {self.directory} ({exc!r}); moved it to {aside.name}")
            try:
                os.replace(self.directory / "cache.db", aside)
                self._cache = diskcache.Cache(str(self.directory))
            except Exception as exc2:
                self._warn(f"cache disabled for this run: {exc2!r}")
                self._broken = True
        return self._cache

    def get(self, key: str) -> dict[str, Any] | None:
        cache = self._open()
        if cache is None:
            return None
        try:
            raw = cache.get(key)
        except Exception as exc:
            self._warn(f"unreadable cache entry {key[:12]}… ({exc!r}); recomputing")
            return None
        if raw is None:
            return None
        try:
            entry = json.loads(raw)
            if entry.get("key") != key or not isinstance(entry.get("value"), dict):
                raise ValueError("entry does not belong to this key")
        except Exception as exc:
            self._warn(f"corrupt cache entry {key[:12]}… ({exc!r}); recomputing")
            return None
        value: dict[str, Any] = entry["value"]
        return value

    def set(self, key: str, value: dict[str, Any]) -> None:
        if self.mode != "on":
            return
        cache = self._open()
        if cache is None:
            return
        try:
            cache.set(key, json.dumps({"key": key, "value": redact_obj(value)}, ensure_ascii=False))
        except Exception as exc:
            self._warn(f"cannot write cache entry ({exc!r})")

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    @staticmethod
    def _warn(message: str) -> None:
        warnings.warn(message, BinevalCacheWarning, stacklevel=3)


class _Snapshot:
    """Read-only access to a diskcache directory: SQLite opened ``immutable=1`` (no lock, journal or -shm/-wal file
    is created or touched), values read as diskcache stores them (short text in the row, long text in a file)."""

    def __init__(self, directory: Path, connection: sqlite3.Connection) -> None:
        self.directory = directory
        self._db = connection

    def get(self, key: str) -> Any:
        row = self._db.execute(
            "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1 "
            "AND (expire_time IS NULL OR expire_time > ?)", (key, time.time())).fetchone()
        if row is None:
            return None
        mode, filename, value = row
        if mode == 1 and isinstance(value, str):  # diskcache MODE_RAW
            return value
        if mode == 3 and filename:  # diskcache MODE_TEXT: the value lives in a file of the directory
            return (self.directory / filename).read_text(encoding="utf-8")
        raise ValueError(f"entry stored in diskcache mode {mode}, not text")

    def close(self) -> None:
        self._db.close()


def _open_snapshot(directory: Path) -> _Snapshot | None:
    """The cache at ``directory`` for reading only, or None (missing: silently; unreadable: with a warning)."""
    path = directory / "cache.db"
    if not path.is_file():
        return None
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?immutable=1"
    try:
        db = sqlite3.connect(uri, uri=True, check_same_thread=False)
        db.execute("SELECT mode, filename, value FROM Cache LIMIT 1").fetchall()
    except Exception as exc:
        warnings.warn(f"read-only cache at {directory} is unreadable ({exc!r}); ignored for this run (nothing "
                      "was changed)", BinevalCacheWarning, stacklevel=4)
        return None
    return _Snapshot(directory, db)
