"""Settings: the one definition of every engine setting, its default, its validation and its help text.

The pytest options (``--bineval-<name>`` / ini ``bineval_<name>``), the ``bineval`` command and
``bineval bench`` are all built from :data:`SETTING_SPECS`, so a default is written down once, here.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Iterable
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from .budget import budget_value
from .errors import UsageError
from .kinds import EXPLAIN_MODES, STREAM_MODES, ExplainMode, StreamMode
from .llm.cache import CACHE_MODES, CacheMode, key_env_value
from .llm.local import DEFAULT_MODEL
from .llm.redis_cache import redis_url_value

__all__ = ["CACHE_MODES", "EXPLAIN_MODES", "SETTING_SPECS", "CacheMode", "ExplainMode", "OptionSpec", "Settings",
           "add_setting_arguments", "settings_from_args"]


# -- parsers of option text: argparse.ArgumentTypeError on a bad value ----------------------------------------
def number_in(cast: Callable[[str], float], low: float | None = None, high: float | None = None, *,
              above: bool = False, range_text: str | None = None) -> Callable[[str], Any]:
    """A parser of ``cast(text)`` within [low, high] (``above``: strictly greater than ``low``), a finite number
    (``inf``, ``1e309`` and ``nan`` are refused); ``range_text`` replaces the generic message (e.g. "thresholds
    are shares of yes answers within [0, 1]")."""
    kind = "an integer" if cast is int else "a number"

    def parse(text: str) -> Any:
        try:
            v = cast(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {kind}: {text!r}") from None
        if not math.isfinite(v):
            raise argparse.ArgumentTypeError(f"not a finite number: {text.strip()!r}")
        ok = (low is None or (v > low if above else v >= low)) and (high is None or v <= high)
        if not ok:
            if range_text is not None:
                raise argparse.ArgumentTypeError(f"{range_text}, not {v}")
            if high is None:
                raise argparse.ArgumentTypeError(f"must be {'>' if above else '>='} {low:g}, not {v}")
            raise argparse.ArgumentTypeError(f"must be within {'(' if above else '['}{low:g}, {high:g}], not {v}")
        return v

    return parse


positive_int = number_in(int, 1)
non_negative_int = number_in(int, 0)
positive_float = number_in(float, 0, above=True)
# Sane upper bounds: beyond them a value is a typo, and it would make a run's deadline or cost unbounded in effect.
MAX_TIMEOUT = 3600.0  # seconds to wait for one reply
timeout_seconds = number_in(float, 0, MAX_TIMEOUT, above=True,
                            range_text=f"a timeout is a number of seconds within (0, {MAX_TIMEOUT:g}]")
temperature = number_in(float, 0, 2, range_text="temperature must be within [0, 2]")


def confidence_level(text: str) -> float:
    """A confidence level strictly between 0 and 1 (0.95)."""
    try:
        value = float(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"a confidence level is strictly between 0 and 1 (e.g. 0.95), not {value}")
    return value


def choice(options: Iterable[str]) -> Callable[[str], str]:
    allowed = tuple(options)

    def parse(text: str) -> str:
        if text not in allowed:
            raise argparse.ArgumentTypeError(f"invalid choice: {text!r} (choose from {', '.join(allowed)})")
        return text

    parse.__name__ = "choice"
    return parse


def widths_value(text: str) -> str:
    """Qworld widths: ``3,4,3`` (scenarios, perspectives, criteria) or one number for all levels."""
    parts = [p.strip() for p in text.strip("()[] ").replace("/", ",").split(",") if p.strip()]
    if len(parts) not in (1, 3) or not all(p.isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(
            f"widths are three whole numbers >= 1 like 3,4,3 (or one for all), not {text!r}")
    return ",".join(parts * 3 if len(parts) == 1 else parts)


def similarity_value(text: str) -> str:
    text = text.strip()
    if text in ("lexical", "minilm", "off") or (text.startswith("embedding:") and text[len("embedding:"):].strip()):
        return text
    raise argparse.ArgumentTypeError(f"invalid similarity {text!r} (lexical, minilm, embedding:<litellm model> or off)")


def text_value(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty")
    return text.strip()


def _opt(help: str, parse: Callable[[str], Any] | None, metavar: str | None = None,
         shown: str | None = None) -> dict[str, Any]:
    """The metadata that makes a Settings field a command-line option (``shown``: the default's description)."""
    return {"help": help, "parse": parse, "metavar": metavar, "shown": shown}


@dataclass(frozen=True)
class Settings:
    """Everything that shapes model calls. Picklable, holds no secret (keys stay in the environment)."""

    model: str | None = field(default=None, metadata=_opt(
        "judge model, a litellm model string", text_value, "MODEL", shown=f"the embedded {DEFAULT_MODEL}"))
    checklist_model: str | None = field(default=None, metadata=_opt(
        "model that writes checklists and the optimizer's lessons", text_value, "MODEL", shown="the judge model"))
    api_base: str | None = field(default=None, metadata=_opt(
        "base URL of an OpenAI-compatible server for the models (e.g. http://127.0.0.1:8080/v1), instead of "
        "OPENAI_API_BASE", text_value, "URL", shown="the provider's own"))
    cache: CacheMode = field(default="on", metadata=_opt(
        "reply cache: on, off, read-only (CI runs that must not write), or replay (read-only, and a reply not in "
        "the cache is an error instead of a request: fork pull requests without the judge's key)",
        choice(CACHE_MODES), "MODE"))
    cache_dir: str = field(default=".bineval_cache", metadata=_opt(
        "cache directory (in pytest: relative to the rootdir)", text_value, "DIR"))
    cache_url: str | None = field(default=None, repr=False, metadata=_opt(
        "a reply cache in Redis shared by every runner, instead of the cache directory: redis://host:port/db "
        "(with :password@ before the host if needed), or rediss:// for TLS (the redis extra); read-only writes "
        "nothing there, a server that cannot be reached is warned about and the run is judged without the cache",
        redis_url_value, "URL",
        shown="none, the cache directory"))
    cache_prefix: str = field(default="bineval:", metadata=_opt(
        "with a Redis cache URL: the prefix of every key (runs with different prefixes share nothing)",
        text_value, "PREFIX"))
    cache_ttl: int | None = field(default=None, metadata=_opt(
        "seconds a cache entry is kept after it is written (in Redis and in the cache directory)", positive_int,
        "SECONDS", shown="no expiry"))
    cache_key_env: str | None = field(default=None, metadata=_opt(
        "sign the cache's entries: the NAME of an environment variable holding a secret (16 characters or more); "
        "entries are written with an HMAC of their key and value, and an unsigned or forged entry is not used (its "
        "question is asked again). A runner where the variable is empty (a fork's pull request) may only read "
        "(--bineval-cache read-only or replay), unchecked", key_env_value, "NAME", shown="none, unsigned"))
    concurrency: int = field(default=8, metadata=_opt(
        "parallel requests to hosted models (the embedded model is serialized)", positive_int, "N"))
    timeout: float = field(default=120.0, metadata=_opt(
        "seconds to wait for one model reply (and for one check of the catalogue); one evaluation's requests, "
        "retries and waits end within timeout x (retries + 1) + 1 s (at most 3600)", timeout_seconds, "SECONDS"))
    retries: int = field(default=2, metadata=_opt(
        "retries of a failed or unparseable reply (at most 20)",
        number_in(int, 0, 20, range_text="retries are within [0, 20]"), "N"))
    temperature: float = field(default=0.0, metadata=_opt(
        "sampling temperature of the models", temperature, "T"))
    repeats: int = field(default=1, metadata=_opt(
        "ask every question K times (each repeat cached apart) and score the share of yes over all answers; "
        "questions whose answers differ are reported as unstable (a judge that never varies, like the embedded "
        "model, gives K equal answers)", positive_int, "K"))
    confirm: int = field(default=0, metadata=_opt(
        "re-ask the questions answered no (and yes with P(yes) within 0.1 of 0.5) up to K more times, stopping "
        "when the Wilson interval of their yes share at --bineval-confidence lies on one side of 0.5; the verdict "
        "is the majority, and a split that never decides is reported as unstable (re-asks are cached apart; not "
        "with --bineval-repeats)", non_negative_int, "K"))
    confidence: float = field(default=0.95, metadata=_opt(
        "confidence level of the Wilson interval that stops --bineval-confirm's re-asks", confidence_level, "LEVEL"))
    stream: StreamMode = field(default="auto", metadata=_opt(
        "auto: a judge that cannot continue a prefill (hosted models, OpenAI-compatible servers) is asked for the "
        "answer and its explanation in one streamed reply, closed after the answer when no explanation is wanted "
        "(one request per question); a server that cannot stream is found once and gets an answer request and an "
        "explanation request instead; off: always the two requests", choice(STREAM_MODES), "MODE"))
    explain: ExplainMode = field(default="failing", metadata=_opt(
        "which verdicts get an explanation: failing (every no), all, or none; the answer always comes first, "
        "from one token", choice(EXPLAIN_MODES), "MODE"))
    judge_prompt: str | None = field(default=None, metadata=_opt(
        "an evaluator prompt file of your own, in the format of the packaged judge.md (e.g. one aligned with "
        "`bineval align`)", text_value, "FILE", shown="the packaged judge.md"))
    qworld_widths: str = field(default="3,3,3", metadata=_opt(
        "criteria='qworld': generation rounds per level of the expansion tree (scenarios, perspectives, criteria): "
        "one decomposition + width-1 'what else?' rounds; the paper's reference code runs 4,5,4", widths_value,
        "W,W,W"))
    qworld_top_k: int | None = field(default=None, metadata=_opt(
        "criteria='qworld': keep the K criteria with the most points", positive_int, "K", shown="all"))
    qworld_similarity: str = field(default="lexical", metadata=_opt(
        "criteria='qworld': duplicate pre-filter of the review step: lexical, minilm (the [embeddings] extra), "
        "embedding:<litellm model>, or off", similarity_value, "MEASURE"))
    budget: str | None = field(default=None, metadata=_opt(
        "stop spending once this much is spent (checklists and judging): dollars (0.50 or $0.50, litellm's prices) "
        "or tokens (200000tok, 200ktok, 2Mtok) for models without a price; the evaluations after that are errors "
        "saying so, never passes. The budget is kept per process: under pytest-xdist each of N workers keeps to "
        "budget / N (the summary says the share); each shard of a CI matrix keeps the whole budget", budget_value,
        "AMOUNT", shown="none"))
    extra: dict[str, Any] = field(default_factory=dict)  # extra litellm parameters (Python API only)
    budget_workers: int = 1  # the processes sharing the budget (pytest-xdist workers): each keeps budget / N

    def __post_init__(self) -> None:
        for f in fields(self):
            parse = f.metadata.get("parse")
            value = getattr(self, f.name)
            if parse is None or value is None:
                continue
            try:
                parse(str(value))
            except argparse.ArgumentTypeError as exc:
                raise UsageError(f"{f.name}: {exc}") from None
        if self.confirm and self.repeats > 1:
            raise UsageError(f"confirm={self.confirm} (--bineval-confirm) and repeats={self.repeats} "
                             "(--bineval-repeats) do not combine: repeats asks every question K times, confirm "
                             "re-asks only the failing ones; choose one")

    @property
    def judge_model(self) -> str:
        return self.model or DEFAULT_MODEL

    @property
    def generator_model(self) -> str:
        return self.checklist_model or self.judge_model

    def with_overrides(self, **changes: Any) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


@dataclass(frozen=True)
class OptionSpec:
    """One command-line option: ``name`` without prefix (``cache-dir``), its attribute, parser and help."""

    name: str
    attr: str
    help: str
    parse: Callable[[str], Any] | None = None  # None: a flag (store_true)
    metavar: str | None = None
    default: Any = None
    bare: str | None = None  # a valued option that may be given without a value: it then takes this one

    def help_with_default(self) -> str:
        if self.parse is None:
            return self.help
        return f"{self.help} (default: {self.default})"


def setting_specs() -> tuple[OptionSpec, ...]:
    """The options of every :class:`Settings` field that has one, defaults read from the dataclass."""
    out = []
    for f in fields(Settings):
        if "help" not in f.metadata:
            continue
        default = f.metadata.get("shown") or (f.default if f.default is not MISSING else None)
        out.append(OptionSpec(f.name.replace("_", "-"), f.name, f.metadata["help"], f.metadata["parse"],
                              f.metadata["metavar"], default))
    return tuple(out)


SETTING_SPECS = setting_specs()


def add_setting_arguments(parser: argparse.ArgumentParser | Any, *, exclude: Iterable[str] = ()) -> None:
    """Add ``--model``, ``--cache`` ... to an argparse parser (defaults None: :func:`settings_from_args`)."""
    skip = set(exclude)
    for spec in SETTING_SPECS:
        if spec.attr in skip:
            continue
        kwargs: dict[str, Any] = {"type": spec.parse} if spec.parse is not None else {"action": "store_true"}
        parser.add_argument(f"--{spec.name}", dest=spec.attr, default=None, metavar=spec.metavar,
                            help=spec.help_with_default(), **kwargs)


def settings_from_args(args: argparse.Namespace, *, exclude: Iterable[str] = (), **overrides: Any) -> Settings:
    """The settings given as options (``exclude``: the ones :func:`add_setting_arguments` left out, whose names
    a command may use for arguments of its own)."""
    values: dict[str, Any] = {}
    skip = set(exclude)
    for spec in SETTING_SPECS:
        if spec.attr not in skip and getattr(args, spec.attr, None) is not None:
            values[spec.attr] = getattr(args, spec.attr)
    values.update({k: v for k, v in overrides.items() if v is not None})
    return Settings(**values)
