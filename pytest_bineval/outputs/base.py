"""What the outputs share: the files they wrote and the problems they met (:class:`OutputLog`, in the config's
stash), and writing a file named by an option (rootdir-relative) without losing the run over an unwritable path."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass
class OutputLog:
    """The outputs' log of the run: ``written`` (label, path as given) in the order written, ``notes`` for the
    terminal, and ``failed`` when a file an option asked for could not be written (the session fails)."""

    written: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    failed: bool = False


OUTPUT_LOG = pytest.StashKey[OutputLog]()


def output_log(config: pytest.Config) -> OutputLog:
    return config.stash.setdefault(OUTPUT_LOG, OutputLog())


def option_path(config: pytest.Config, name: str) -> Path:
    """A path given in an option: relative to the rootdir unless absolute."""
    path = Path(os.path.expanduser(name))
    return path if path.is_absolute() else config.rootpath / path


def check_output_paths(config: pytest.Config, paths: dict[str, str | None]) -> None:
    """A usage error before any test runs when a file option (``--bineval-report`` ...) names a directory: the run
    would be judged, and its file lost at the end."""
    for option, name in paths.items():
        if name and option_path(config, name).is_dir():
            raise pytest.UsageError(
                f"{option} {name}: {option_path(config, name)} is a directory; give the path of the file to write "
                f"in it, e.g. {option} {Path(name) / _EXAMPLE_NAMES.get(option, 'bineval-output')}")


_EXAMPLE_NAMES = {"--bineval-report": "bineval-report.json", "--bineval-html": "bineval-report.html",
                  "--bineval-pr-comment": "bineval-comment.md"}


def write_output(config: pytest.Config, what: str, name: str, write: Callable[[Path], object], *,
                 label: str | None = None, fail: bool = True) -> None:
    """``write(path)`` of the file ``name`` (an option's value); an OSError is a note naming the file, and with
    ``fail`` the session fails (a file the run was asked for is missing); the results stay on the terminal."""
    log = output_log(config)
    path = option_path(config, name)
    try:
        write(path)
    except OSError as exc:
        log.notes.append(f"bineval: cannot write the {what} {path}: {exc}")
        log.failed = log.failed or fail
        return
    if label is not None:
        log.written.append((label, name))
