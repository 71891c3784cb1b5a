"""One llama.cpp server for the whole live tier, and a fresh provider per test.

The server comes from ``scripts/live_server.py setup`` (``bash scripts/test.sh`` runs it).
When it is not installed the live tests skip with the reason; under CI (``CI=true``) they
fail instead: CI must run them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from .helpers import ON_CI, LlamaServer, live_server


def _runtime() -> Any:
    try:
        return live_server.find_runtime()
    except live_server.LiveUnavailable as exc:
        if ON_CI:
            pytest.fail(f"{exc} (CI=true: the live tier must run; scripts/test.sh sets it up)")
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The running server; its log (read by the tests) is in the session's temp directory."""
    runtime = _runtime()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with LlamaServer.start(log, runtime=runtime, n_ctx=2048) as server:
        yield server


@pytest.fixture(scope="session")
def llama_tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A second server, with the ``chatml-function-calling`` chat format: the model's own
    template makes no tool calls, this one does (the arguments constrained by a grammar)."""
    runtime = _runtime()
    log = tmp_path_factory.mktemp("llama-tools-server") / "server.log"
    with LlamaServer.start(
        log, runtime=runtime, n_ctx=2048, chat_format="chatml-function-calling"
    ) as server:
        yield server


@pytest.fixture
async def provider(llama: Any) -> AsyncIterator[Any]:
    """An ``OpenAIProvider`` pointed at the server (a placeholder key; no retries, so a
    failure shows at once)."""
    from aniki.providers import OpenAIProvider

    made = OpenAIProvider(base_url=llama.base_url, api_key="none", max_retries=0, timeout=120)
    yield made
    await made.aclose()
