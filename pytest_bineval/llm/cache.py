"""A disk cache of model replies (diskcache), safe to share between processes (pytest-xdist).

Values are JSON text carrying their own key, so a damaged or foreign entry is recognised and ignored.
A cache that cannot be opened or read warns (:class:`BinevalCacheWarning`) and the work is recomputed:
the cache never crashes a run and never returns a wrong entry. A database that cannot be opened is
moved aside (nothing is deleted) and a fresh one is made.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Literal

CacheMode = Literal["on", "off", "read-only"]
CACHE_MODES: tuple[CacheMode, ...] = ("on", "off", "read-only")

# Keys of request parameters that may carry credentials: never part of a key or a stored value.
_SECRET_PARAMS = frozenset({"api_key", "azure_ad_token", "aws_secret_access_key", "headers", "extra_headers"})


class BinevalCacheWarning(UserWarning):
    """The cache could not be used for an entry or at all; results were recomputed."""


def cache_key(request: dict[str, Any]) -> str:
    """A stable digest of a request (model, messages, decoding parameters, prompt version)."""
    clean = {k: v for k, v in request.items() if k not in _SECRET_PARAMS}
    blob = json.dumps(clean, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class ResponseCache:
    """Get and set JSON-able dicts by key; ``mode`` is ``on``, ``off`` or ``read-only``."""

    def __init__(self, directory: str | os.PathLike[str], mode: CacheMode = "on") -> None:
        if mode not in CACHE_MODES:
            raise ValueError(f"cache mode must be one of {CACHE_MODES}, not {mode!r}")
        self.directory = Path(directory)
        self.mode: CacheMode = mode
        self._cache: Any = None
        self._broken = False

    def _open(self) -> Any:
        if self._cache is not None or self._broken or self.mode == "off":
            return self._cache
        if self.mode == "read-only" and not self.directory.exists():
            self._broken = True
            return None
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
            cache.set(key, json.dumps({"key": key, "value": value}, ensure_ascii=False))
        except Exception as exc:
            self._warn(f"cannot write cache entry ({exc!r})")

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    @staticmethod
    def _warn(message: str) -> None:
        warnings.warn(message, BinevalCacheWarning, stacklevel=3)
