"""Fixtures of the integration tests: one llama.cpp server per test process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pytest_bineval.llm.server import LlamaServer


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``http://127.0.0.1:<port>/v1`` of llama.cpp's own OpenAI-compatible server (``python -m llama_cpp.server``)
    with the embedded GGUF, started once per test process (free port, bounded start-up wait, as many threads as
    this process may use: one per pytest-xdist worker) and stopped by its pid at the end of the session.

    The server keeps no state a test reads (the json_schema refusal and the reply cache live in the client): sharing
    it only saves its start-up and keeps its threads from competing with another copy."""
    missing = LlamaServer.missing()
    if missing:
        pytest.skip(f"llama.cpp's server needs {', '.join(missing)}: pip install -e '.[server]'")
    with LlamaServer(tmp_path_factory.mktemp("llama-server") / "server.log") as server:
        yield server.base_url
