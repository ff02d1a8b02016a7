"""llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``, the ``server`` extra) serving the embedded
GGUF on 127.0.0.1: what ``bineval serve`` runs, and the real HTTP judge of the tests and the reliability bench.

The plugin reaches it as any hosted model: ``--bineval-model openai/smollm2 --bineval-api-base
http://127.0.0.1:<port>/v1`` (the key is a placeholder; the server ignores it). It binds the loopback address only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

# What llama-cpp-python[server] adds to llama_cpp (the server extra: pip install -e ".[server]" in a clone).
SERVER_MODULES = ("uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")
SERVER_ALIAS = "smollm2"  # the model name the server answers to: litellm's "openai/smollm2"
HOST = "127.0.0.1"


def free_port() -> int:
    """A TCP port of 127.0.0.1 free at the time of asking."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


class LlamaServer:
    """``python -m llama_cpp.server`` with the embedded GGUF on 127.0.0.1 at ``port`` (0: a free one): ready within
    ``startup`` seconds or a RuntimeError with its log; stopped by its pid (SIGTERM, then SIGKILL) on exit.

    ``log``: a file for the server's output (its tail is in the error when it does not start); None: the output goes
    where this process's goes."""

    def __init__(self, log: Path | None = None, *, port: int = 0, startup: float = 90.0, n_ctx: int = 4096,
                 n_threads: int | None = None) -> None:
        from .local import default_threads

        self.log = log
        self.startup = startup
        self.n_ctx = n_ctx
        self.n_threads = n_threads or default_threads()  # None: the cores this process may use (1 per xdist worker)
        self.port = port
        self._proc: subprocess.Popen[bytes] | None = None

    @staticmethod
    def missing() -> list[str]:
        """The modules the server needs that are not installed (empty: it can start)."""
        import importlib.util

        return [m for m in ("llama_cpp", *SERVER_MODULES) if importlib.util.find_spec(m) is None]

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}/v1"

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def _ready(self) -> bool:
        import urllib.request

        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as reply:
                return bool(reply.status == 200 and SERVER_ALIAS in reply.read().decode())
        except OSError:
            return False

    def command(self) -> list[str]:
        """The server's command line (its port chosen first)."""
        from .local import runtime_gguf

        if self.port == 0:
            self.port = free_port()
        return [sys.executable, "-m", "llama_cpp.server", "--model", str(runtime_gguf()), "--model_alias", SERVER_ALIAS,
                "--n_ctx", str(self.n_ctx), "--host", HOST, "--port", str(self.port),
                # prompt processing too: its default is every core (two xdist workers' servers then ran four
                # spinning threads on two cores)
                "--n_threads", str(self.n_threads), "--n_threads_batch", str(self.n_threads),
                # its default cuts a streamed reply short when another request comes in (the reply then ends
                # without a finish reason): the judge streams its questions concurrently, so requests wait their
                # turn instead
                "--interrupt_requests", "False"]

    def start(self) -> LlamaServer:
        out: IO[bytes] | None = self.log.open("wb") if self.log is not None else None
        try:
            self._proc = subprocess.Popen(
                self.command(), stdout=out, stderr=subprocess.STDOUT if out is not None else None,
                start_new_session=True)  # a Ctrl-C of the terminal reaches this process only; it stops the server
        finally:
            if out is not None:
                out.close()
        deadline = time.monotonic() + self.startup
        while not self._ready():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                why = (f"exited ({self._proc.returncode})" if self._proc.poll() is not None
                       else f"not ready within {self.startup:g} s")
                self.stop()
                tail = self.log.read_text(errors="replace")[-3000:] if self.log is not None else "(see above)"
                raise RuntimeError(f"llama_cpp.server on {HOST}:{self.port} {why}:\n{tail}")
            time.sleep(0.5)
        return self

    def wait(self) -> int:
        """Block until the server exits; its exit code."""
        assert self._proc is not None, "start() first"
        return self._proc.wait()

    def stop(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
