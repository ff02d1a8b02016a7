"""The HTTP side of model requests: pooled clients, redirects and keys.

- :class:`HttpClients` holds the HTTP clients of one engine: one per (kind, base URL, key) and event loop, each with
  its connection pool (keep-alive), reused by every request on that loop and closed at the end (of the engine for
  the loops it runs itself; of the last evaluation running on any other loop, such as pytest-asyncio's). The CA
  bundle is loaded into one SSL context per engine, and only when an ``https://`` URL is reached.

- A redirect from the API base to another host is refused (:class:`CrossHostRedirect`, naming both hosts): the
  verdicts would come from a server nobody configured (the SDK drops the key on the way, so that server answers
  anyway). A redirect within the host (``/v1`` -> ``/v1/``, ``http`` -> ``https``) is followed.
- An API key sent to a plain ``http://`` base that is not loopback travels in clear text: said once per base
  (:class:`BinevalInsecureKeyWarning`).

For ``openai/...`` models with an ``api_base`` (llama.cpp's server, vLLM, LM Studio, Ollama's ``/v1``), the requests
go through these clients: httpx ones on the direct path (:mod:`.openai_compat`), an OpenAI SDK client for litellm
when litellm knows the model; each checks every redirect (an event hook). httpx and openai are litellm's own
dependencies, imported only then. Other providers keep litellm's own HTTP client.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import ipaddress
import ssl
import threading
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any
from urllib.parse import urlsplit

from ..errors import BinevalInsecureKeyWarning

__all__ = ["BinevalInsecureKeyWarning", "CrossHostRedirect", "HttpClients", "is_loopback", "openai_client",
           "warn_plain_http_key"]


class CrossHostRedirect(Exception):
    """The API base answered with a redirect to another host; not followed."""

    def __init__(self, origin: str, target: str, status: int) -> None:
        self.origin, self.target, self.status = origin, target, status
        super().__init__(
            f"the API base's host {origin} redirected (HTTP {status}) to another host, {target}: refused (the "
            f"verdicts would come from a server that was not configured); set the API base to the address that "
            f"answers")


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


_warned_lock = threading.Lock()
_warned: set[str] = set()  # bases already warned about in this process (a warning, not run state)


def warn_plain_http_key(api_base: str) -> None:
    """Warn once per ``api_base`` that a key goes to it in clear text (an ``http://`` base not on loopback)."""
    parts = urlsplit(api_base)
    if parts.scheme.lower() != "http" or is_loopback(parts.hostname or ""):
        return
    with _warned_lock:
        if api_base in _warned:
            return
        _warned.add(api_base)
    warnings.warn(f"an API key is sent in clear text to {api_base} (plain http://, not this machine): use https:// "
                  "or a server on 127.0.0.1", BinevalInsecureKeyWarning, stacklevel=4)


def _host(url: Any) -> str:
    host = str(url.host)
    return f"{host}:{url.port}" if url.port else host


async def _refuse_cross_host(response: Any) -> None:
    if not response.is_redirect:
        return
    origin = response.request.url
    target = origin.join(response.headers.get("location", ""))
    if target.host != origin.host:
        raise CrossHostRedirect(_host(origin), _host(target), response.status_code)


def openai_client(api_base: str, api_key: str, timeout: float, verify: ssl.SSLContext | None = None) -> Any:
    """An ``openai.AsyncOpenAI`` for ``api_base`` that refuses cross-host redirects (``verify``: its SSL context,
    default the SDK's)."""
    import openai

    # the SDK's own httpx client class (openai 3 moved from httpx to httpx2)
    options: dict[str, Any] = {} if verify is None else {"verify": verify}
    http = openai.DefaultAsyncHttpxClient(follow_redirects=True, timeout=timeout,
                                          event_hooks={"response": [_refuse_cross_host]}, **options)
    return openai.AsyncOpenAI(api_key=api_key, base_url=api_base, http_client=http, max_retries=0, timeout=timeout)


def _key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class HttpClients:
    """The HTTP clients of one engine, one per (kind, base URL, key) and event loop (see the module's docstring).

    A loop is *active* while :meth:`scope` is open on it (nested scopes count) or for good once :meth:`keep` was
    called for it (the engine's own loops, until :meth:`close_loop`). On an active loop :meth:`http` and
    :meth:`sdk` give the pooled client; on any other they give a client for that one request, closed after it.
    ``made`` counts what was made (``"httpx"``, ``"sdk"`` clients, ``"ssl"`` contexts), for tests and benchmarks."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[tuple[asyncio.AbstractEventLoop, str, str, str], Any] = {}
        self._active: dict[asyncio.AbstractEventLoop, int] = {}
        self._ssl: ssl.SSLContext | None = None
        self.made: Counter[str] = Counter()

    def ssl_context(self) -> ssl.SSLContext:
        """The context of every TLS connection of this engine: the CA bundle loaded once (as httpx loads it:
        ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``, else certifi's)."""
        with self._lock:
            if self._ssl is None:
                import httpx

                self._ssl = httpx.create_ssl_context()
                self.made["ssl"] += 1
            return self._ssl

    @staticmethod
    def ready() -> None:
        """Import what the first request would import (httpx's transport, its event-loop backend), so that a
        process's first request spends its time on the request (the caller's deadline does not count this)."""
        import anyio._backends._asyncio  # noqa: F401  (httpcore's backend on asyncio, loaded at the first I/O)
        import h11  # noqa: F401
        import httpcore  # noqa: F401  (httpx imports it when its first transport is made)

        _scheme_transport()

    def keep(self, loop: asyncio.AbstractEventLoop) -> None:
        """Pool the clients of ``loop`` until :meth:`close_loop` (a loop the engine runs itself)."""
        with self._lock:
            self._active[loop] = self._active.get(loop, 0) + 1

    @contextlib.asynccontextmanager
    async def scope(self) -> AsyncIterator[None]:
        """Pool the running loop's clients while this is open; the last scope to end on a loop that is not kept
        closes them."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._active[loop] = self._active.get(loop, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                left = self._active[loop] = self._active[loop] - 1
                if not left:
                    del self._active[loop]
            if not left:
                await self._aclose(loop)

    def _pooled(self, kind: str, base: str, key: str, make: Callable[[], Any]) -> tuple[Any, bool]:
        loop = asyncio.get_running_loop()
        slot = (loop, kind, base, _key_digest(key))
        with self._lock:
            active = self._active.get(loop, 0) > 0
            client = self._clients.get(slot) if active else None
        if client is not None:
            return client, True
        client = make()
        self.made[kind] += 1
        if active:
            with self._lock:
                self._clients[slot] = client
        return client, active

    @contextlib.asynccontextmanager
    async def http(self, base: str, key: str = "") -> AsyncIterator[Any]:
        """An ``httpx.AsyncClient`` for requests to ``base`` (follows redirects within its host, refuses others)."""
        client, pooled = self._pooled("httpx", base, key, self._httpx)
        try:
            yield client
        finally:
            if not pooled:
                await client.aclose()

    @contextlib.asynccontextmanager
    async def sdk(self, base: str, key: str, timeout: float) -> AsyncIterator[Any]:
        """An ``openai.AsyncOpenAI`` for ``base`` and ``key`` (:func:`openai_client`), for litellm's openai path."""
        verify = self.ssl_context() if urlsplit(base).scheme.lower() == "https" else None
        client, pooled = self._pooled("sdk", base, key, lambda: openai_client(base, key, timeout, verify))
        try:
            yield client
        finally:
            if not pooled:
                await client.close()

    def _httpx(self) -> Any:
        import httpx

        return httpx.AsyncClient(transport=_scheme_transport()(self), follow_redirects=True, timeout=None,
                                 event_hooks={"response": [_refuse_cross_host]})

    async def _aclose(self, loop: asyncio.AbstractEventLoop) -> None:
        with self._lock:
            slots = [slot for slot in self._clients if slot[0] is loop]
            clients = [(slot[1], self._clients.pop(slot)) for slot in slots]
        for kind, client in clients:
            with contextlib.suppress(Exception):
                await (client.close() if kind == "sdk" else client.aclose())

    def close_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Close the clients of ``loop`` (not running) and stop pooling on it."""
        with self._lock:
            self._active.pop(loop, None)
        if not loop.is_closed() and not loop.is_running():
            loop.run_until_complete(self._aclose(loop))
        else:  # a loop already closed took its connections with it
            with self._lock:
                for slot in [slot for slot in self._clients if slot[0] is loop]:
                    del self._clients[slot]

    def open_clients(self) -> int:
        """Clients pooled now (all loops)."""
        with self._lock:
            return len(self._clients)


@functools.cache
def _scheme_transport() -> type[Any]:
    """httpx's transport per scheme (a subclass of ``httpx.AsyncBaseTransport``, made when httpx is first needed):
    plain HTTP at once, TLS made at the first ``https://`` request with the pool's SSL context, so that a client of
    an ``http://`` base never loads the CA bundle, and one redirected to ``https://`` still verifies it."""
    import httpx

    # An idle connection is dropped after 4 s, before the 5 s after which common servers (uvicorn: llama.cpp's
    # Python server, vLLM) close it: a request is never sent on a connection the server is closing.
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=32, keepalive_expiry=4.0)

    class SchemeTransport(httpx.AsyncBaseTransport):
        def __init__(self, pool: HttpClients) -> None:
            self._pool = pool
            # no TLS is ever made through it: it serves http:// URLs only (and it trusts no CA, were it asked to)
            self._plain = httpx.AsyncHTTPTransport(verify=ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), limits=limits)
            self._tls: httpx.AsyncHTTPTransport | None = None

        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.url.scheme != "https":
                return await self._plain.handle_async_request(request)
            if self._tls is None:
                self._tls = httpx.AsyncHTTPTransport(verify=self._pool.ssl_context(), limits=limits)
            return await self._tls.handle_async_request(request)

        async def aclose(self) -> None:
            await self._plain.aclose()
            if self._tls is not None:
                await self._tls.aclose()

    return SchemeTransport
