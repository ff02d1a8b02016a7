"""The ``--bineval-*`` options: parsing, validation, and the CLI > ini > default precedence."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from .llm.cache import CACHE_MODES
from .session import Options


def parse_threshold(text: str) -> float | dict[str, float]:
    """``0.8`` (every dimension) or ``consistency=0.9,fluency=0.6`` or ``0.7,consistency=0.9``."""
    def number(s: str) -> float:
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {s!r}") from None
        if not 0.0 <= v <= 1.0:
            raise argparse.ArgumentTypeError(f"thresholds are shares of yes answers within [0, 1], not {v}")
        return v

    text = text.strip()
    if "=" not in text:
        return number(text)
    out: dict[str, float] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = part.partition("=")
        if not sep:
            out["*"] = number(name)
        elif not name.strip():
            raise argparse.ArgumentTypeError(f"missing dimension name in {part!r}")
        else:
            out[name.strip()] = number(value)
    return out


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {v}")
    return v


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if v <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0, not {v}")
    return v


def cache_mode(text: str) -> str:
    if text not in CACHE_MODES:
        raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(CACHE_MODES)})")
    return text


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class Spec:
    name: str  # option name without the --bineval- prefix
    help: str
    parse: Callable[[str], Any] | None = None  # None: a flag
    metavar: str | None = None


SPECS: tuple[Spec, ...] = (
    Spec("model", "judge model, a litellm model string (default: the embedded SmolLM2-135M)", str, "MODEL"),
    Spec("checklist-model", "model that writes checklists (default: the judge model)", str, "MODEL"),
    Spec("threshold", "minimum share of yes per dimension: 0.8, or consistency=0.9,fluency=0.6 "
         "(default: consistency 0.8, others 0.7)", parse_threshold, "T"),
    Spec("cache", "reply cache: on, off, or read-only (CI runs that must not write)", cache_mode, "MODE"),
    Spec("cache-dir", "cache directory, relative to the rootdir (default: .bineval_cache)", str, "DIR"),
    Spec("concurrency", "parallel requests to hosted models (default: 8)", positive_int, "N"),
    Spec("timeout", "seconds to wait for one model reply (default: 120)", positive_float, "SECONDS"),
    Spec("update-checklists", "write generated checklists as pinned files under __bineval__/"),
    Spec("strict", "an unpinned or stale checklist is a test error"),
    Spec("report", "write a JSON report of every evaluation to PATH", str, "PATH"),
    Spec("judge-prompt", "an evaluator prompt file of your own, in the format of the packaged judge.md "
         "(e.g. one aligned with `bineval align`), relative to the rootdir", str, "FILE"),
    Spec("optimize", "after the run, rewrite each generator prompt file named by @pytest.mark.bineval(prompt=...) "
         "with lessons from its failing questions (one iteration of the self-update loop)"),
)


def dest(spec: Spec) -> str:
    return "bineval_" + spec.name.replace("-", "_")


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("bineval", "LLM output tests with binary checklists (pytest-bineval)")
    for spec in SPECS:
        if spec.parse is None:
            group.addoption(f"--bineval-{spec.name}", action="store_true", default=None, dest=dest(spec),
                            help=spec.help)
            parser.addini(dest(spec), spec.help, type="bool", default=False)
        else:
            group.addoption(f"--bineval-{spec.name}", action="store", type=spec.parse, default=None,
                            dest=dest(spec), metavar=spec.metavar, help=spec.help)
            parser.addini(dest(spec), spec.help, type="string", default="")


def read_options(config: pytest.Config) -> Options:
    """CLI wins over ``[tool.pytest.ini_options]``, which wins over the defaults; bad ini values are usage errors."""
    values: dict[str, Any] = {}
    for spec in SPECS:
        key = dest(spec)
        value = config.getoption(key)
        if value is None:
            raw = config.getini(key)
            if spec.parse is None:
                value = raw if isinstance(raw, bool) else _flag(str(raw))
            elif str(raw).strip():
                try:
                    value = spec.parse(str(raw).strip())
                except argparse.ArgumentTypeError as exc:
                    raise pytest.UsageError(f"ini option {key} = {raw!r}: {exc}") from None
        if value is not None:
            values[spec.name.replace("-", "_")] = value
    return Options(**values)
