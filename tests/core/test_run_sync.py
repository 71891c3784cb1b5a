"""``Runner.run_sync`` as a synchronous web view uses it: many calls, from many threads.

It runs on one long-lived event loop in a background thread, so the provider's HTTP client
and its connection outlive each call, nothing is left behind to warn about, and a forked
child gets a loop of its own.
"""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, InMemorySession, Runner, RunTimeoutError, UserError, tool
from aniki.providers import OpenAIProvider
from aniki.testing import MockProvider

from .loopback import connections, threaded_server

ROOT = Path(__file__).resolve().parents[2]


def http_agent(url: str) -> Agent:
    provider = OpenAIProvider(api_key="sk-test", base_url=url + "/v1", max_retries=0)
    return Agent("Echo", "Repeat.", model="gpt-4o-mini", provider=provider)


def test_twenty_calls_share_one_connection_and_leave_nothing_behind(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with threaded_server() as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = http_agent(server.url)
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            for number in range(20):
                result = Runner().run_sync(
                    agent, message=f"call {number}", session=InMemorySession()
                )
                assert result.content == f"call {number}"
            gc.collect()
        assert len(server.requests) == 20
        assert connections(server) == 1
    assert [str(w.message) for w in caught] == []
    assert [r.getMessage() for r in caplog.records] == []
    assert "never retrieved" not in capfd.readouterr().err


def test_ten_threads_of_twenty_calls_each() -> None:
    with threaded_server() as server:
        agent = http_agent(server.url)
        runner = Runner()

        def twenty(thread: int) -> list[str]:
            session = InMemorySession()
            return [
                runner.run_sync(agent, message=f"{thread}.{n}", session=session).content
                for n in range(20)
            ]

        with ThreadPoolExecutor(10) as pool:
            replies = list(pool.map(twenty, range(10)))
        assert replies == [[f"{t}.{n}" for n in range(20)] for t in range(10)]
        assert len(server.requests) == 200
        assert connections(server) <= 10  # at most one per run in flight at once


def test_the_calling_threads_context_variables_reach_the_run_and_its_tools() -> None:
    seen: list[str] = []
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id")

    @tool
    def whoami() -> str:
        """Tell who is asking."""
        seen.append(request_id.get("unset"))
        return "ok"

    async def middleware(context: Any, request: Any, call_next: Any) -> Any:
        seen.append(request_id.get("unset"))
        return await call_next(request)

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"name": "whoami"}])
    provider.enqueue_response("done")
    agent = Agent("A", model="m", provider=provider, tools=[whoami], middleware=[middleware])

    def view() -> str:
        request_id.set("req-7")
        return Runner().run_sync(agent, message="hi").content

    assert contextvars.copy_context().run(view) == "done"
    assert seen == ["req-7", "req-7", "req-7"]


def test_refused_inside_a_running_loop() -> None:
    agent = Agent("A", model="m", provider=MockProvider(["never"]))

    async def inside() -> None:
        with pytest.raises(UserError, match=r"await runner\.run"):
            Runner().run_sync(agent, message="hi")

    asyncio.run(inside())


def test_the_timeout_covers_a_sync_tool_that_hangs() -> None:
    @tool
    def hang() -> str:
        """Never come back (in time)."""
        time.sleep(3)
        return "late"

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"name": "hang"}])
    agent = Agent("A", model="m", provider=provider, tools=[hang])
    started = time.monotonic()
    with pytest.raises(RunTimeoutError):
        Runner().run_sync(agent, message="hi", timeout=0.3)
    assert time.monotonic() - started < 0.3 + 0.5


def test_the_timeout_holds_even_when_code_blocks_the_loop() -> None:
    async def blocking(context: Any, request: Any, call_next: Any) -> Any:
        time.sleep(1.5)  # noqa: ASYNC251 (blocking the loop is the point: no deadline can fire)
        return await call_next(request)

    agent = Agent("A", model="m", provider=MockProvider(["slow"]), middleware=[blocking])
    started = time.monotonic()
    with pytest.raises(RunTimeoutError):
        Runner().run_sync(agent, message="hi", timeout=0.2)
    assert time.monotonic() - started < 1.2
    time.sleep(1.5)  # leave the shared loop free for the next test


def test_a_run_that_fails_raises_in_the_caller_and_the_next_call_works() -> None:
    provider = MockProvider()
    provider.enqueue_response(error=RuntimeError("boom"))
    provider.enqueue_response("fine")
    agent = Agent("A", model="m", provider=provider)
    with pytest.raises(Exception, match="boom"):
        Runner().run_sync(agent, message="hi")
    assert Runner().run_sync(agent, message="again").content == "fine"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_gets_a_loop_of_its_own() -> None:
    provider = MockProvider(handler=lambda request: request.messages[-1].content)
    agent = Agent("A", model="m", provider=provider)
    assert Runner().run_sync(agent, message="parent").content == "parent"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork with threads (3.12+)
        pid = os.fork()
    if pid == 0:  # the child: exit at once, whatever happens
        code = 1
        try:
            done = threading.Event()
            box: list[str] = []

            def call() -> None:
                box.append(Runner().run_sync(agent, message="child", timeout=5).content)
                done.set()

            threading.Thread(target=call, daemon=True).start()
            code = 0 if done.wait(10) and box == ["child"] else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert Runner().run_sync(agent, message="parent again").content == "parent again"


EXIT_SCRIPT = textwrap.dedent(
    """
    from aniki import Agent, Runner
    from aniki.providers import OpenAIProvider
    from tests.core.loopback import connections, threaded_server

    with threaded_server() as server:
        provider = OpenAIProvider(api_key="sk-test", base_url=server.url + "/v1")
        agent = Agent("Echo", model="gpt-4o-mini", provider=provider)
        for number in range(20):
            assert Runner().run_sync(agent, message=str(number)).content == str(number)
        print("connections", connections(server))
    """
)


def test_a_process_using_run_sync_exits_cleanly() -> None:
    """No warning, traceback or log line, with every warning turned on, through to exit."""
    done = subprocess.run(
        [sys.executable, "-X", "dev", "-W", "error", "-c", EXIT_SCRIPT],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "connections 1"
    assert done.stderr == ""


def test_asyncio_run_per_call_closes_each_loops_client_before_the_loop_closes(
    caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    # Code without run_sync: a new loop per call, so a new client per call. Each must be
    # closed while its loop still runs. Kept instead, every closed loop's client (and the
    # loop, which its connections reference) stayed alive as long as the provider; when
    # the provider went, each one scheduled its closing on the loop running then and logged
    # "Task exception was never retrieved ... Event loop is closed".
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()  # what earlier tests left behind is not this test's
    with threaded_server() as server, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent: Agent | None = http_agent(server.url)

        async def call(number: int) -> str:
            assert agent is not None
            result = await Runner().run(agent, message=f"call {number}", session=InMemorySession())
            return result.content

        async def drop_the_provider() -> None:
            nonlocal agent
            agent = None
            gc.collect()  # on a running loop, as an application's next request would
            await asyncio.sleep(0.05)

        with caplog.at_level(logging.WARNING, logger="asyncio"):
            for number in range(5):
                assert asyncio.run(call(number)) == f"call {number}"
            asyncio.run(drop_the_provider())
            gc.collect()
        assert len(server.requests) == 5
    assert [str(w.message) for w in caught] == []
    assert [r.getMessage() for r in caplog.records] == []
    assert "never retrieved" not in capfd.readouterr().err
