"""The HTTP side of an OpenAI-compatible ``api_base``: redirects and keys.

- A redirect from the API base to another host is refused (:class:`CrossHostRedirect`, naming both hosts): the
  verdicts would come from a server nobody configured (the SDK drops the key on the way, so that server answers
  anyway). A redirect within the host (``/v1`` -> ``/v1/``, ``http`` -> ``https``) is followed.
- An API key sent to a plain ``http://`` base that is not loopback travels in clear text: said once per base
  (:class:`BinevalInsecureKeyWarning`).

For ``openai/...`` models with an ``api_base`` (llama.cpp's server, vLLM, LM Studio, Ollama's ``/v1``), the client
hands litellm an OpenAI SDK client whose httpx client checks each redirect (an event hook); openai is
litellm's own dependency and is imported only then. Other providers keep litellm's own HTTP client.
"""

from __future__ import annotations

import ipaddress
import threading
import warnings
from typing import Any
from urllib.parse import urlsplit

from ..errors import BinevalInsecureKeyWarning

__all__ = ["BinevalInsecureKeyWarning", "CrossHostRedirect", "is_loopback", "openai_client", "warn_plain_http_key"]


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


def openai_client(api_base: str, api_key: str, timeout: float) -> Any:
    """An ``openai.AsyncOpenAI`` for ``api_base`` that refuses cross-host redirects (close it after the request)."""
    import openai

    # the SDK's own httpx client class (openai 3 moved from httpx to httpx2)
    http = openai.DefaultAsyncHttpxClient(follow_redirects=True, timeout=timeout,
                                          event_hooks={"response": [_refuse_cross_host]})
    return openai.AsyncOpenAI(api_key=api_key, base_url=api_base, http_client=http, max_retries=0, timeout=timeout)
