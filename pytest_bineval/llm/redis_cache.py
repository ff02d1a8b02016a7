"""The reply cache in Redis (``--bineval-cache-url``): one cache for every runner of a suite split over machines.

The entries are those of the disk cache (:class:`~pytest_bineval.llm.cache.ResponseCache`: JSON text carrying its
own key, redacted, signed with ``--bineval-cache-key-env``), under ``prefix`` + the request's digest, with an
optional expiry (``ttl``). Only mode ``on``
sends a write command; ``read-only`` (and any other mode) reads and never writes. A server that cannot be reached,
at the start or part way through the run, is warned about once (:class:`BinevalCacheWarning`) and the rest of the
run is judged without the cache: every question is asked, every request counted. A password in the URL is never
said: messages name the server by :func:`display_url`, and no key holds anything of the URL.

redis-py is imported when the cache is first used (the ``redis`` extra); the option's parser checks that it is
installed, so a run that asks for Redis without it stops at the start with what to install.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import threading
import urllib.parse
from typing import Any

from ..errors import UsageError, install_hint
from ..redaction import redact
from .cache import CacheMode, ResponseCache, Signing, checked_mode

SCHEMES = ("redis", "rediss")
URL_FORM = "redis://[[user]:password@]host[:port][/db] (rediss:// for TLS)"
INSTALL = install_hint("redis")


def check_redis_url(url: str) -> urllib.parse.SplitResult:
    """``url`` split; ValueError (a message that never holds the password) when it is not a Redis URL."""
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port  # ValueError for a port that is not a number within 0-65535
    except ValueError:
        raise ValueError(f"a cache URL is {URL_FORM}, not {display_url(url)}") from None
    if parts.scheme not in SCHEMES or not parts.hostname:
        raise ValueError(f"a cache URL is {URL_FORM}, not {display_url(url)}")
    db = parts.path.strip("/")
    if db and not db.isdigit():
        raise ValueError(f"the database of a cache URL is a number (redis://host:6379/0), not {db!r} in "
                         f"{display_url(url)}")
    del port
    return parts


def display_url(url: str) -> str:
    """``url`` as messages may show it: scheme, user, host, port and database; the password is ``***`` and
    the query (which may carry one) is left out."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(an unreadable URL)"
    if ":" in host:
        host = f"[{host}]"
    user = parts.username or ""
    if parts.password is not None:
        user = f"{user}:***@"
    elif user:
        user = f"{user}@"
    db = parts.path.strip("/") or "0"
    with contextlib.suppress(ValueError):
        db = urllib.parse.parse_qs(parts.query).get("db", [db])[0]  # redis-py reads ?db= over the path
    return f"{parts.scheme}://{user}{host}{port}/{db}"


def url_secrets(url: str) -> list[str]:
    """The secrets a Redis URL carries: its password, in the user part or as a ``password`` query parameter."""
    try:
        parts = urllib.parse.urlsplit(url)
        found = [parts.password or ""]
        found += urllib.parse.parse_qs(parts.query).get("password", [])
    except ValueError:
        return []
    plain = {urllib.parse.unquote(s) for s in found if s}  # what redis-py sends
    out = plain | {s for s in found if s} | {urllib.parse.quote(s, safe="") for s in plain}  # and as written
    return sorted(out, key=len, reverse=True)


def redis_url_value(text: str) -> str:
    """The parser of ``--bineval-cache-url``: a Redis URL, with redis-py installed."""
    url = text.strip()
    try:
        check_redis_url(url)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if importlib.util.find_spec("redis") is None:
        raise argparse.ArgumentTypeError(f"a Redis cache needs redis-py, which is not installed: {INSTALL}")
    return url


class RedisCache(ResponseCache):
    """The reply cache in the Redis at ``url`` (see the module's docstring); ``prefix`` starts every key,
    ``ttl``: seconds an entry is kept after it is written (None: until Redis evicts it)."""

    timeout = 5.0  # seconds to connect, and to wait for one command's reply

    def __init__(self, url: str, mode: CacheMode = "on", *, prefix: str = "bineval:",
                 ttl: float | None = None, signing: Signing | None = None) -> None:
        self.mode = checked_mode(mode)
        self.ttl = ttl
        self._init_signing(signing)
        try:
            check_redis_url(url)
        except ValueError as exc:
            raise UsageError(f"cache_url: {exc}") from None
        self.url = url
        self.location = display_url(url)
        self.prefix = prefix
        self._secrets = url_secrets(url)
        self._client: Any = None
        self._down = False  # unreachable: no more commands in this run
        self._no_writes = False  # a write was refused (a read-only replica, out of memory): reads go on
        self._lock = threading.Lock()

    def _say(self, exc: BaseException) -> str:
        """``exc`` for a message: its type and text, without the URL's password or any other known secret."""
        text = f"{type(exc).__name__}: {exc}"
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return redact(text)

    def _connected(self) -> Any:
        """The client, connected (PING) on first use; None once the server was found unreachable."""
        if self._client is not None or self._down or self.mode == "off":
            return self._client
        with self._lock:
            if self._client is not None or self._down:
                return self._client
            try:
                import redis
                from redis.backoff import NoBackoff
                from redis.retry import Retry

                # one retry at once: a connection dropped while idle is made anew, a server that is gone fails fast
                client = redis.Redis.from_url(self.url, socket_timeout=self.timeout,
                                              socket_connect_timeout=self.timeout, retry=Retry(NoBackoff(), 1))
                client.ping()
            except Exception as exc:
                self._down = True
                self._warn(f"the shared cache at {self.location} cannot be used ({self._say(exc)}): this run is "
                           "judged without the cache (every question is asked and every request counted); check "
                           "that Redis runs there and that the URL's password and database are right")
                return None
            self._client = client
            return client

    def _lost(self, exc: BaseException) -> None:
        """The server went away part way: say it once, use no cache for the rest of the run."""
        with self._lock:
            if self._down:
                return
            self._down = True
        self._warn(f"the shared cache at {self.location} stopped answering ({self._say(exc)}): the rest of this "
                   "run is judged without the cache (every question is asked and every request counted)")

    @staticmethod
    def _unreachable(exc: BaseException) -> bool:
        import redis

        return isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError))

    def _fetch(self, key: str) -> str | bytes | None:
        client = self._connected()
        if client is None or self._down:
            return None
        try:
            raw: bytes | None = client.get(self.prefix + key)
        except Exception as exc:
            if self._unreachable(exc):
                self._lost(exc)
                return None
            raise ValueError(self._say(exc)) from None  # this entry only (e.g. a key holding another type)
        return None if raw is None else raw.decode("utf-8", "surrogatepass")  # as _store encoded it

    def _store(self, key: str, text: str) -> None:
        if self._no_writes:
            return
        client = self._connected()
        if client is None or self._down:
            return
        try:
            client.set(self.prefix + key, text.encode("utf-8", "surrogatepass"),
                       px=None if self.ttl is None else max(1, round(self.ttl * 1000)))
        except Exception as exc:
            if self._unreachable(exc):
                self._lost(exc)
                return
            with self._lock:
                if self._no_writes:
                    return
                self._no_writes = True
            self._warn(f"the shared cache at {self.location} refused a write ({self._say(exc)}): no more entries "
                       "are written in this run (entries are still read from it)")

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # a pool whose server is gone: nothing left to release
                client.close()
