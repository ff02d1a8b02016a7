"""The ``--bineval-*`` options: built from the engine's :data:`~pytest_bineval.settings.SETTING_SPECS` plus
what only the plugin does (:data:`PLUGIN_SPECS`, one :class:`OptionSpec` a line); parsing, validation, the
CLI > ini > default precedence, and :class:`Options`, the validated values.

A light module: the plugin imports it to add the options, so it imports no pydantic model, litellm or model.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

import pytest

from .batch.options import BATCH_SPECS, DEFAULT_TIMEOUT, BatchFailures, check_batch
from .errors import UsageError
from .judge_cli import parse_kappa
from .kinds import FAIL_ON, GATES, PIN_UPDATES, FailOn, Gate, PinUpdate
from .llm.cache import cache_signing
from .settings import SETTING_SPECS, OptionSpec, Settings, choice, number_in

GITHUB_MODES = ("auto", "on", "off")


@dataclass(frozen=True)
class Options:
    """The ``--bineval-*`` options, validated (picklable, for pytest-xdist): the engine's settings and
    what only the pytest plugin does."""

    settings: Settings = field(default_factory=Settings)
    threshold: float | dict[str, float] | None = None
    update_checklists: PinUpdate | None = None  # --bineval-update-checklists[=missing|all]
    strict: bool = False
    report: str | None = None
    html: str | None = None
    optimize: bool = False
    max_iterations: int = 3
    pr_comment: str | None = None  # --bineval-pr-comment PATH (outputs/pr_comment.py)
    baseline: str | None = None
    allow_partial_baseline: bool = False
    fail_on_regression: FailOn | None = None  # --bineval-fail-on-regression[=significant|any]
    regression_tolerance: float = 0.0
    alpha: float = 0.05  # --bineval-alpha: significance level of a dimension's drop against the baseline
    gate: Gate = "mean"
    github: str = "auto"  # auto (GITHUB_ACTIONS=true), on, off
    labels: str | None = None  # --bineval-labels FILE: people's labels of verdicts (pytest_bineval.labels)
    trust_kappa: float | None = None  # --bineval-trust-kappa K: the gate trusts dimensions with kappa >= K only
    batch: bool = False  # --bineval-batch (pytest_bineval.batch)
    batch_timeout: float = DEFAULT_TIMEOUT
    batch_failures: BatchFailures = "direct"


def parse_threshold(text: str) -> float | dict[str, float]:
    """``0.8`` (every dimension) or ``consistency=0.9,fluency=0.6`` or ``0.7,consistency=0.9``."""
    number = number_in(float, 0.0, 1.0, range_text="thresholds are shares of yes answers within [0, 1]")
    text = text.strip()
    if "=" not in text:
        return float(number(text))
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


def _flag(text: str) -> bool:
    return text.strip().lower() in ("1", "true", "yes", "on")


# The one value that turns an option with modes off, also over an ini file's value; any other word that reads as
# "no" (false, no, 0, an empty value) is a usage error, so that a gate is never turned off by a typo.
OFF = "off"
_TRUE = ("1", "true", "yes", "on")
M = TypeVar("M", bound=str)  # a mode word of an option that takes one (kinds.PinUpdate, kinds.FailOn)


def _mode(text: str, modes: tuple[M, ...], error: str) -> M | str:
    """The mode ``text`` names among ``modes`` (the first is the bare option's: true/yes/on/1 name it too, for ini
    files and TOML booleans), or :data:`OFF`; anything else: ``error``."""
    value = text.strip().lower()
    if value in _TRUE:
        return modes[0]
    if value == OFF:
        return OFF
    for mode in modes:
        if value == mode:
            return mode
    raise argparse.ArgumentTypeError(error)


def _choices(modes: tuple[str, ...]) -> str:
    return f"{', '.join(modes)} or {OFF}"


def parse_update(text: str) -> PinUpdate | str:
    """The value of ``--bineval-update-checklists[=MODE]`` (or of the ini key, where true also works)."""
    return _mode(text, PIN_UPDATES, (
        f"invalid mode {text!r}: missing (the default when the option is given bare: missing, stale and new "
        f"tests' pins), all (rewrite every pin the run uses, hand edits included) or {OFF}. To pin the tests of a "
        "path, write the option bare and the path after it (--bineval-update-checklists tests/test_x.py, for a "
        "path that exists), or --bineval-update-checklists=missing tests/test_x.py"))


def parse_fail_on(text: str) -> FailOn | str:
    """``--bineval-fail-on-regression[=significant|any|off]``; in an ini file true works too (significant)."""
    return _mode(text, FAIL_ON, (
        f"invalid choice: {text!r} (choose from {_choices(FAIL_ON)}; significant is the default when the option "
        f"is given bare, {OFF} turns the gate off). A test path right after the bare option is read as a path when "
        "it exists; else write --bineval-fail-on-regression=significant tests/"))


def path_value(text: str) -> str:
    """A file path option's value: not empty (``--bineval-report=`` would write nothing, without a word)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a path is needed here, not an empty value (leave the option out to write "
                                         "or read no file)")
    return text


parse_alpha = number_in(float, 0.0, 1.0, above=True, range_text="alpha is a significance level within (0, 1]")

# A score difference within [0, 1] (--bineval-regression-tolerance).
parse_tolerance = number_in(float, 0.0, 1.0, range_text="a tolerance is a score difference within [0, 1]")

# What only the plugin does (the engine's settings come first, from SETTING_SPECS).
PLUGIN_SPECS: tuple[OptionSpec, ...] = (
    OptionSpec("threshold", "threshold", "minimum share of yes per dimension: 0.8, or consistency=0.9,fluency=0.6",
               parse_threshold, "T", "consistency 0.8, others 0.7"),
    OptionSpec("update-checklists", "update_checklists", "write pinned checklists under __bineval__/: "
               "missing (given bare): the missing and stale ones and tests not pinned yet, never one edited by "
               "hand; all: every pin the run uses, hand edits included; off: none (over an ini value). A path "
               "that exists right after the bare option is a test path", parse_update, "MODE", "off",
               bare="missing"),
    OptionSpec("strict", "strict", "an unpinned or stale checklist is a test error"),
    OptionSpec("report", "report", "write a JSON report of every evaluation to PATH (relative to the rootdir)",
               path_value, "PATH", "none"),
    OptionSpec("pr-comment", "pr_comment", "write the run as a pull-request comment (markdown: regressions "
               "first, no timestamps) to PATH (relative to the rootdir)", path_value, "PATH", "none"),
    OptionSpec("html", "html", "write a self-contained HTML report (verdict grid, plots, outputs) to PATH "
               "(relative to the rootdir)", path_value, "PATH", "none"),
    OptionSpec("optimize", "optimize", "after the run, improve each generator prompt file named by "
               "@pytest.mark.bineval(prompt=...): lessons from its train tests' failing questions, each candidate "
               "judged by running the prompt's tests again (kept only if the held-out score does not drop)"),
    OptionSpec("max-iterations", "max_iterations", "iterations of the --bineval-optimize loop per prompt file",
               number_in(int, 1, 20, range_text="iterations are 1 to 20"), "N", 3),
    OptionSpec("baseline", "baseline", "compare this run with a previous --bineval-report JSON, question by "
               "question (relative to the rootdir)", path_value, "PATH", "none"),
    OptionSpec("allow-partial-baseline", "allow_partial_baseline", "accept a --bineval-baseline report of a partial "
               "run (interrupted, stopped by -x/--maxfail, or ended by an internal error); without it such a "
               "baseline is a usage error"),
    OptionSpec("fail-on-regression", "fail_on_regression", "with --bineval-baseline, fail the session on "
               "significant (given bare): a case whose question flipped from yes to no and kept that answer when "
               "the judge was asked again about both outputs (a confirmed regression), a dimension whose mean "
               "fell across the suite beyond the judge's noise (a sign-flip test over the evaluations, Holm), or "
               "a flip that could not be confirmed; the whole gate errs at most at --bineval-alpha; any: any "
               "question answered yes in the baseline and no now, or any score drop beyond the tolerance; off: no "
               "gate (over an ini value)",
               parse_fail_on, "MODE", "off", bare="significant"),
    OptionSpec("alpha", "alpha", "the regression gate's false-alarm rate: at most this chance that a run with no "
               "real change fails it (half for confirmed regressions, half for the suite's dimensions)",
               parse_alpha, "A", 0.05),
    OptionSpec("regression-tolerance", "regression_tolerance", "a dimension score drop up to this much is not "
               "counted against the baseline", parse_tolerance, "D", 0.0),
    OptionSpec("gate", "gate", "what each threshold is compared with: the score (mean) or the lower end of its "
               "95-percent Wilson interval (lower-bound)", choice(GATES), "GATE", "mean"),
    OptionSpec("github", "github", "GitHub Actions job summary and annotations: auto (when GITHUB_ACTIONS=true), "
               "on, off", choice(GITHUB_MODES), "MODE", "auto"),
    OptionSpec("labels", "labels", "a labels file (JSON lines of people's yes/no on verdicts, relative to the "
               "rootdir): the summary and reports show the judge's agreement with them (kappa, TPR, TNR) for the "
               "questions this run asked; stale labels are said, not used", str, "FILE", "none"),
    OptionSpec("trust-kappa", "trust_kappa", "with --bineval-labels: the regression gate trusts only dimensions "
               "whose kappa against the labels is at least K, and says which it did not trust",
               parse_kappa, "K", "none"),
)
SPECS: tuple[OptionSpec, ...] = (*SETTING_SPECS, *PLUGIN_SPECS, *BATCH_SPECS)


# A valued option's ini key takes a string everywhere, and in pytest 9's native ``[tool.pytest]`` TOML table also an
# unquoted number (``bineval_threshold = 0.8``), which a ``"string"`` key rejects there; ``read_options`` parses
# ``str(value)`` either way. Type unions in ``addini`` arrived in pytest 9.2; before, the key stays a string.
_VALUE_INI_TYPE: Any = (str | int | float) if pytest.version_tuple >= (9, 2) else "string"


def dest(spec: OptionSpec) -> str:
    return "bineval_" + spec.attr


class PathGiven(str):
    """The value of a bare option (``--bineval-update-checklists tests/test_x.py``) that is no mode but a path that
    exists: a test path, put back among the arguments by :func:`put_paths_back` before pytest reads them."""


def _is_path(text: str) -> bool:
    """Whether ``text`` names a file or folder that exists (or a node id in one: ``tests/test_x.py::test_y``)."""
    return os.path.exists(text.split("::", 1)[0])


def _or_path(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse_or_path(text: str) -> Any:
        try:
            return parse(text)
        except argparse.ArgumentTypeError:
            if _is_path(text):
                return PathGiven(text)
            raise

    parse_or_path.__name__ = getattr(parse, "__name__", "parse")
    return parse_or_path


def put_paths_back(args: list[str]) -> None:
    """``--bineval-update-checklists tests/test_x.py`` means the bare option and a test path: ``args`` is changed in
    place to ``--bineval-update-checklists=missing tests/test_x.py`` (for every option with a bare value, when the
    word after it is no mode of it and a path that exists), before pytest parses them."""
    bare = {f"--bineval-{spec.name}": spec for spec in SPECS if spec.bare is not None}
    for i, arg in enumerate(args[:-1]):
        if arg == "--":
            return
        spec = bare.get(arg)
        word = args[i + 1]
        if spec is None or spec.parse is None or word.startswith("-"):  # an option: argparse takes the bare value
            continue
        try:
            spec.parse(word)
        except argparse.ArgumentTypeError:  # no value of the option: a path that exists is a test path
            if _is_path(word):
                args[i] = f"{arg}={spec.bare}"


def add_options(parser: pytest.Parser) -> None:
    group = parser.getgroup("bineval", "LLM output tests with binary checklists (pytest-bineval)")
    for spec in SPECS:
        if spec.bare is not None and spec.parse is not None:  # --bineval-NAME alone means NAME=<bare>
            group.addoption(f"--bineval-{spec.name}", action="store", nargs="?", const=spec.bare,
                            type=_or_path(spec.parse), default=None, dest=dest(spec), metavar=spec.metavar,
                            help=spec.help_with_default())
            parser.addini(dest(spec), spec.help_with_default(), type=_VALUE_INI_TYPE, default="")
        elif spec.parse is None:
            group.addoption(f"--bineval-{spec.name}", action="store_true", default=None, dest=dest(spec),
                            help=spec.help)
            parser.addini(dest(spec), spec.help, type="bool", default=False)
        else:
            group.addoption(f"--bineval-{spec.name}", action="store", type=spec.parse, default=None,
                            dest=dest(spec), metavar=spec.metavar, help=spec.help_with_default())
            parser.addini(dest(spec), spec.help_with_default(), type=_VALUE_INI_TYPE, default="")


def read_options(config: pytest.Config) -> Options:
    """CLI wins over ``[tool.pytest.ini_options]``, which wins over the defaults; bad ini values are usage errors."""
    values: dict[str, Any] = {}
    for spec in SPECS:
        key = dest(spec)
        value = config.getoption(key)
        if value is None:
            try:
                raw = config.getini(key)
            except TypeError as exc:  # pytest 9.0/9.1, [tool.pytest]: a number where a string key is registered
                raise pytest.UsageError(f"{exc} (quote the value: {key} = \"...\")") from None
            if spec.parse is None:
                value = raw if isinstance(raw, bool) else _flag(str(raw))
            elif str(raw).strip():
                try:
                    value = spec.parse(str(raw).strip())
                except argparse.ArgumentTypeError as exc:
                    raise pytest.UsageError(f"ini option {key} = {raw!r}: {exc}") from None
        if isinstance(value, PathGiven):  # never: put_paths_back made it a path again
            raise pytest.UsageError(f"--bineval-{spec.name} {value}: write --bineval-{spec.name}={spec.bare} "
                                    f"{value} (or put the path first)")
        if spec.bare is not None and value == OFF:  # explicitly off, also over the ini file's value
            value = None
        if value is not None:
            values[spec.attr] = value
    setting_names = {f.name for f in fields(Settings)}
    try:  # settings that do not combine (confirm and repeats; the batch and the cache mode), a signing secret a
        # writing run lacks
        settings = Settings(**{k: v for k, v in values.items() if k in setting_names})
        check_batch(bool(values.get("batch")), settings.cache)
        cache_signing(settings.cache_key_env, settings.cache)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    return Options(settings=settings, **{k: v for k, v in values.items() if k not in setting_names})
