"""One redaction step for every string that leaves the process: error causes, evaluation records (and so the
terminal, JUnit and the JSON report), and the reply cache.

Removed: the values of environment variables that name a key (``*_API_KEY``, ``*_TOKEN``, ``*_SECRET``,
``*_SECRET_KEY``, ``*_ACCESS_KEY``), secrets the caller names (``api_key`` passed as a parameter),
``api_key=...`` / ``"api_key": "..."`` parameters, ``Authorization: Bearer ...`` values and provider
key shapes (``sk-...``, ``AIza...``). The environment is read at each call (no state is kept); a caller that
redacts many strings at once reads it once, with :func:`secret_values`, and passes the list to :func:`redact_known`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

REDACTED = "[REDACTED]"
MIN_SECRET_LENGTH = 8  # shorter environment values are not treated as secrets (they would erase ordinary words)

_SECRET_NAME = re.compile(r"(?:_API_KEY|_TOKEN|_SECRET|_SECRET_KEY|_ACCESS_KEY|^API_KEY|^TOKEN)$", re.IGNORECASE)
_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "api_key": "value", api_key=value, api-key: value, x-api-key: value
    (re.compile(r"""(?i)(\bapi[_-]?key["']?\s*[=:]\s*["']?)(?!\[REDACTED\])[^\s"'&,;)}\]]+"""), rf"\1{REDACTED}"),
    # query parameters that carry keys
    (re.compile(r"(?i)([?&](?:key|token|access_token|api_key)=)(?!\[REDACTED\])[^&\s\"']+"), rf"\1{REDACTED}"),
    # Authorization: Bearer <token>
    (re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=\-]{8,}"), rf"\1{REDACTED}"),
    # provider key shapes: OpenAI / Anthropic / many OpenAI-compatible hosts (sk-...), Google (AIza...)
    (re.compile(r"\bsk-[A-Za-z0-9][A-Za-z0-9_\-]{7,}"), REDACTED),
    (re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"), REDACTED),
)


def secret_values(extra: Iterable[str] = ()) -> list[str]:
    """The secrets to remove: key-like environment values and ``extra``, longest first."""
    values = {v for k, v in os.environ.items() if _SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LENGTH}
    values.update(v for v in extra if isinstance(v, str) and len(v) >= MIN_SECRET_LENGTH)
    return sorted(values, key=len, reverse=True)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without secrets (see the module's docstring); ``secrets``: more values to remove."""
    return redact_known(text, secret_values(secrets)) if text else text


def redact_known(text: str, found: list[str]) -> str:
    """``text`` without the secrets ``found`` (what :func:`secret_values` returned) and the key-shaped values: for
    many strings at once, the environment read once."""
    if not text:
        return text
    for value in found:
        if value in text:
            text = text.replace(value, REDACTED)
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def redact_obj(obj: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of a JSON-like value (dicts, lists, strings) with :func:`redact` applied to every string."""
    found = secret_values(secrets)
    return _walk(obj, found)


def _walk(obj: Any, found: list[str]) -> Any:
    if isinstance(obj, str):
        return redact_known(obj, found)
    if isinstance(obj, dict):
        return {k: _walk(v, found) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_walk(v, found) for v in obj]
    return obj


def secrets_of_params(params: dict[str, Any]) -> list[str]:
    """Secret values passed as request parameters (``api_key``, tokens, header values)."""
    out: list[str] = []
    for name, value in params.items():
        lname = name.lower()
        if isinstance(value, str) and ("key" in lname or "token" in lname or "secret" in lname):
            out.append(value)
        elif isinstance(value, dict) and "header" in lname:
            out.extend(str(v) for v in value.values())
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")


def replace_surrogates(text: str) -> tuple[str, int]:
    """``text`` with lone surrogates (not encodable as UTF-8) replaced by U+FFFD, and how many there were."""
    return _SURROGATE.subn("\ufffd", text)
