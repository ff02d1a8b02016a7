"""A disk cache of model replies (diskcache), safe to share between processes (pytest-xdist).

Values are JSON text carrying their own key, so a damaged or foreign entry is recognised and ignored; they
pass the redaction step (:func:`~pytest_bineval.redaction.redact_obj`) before they are written.
A cache that cannot be opened or read warns (:class:`BinevalCacheWarning`) and the work is recomputed:
the cache never crashes a run and never returns a wrong entry. In mode ``on`` a database that cannot be
opened is moved aside (nothing is deleted) and a fresh one is made. Mode ``read-only`` writes nothing at all:
no file in the cache directory is created, modified or moved (the database is read as an SQLite snapshot,
``immutable=1``, without diskcache, which rewrites its settings when it opens a cache); a corrupt cache is
ignored with a warning. ``ttl`` gives entries an expiry time (``--bineval-cache-ttl``).
Mode ``replay`` reads as ``read-only`` does, and a miss sends no request: the client
raises :data:`REPLAY_MISS` instead (fork pull requests, which get no API key, judged from the shared cache only).

The same entries can live in Redis instead, shared by every runner of a suite (:mod:`.redis_cache`); for teams
without one, :func:`merge_caches` (``bineval cache merge``) combines the directories of several runners.

Whoever can write a cache decides the verdicts read from it. Signed entries (:class:`Signing`,
``--bineval-cache-key-env NAME``): every entry written carries an HMAC-SHA256 of its key and value with the secret
held by the environment variable NAME, and a runner that has the secret takes only entries whose HMAC matches; an
unsigned or forged entry is a miss (the question is asked again, its request counted; said once per process). A
runner without the secret (NAME empty, as in a fork's pull request) cannot write signed entries, so it cannot forge
one: it may only read (``read-only``, ``replay``), and reads the entries unchecked, said once. The secret itself is
never stored, said or kept anywhere but in the signer.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import re
import sqlite3
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..errors import BinevalCacheWarning, UsageError
from ..redaction import redact_obj

CacheMode = Literal["on", "off", "read-only", "replay"]
CACHE_MODES: tuple[CacheMode, ...] = ("on", "off", "read-only", "replay")

# What a request missing from the cache is under --bineval-cache replay (the client raises it, sending nothing).
REPLAY_MISS = ("not in the shared cache (--bineval-cache replay sends no request); a maintainer must run this pull "
               "request with the judge's key")

# Keys of request parameters that may carry credentials: never part of a key or a stored value.
_SECRET_PARAMS = frozenset({"api_key", "azure_ad_token", "aws_secret_access_key", "headers", "extra_headers"})


# -- signed entries -------------------------------------------------------------------------------------------------
MIN_SECRET_CHARS = 16
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
SECRET_HINT = "python -c 'import secrets; print(secrets.token_hex(32))'"


class UnsignedEntry(ValueError):
    """An entry without a signature, or whose signature is not the HMAC of its key and value with the secret."""


def key_env_value(text: str) -> str:
    """The parser of ``--bineval-cache-key-env``: the name of an environment variable (the value given is never
    repeated in the error: it may be the secret itself)."""
    import argparse

    name = text.strip()
    if not _ENV_NAME.match(name):
        raise argparse.ArgumentTypeError(
            "give the NAME of the environment variable that holds the signing secret (e.g. BINEVAL_CACHE_SECRET), "
            "not the secret itself; the value given is not a variable name (not shown here)")
    return name


class Signing:
    """Signed cache entries: the secret read from the environment variable ``env`` when this is made (None: the
    variable is empty or unset, this runner has no secret: it reads entries unchecked and must not write).
    Its repr never shows the secret."""

    def __init__(self, env: str) -> None:
        self.env = env
        value = os.environ.get(env, "")
        if value and len(value) < MIN_SECRET_CHARS:
            raise UsageError(f"the cache signing secret in ${env} has {len(value)} characters; give one of at least "
                             f"{MIN_SECRET_CHARS} (e.g. {SECRET_HINT})")
        self._secret = value.encode("utf-8", "surrogatepass") if value else None

    def __repr__(self) -> str:
        return f"Signing(env={self.env!r}, secret={'set' if self.has_secret else 'missing'})"

    @property
    def has_secret(self) -> bool:
        return self._secret is not None

    def sign(self, key: str, value: dict[str, Any]) -> str:
        """The HMAC-SHA256 of ``key`` and ``value`` (canonical JSON), as ``sha256:<hex>``."""
        assert self._secret is not None, "a runner without the secret writes nothing"
        blob = json.dumps([key, value], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
        digest = hmac.new(self._secret, blob.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
        return f"sha256:{digest}"

    def check(self, entry: dict[str, Any]) -> None:
        """:class:`UnsignedEntry` unless ``entry`` carries the signature of its key and value (no secret: no check)."""
        if self._secret is None:
            return
        signature = entry.get("sig")
        if not isinstance(signature, str):
            raise UnsignedEntry("unsigned")
        if not hmac.compare_digest(signature, self.sign(entry["key"], entry["value"])):
            raise UnsignedEntry("signature does not match")


def cache_signing(env: str | None, mode: CacheMode) -> Signing | None:
    """The signing of ``--bineval-cache-key-env`` ``env`` (None: entries are neither signed nor checked). A runner
    without the secret may only read: mode ``on`` without it is a :class:`UsageError` saying what to do."""
    if env is None or mode == "off":
        return None
    signing = Signing(env)
    if not signing.has_secret and mode == "on":
        raise UsageError(f"--bineval-cache-key-env {env}: ${env} is empty or unset, so this run could not sign what "
                         f"it writes to the cache. Set {env} to the signing secret (a CI secret; e.g. {SECRET_HINT}), "
                         "or run with --bineval-cache read-only or replay (a pull request from a fork, which gets no "
                         "secrets: it reads the entries without checking their signatures and writes none)")
    return signing


def cache_key(request: dict[str, Any]) -> str:
    """A stable digest of a request (model, messages, decoding parameters, prompt version)."""
    clean = {k: v for k, v in request.items() if k not in _SECRET_PARAMS}
    blob = json.dumps(clean, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()  # lone surrogates are keyed too


class ResponseCache:
    """Get and set JSON-able dicts by key; ``mode`` is ``on``, ``off`` or ``read-only`` (only ``on`` writes);
    ``ttl``: seconds an entry is kept after it is written (None: until it is removed).

    The entries live in a diskcache directory; :class:`~pytest_bineval.llm.redis_cache.RedisCache` keeps the
    same entries in Redis. A store is reached through :meth:`_fetch`, :meth:`_store` and :meth:`close`."""

    def __init__(self, directory: str | os.PathLike[str], mode: CacheMode = "on", *,
                 ttl: float | None = None, signing: Signing | None = None) -> None:
        self.mode: CacheMode = checked_mode(mode)
        self.ttl = ttl
        self.directory = Path(directory)
        self._cache: Any = None
        self._broken = False
        self._init_signing(signing)

    def _init_signing(self, signing: Signing | None) -> None:
        self.signing = signing
        self.rejected = 0  # entries not used: unsigned or forged (with signing on)
        # called once per refused entry (the engine counts it into its ledger, so the run's summary and report say it)
        self.on_rejected: Callable[[], None] | None = None
        self._unchecked_said = False

    @property
    def writes(self) -> bool:
        """Whether entries are written (mode ``on``; every other mode leaves the store as it is)."""
        return self.mode == "on"

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
            db = self.directory / "cache.db"
            if not db.is_file():  # nothing to move: the directory cannot be made or written
                self._warn(f"cannot open the cache at {self.directory} ({exc!r}): this run is judged without it "
                           "(is the directory writable? --bineval-cache-dir sets another)")
                self._broken = True
                return None
            aside = self.directory / f"cache.db.corrupt-{os.getpid()}-{int(time.time())}"
            try:
                os.replace(db, aside)
                self._cache = diskcache.Cache(str(self.directory))
            except Exception as exc2:
                self._warn(f"cannot open the cache at {self.directory} ({exc!r}), nor start a new one ({exc2!r}): "
                           "this run is judged without it")
                self._broken = True
            else:
                self._warn(f"cannot open the cache at {self.directory} ({exc!r}): its database was moved aside to "
                           f"{aside.name}, and a new one started")
        return self._cache

    def _fetch(self, key: str) -> str | bytes | None:
        """The stored text of ``key``, or None; raises for an entry that cannot be read."""
        cache = self._open()
        return None if cache is None else cache.get(key)

    def _store(self, key: str, text: str) -> None:
        """Write ``text`` under ``key`` (only called when :attr:`writes`); raises when it cannot be written."""
        cache = self._open()
        if cache is not None:
            cache.set(key, text, expire=self.ttl)

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            raw = self._fetch(key)
        except Exception as exc:
            self._warn(f"unreadable cache entry {key[:12]}… ({exc!r}); recomputing")
            return None
        if raw is None:
            return None
        try:
            value = decode_entry(key, raw, self.signing)
        except UnsignedEntry as exc:
            self._rejected(key, str(exc))
            return None
        except Exception as exc:
            self._warn(f"corrupt cache entry {key[:12]}… ({exc!r}); recomputing")
            return None
        if self.signing is not None and not self.signing.has_secret and not self._unchecked_said:
            self._unchecked_said = True
            env = self.signing.env
            self._warn(f"--bineval-cache-key-env {env}: ${env} is empty or unset, so the signatures of the cache "
                       "entries are not checked in this run: its verdicts from the cache are only as trustworthy as "
                       "whoever can write the cache (it writes none itself, so it cannot forge an entry)")
        return value

    def _rejected(self, key: str, why: str) -> None:
        """An unsigned or forged entry: a miss, counted, said once per process."""
        self.rejected += 1
        if self.on_rejected is not None:
            self.on_rejected()
        if self.rejected == 1:
            assert self.signing is not None
            then = "asked again and its reply stored signed" if self.writes else "asked again"
            self._warn(f"cache entry {key[:12]}… is not used: {why} (--bineval-cache-key-env "
                       f"{self.signing.env}: only entries signed with the secret count); its question is {then}. "
                       "Entries written without signing, or by someone without the secret, are all refused so: the "
                       "later ones are not said again")

    def set(self, key: str, value: dict[str, Any]) -> None:
        if not self.writes:
            return
        try:
            self._store(key, encode_entry(key, value, self.signing))
        except Exception as exc:
            self._warn(f"cannot write cache entry ({exc!r})")

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
            self._cache = None

    @staticmethod
    def _warn(message: str) -> None:
        warnings.warn(message, BinevalCacheWarning, stacklevel=3)


def checked_mode(mode: str) -> CacheMode:
    if mode not in CACHE_MODES:
        raise UsageError(f"cache mode must be one of {CACHE_MODES}, not {mode!r}")
    return mode


def encode_entry(key: str, value: dict[str, Any], signing: Signing | None = None) -> str:
    """The stored text of an entry: JSON carrying its own key, the value redacted, and with ``signing`` the
    signature of both (``sig``)."""
    entry: dict[str, Any] = {"key": key, "value": redact_obj(value)}
    if signing is not None and signing.has_secret:
        entry["sig"] = signing.sign(key, entry["value"])
    return json.dumps(entry, ensure_ascii=False)


def decode_entry(key: str, raw: str | bytes, signing: Signing | None = None) -> dict[str, Any]:
    """The value stored as ``raw`` under ``key``; ValueError when it is not an entry of this key,
    :class:`UnsignedEntry` when ``signing`` (with its secret) finds no valid signature of it."""
    entry = json.loads(raw)
    if not isinstance(entry, dict) or entry.get("key") != key or not isinstance(entry.get("value"), dict):
        raise ValueError("entry does not belong to this key")
    if signing is not None:
        signing.check(entry)
    value: dict[str, Any] = entry["value"]
    return value


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
        return self._text(*row)

    def rows(self) -> Iterator[tuple[Any, bool, float | None, Callable[[], str]]]:
        """Every entry not expired: its key, whether diskcache stored the key as is (``raw``: every key of ours),
        its expiry time, and a reader of its text (which raises for a value that is not text or is missing)."""
        cursor = self._db.execute("SELECT key, raw, expire_time, mode, filename, value FROM Cache "
                                  "WHERE expire_time IS NULL OR expire_time > ? ORDER BY rowid", (time.time(),))
        for key, raw, expire_time, mode, filename, value in cursor:
            yield key, bool(raw), expire_time, functools.partial(self._text, mode, filename, value)

    def _text(self, mode: int, filename: str | None, value: Any) -> str:
        if mode == 1 and isinstance(value, str):  # diskcache MODE_RAW
            return value
        if mode == 3 and filename:  # diskcache MODE_TEXT: the value lives in a file of the directory
            return (self.directory / filename).read_text(encoding="utf-8")
        raise ValueError(f"entry stored in diskcache mode {mode}, not text")

    def close(self) -> None:
        self._db.close()


def _connect_snapshot(directory: Path) -> _Snapshot:
    """The cache at ``directory`` for reading only; raises (OSError, sqlite3.Error) when it cannot be read."""
    path = directory / "cache.db"
    if not path.is_file():
        raise FileNotFoundError(f"{directory} holds no cache.db (not a cache directory)")
    uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?immutable=1"
    db = sqlite3.connect(uri, uri=True, check_same_thread=False)
    try:
        db.execute("SELECT key, raw, expire_time, mode, filename, value FROM Cache LIMIT 1").fetchall()
    except Exception:
        db.close()
        raise
    return _Snapshot(directory, db)


def _open_snapshot(directory: Path) -> _Snapshot | None:
    """The cache at ``directory`` for reading only, or None (missing: silently; unreadable: with a warning)."""
    if not (directory / "cache.db").is_file():
        return None
    try:
        return _connect_snapshot(directory)
    except Exception as exc:
        warnings.warn(f"read-only cache at {directory} is unreadable ({exc!r}); ignored for this run (nothing "
                      "was changed)", BinevalCacheWarning, stacklevel=5)
        return None


# -- bineval cache merge: per-shard cache directories into one ---------------------------------------------------
@dataclass
class MergedSource:
    """What one source directory gave: ``added`` entries new in the target, ``present`` ones it held already,
    ``corrupt`` entries skipped (unreadable, or not an entry of its key); ``error``: why the whole directory
    was skipped."""

    directory: Path
    added: int = 0
    present: int = 0
    corrupt: int = 0
    error: str | None = None


@dataclass
class MergeOutcome:
    target: Path
    sources: list[MergedSource] = field(default_factory=list)
    entries: int = 0  # in the target, after the merge

    @property
    def complete(self) -> bool:
        """Whether every entry of every source was read (no directory or entry skipped)."""
        return all(s.error is None and s.corrupt == 0 for s in self.sources)


def merge_caches(sources: Sequence[str | os.PathLike[str]], target: str | os.PathLike[str]) -> MergeOutcome:
    """Copy every entry of the cache directories ``sources`` into the one at ``target`` (created if missing):
    an entry the target holds already is kept as it is, expiry times are kept. The sources are read as
    snapshots (nothing in them is changed); a directory that cannot be read is skipped and said in
    :attr:`MergedSource.error`, an entry that cannot be read is counted in :attr:`MergedSource.corrupt`."""
    import diskcache

    out = Path(target)
    resolved = out.resolve()
    for source in sources:
        if Path(source).resolve() == resolved:
            raise UsageError(f"{source} is both a source and the target: merge into another directory (an "
                             "existing cache given as -o keeps its entries)")
    try:
        cache = diskcache.Cache(str(out))
    except Exception as exc:
        raise UsageError(f"cannot open the target cache {out} ({exc!r}): give a new directory, or a cache "
                         "directory that opens") from None
    outcome = MergeOutcome(out)
    try:
        for source in sources:
            merged = MergedSource(Path(source))
            outcome.sources.append(merged)
            try:
                snapshot = _connect_snapshot(merged.directory)
            except Exception as exc:
                merged.error = str(exc) if isinstance(exc, FileNotFoundError) else f"unreadable ({exc!r})"
                continue
            try:
                _merge_one(snapshot, cache, merged)
            except sqlite3.Error as exc:  # a database damaged past its first rows: what was read is kept
                merged.error = f"unreadable part way ({exc!r}); {merged.added} entries were copied before"
            finally:
                snapshot.close()
        outcome.entries = len(cache)
    finally:
        cache.close()
    return outcome


def _merge_one(snapshot: _Snapshot, cache: Any, merged: MergedSource) -> None:
    now = time.time()
    with cache.transact():
        for key, raw, expire_time, read in snapshot.rows():
            try:
                if not (raw and isinstance(key, str)):
                    raise ValueError("not an entry of a bineval cache")
                text = read()
                decode_entry(key, text)
            except Exception:
                merged.corrupt += 1
                continue
            expire = None if expire_time is None else max(expire_time - now, 0.001)
            if cache.add(key, text, expire=expire):
                merged.added += 1
            else:
                merged.present += 1
