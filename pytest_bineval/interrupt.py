"""SIGTERM (what CI sends on a cancel or a timeout) ends a run as Ctrl-C does: the first one raises
:class:`KeyboardInterrupt` in the main thread, so pytest ends the session as interrupted and every output of the
finished tests is written (the JSON and HTML reports, the PR comment, pytest's JUnit), on the pytest-xdist
controller and in each worker alike. The previous handler is back at the first signal (a second SIGTERM ends the
process at once, as a second Ctrl-C would) and when pytest unconfigures. A handler the user (or another plugin)
installed is left alone."""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any


class TermAsInterrupt:
    """Installed at ``pytest_configure``, restored at ``pytest_unconfigure``; ``received``: a SIGTERM came."""

    def __init__(self) -> None:
        self.previous: Any = None
        self.installed = False
        self.received = False

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return  # signal handlers can only be set in the main thread (pytest run inside a thread: left alone)
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
            return  # someone else's handler
        self.previous = signal.signal(signal.SIGTERM, self._interrupt)
        self.installed = True

    def restore(self) -> None:
        if self.installed and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self.previous)
            self.installed = False

    def _interrupt(self, signum: int, frame: FrameType | None) -> None:
        self.received = True
        self.restore()  # a second SIGTERM ends the process at once
        raise KeyboardInterrupt("SIGTERM")
