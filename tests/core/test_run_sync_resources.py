"""``run_sync`` with a provider made for each agent: every client it opened gets closed.

An agent named by its provider (``provider="openai"``) builds its own provider, and with it
an HTTP client on ``run_sync``'s background loop. When the agent is collected, that client is
closed on the loop that owns it; whatever is still open at exit is closed then. Nothing is
left for the garbage collector to find open (``ResourceWarning: unclosed ...``).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = textwrap.dedent(
    """
    import gc
    import os
    import sys

    from aniki import Agent, Runner
    from tests.core.loopback import connections, threaded_server

    collect = sys.argv[1] == "collect"
    with threaded_server() as server:
        os.environ["OPENAI_API_KEY"] = "sk-test-0123456789abcdef"
        os.environ["OPENAI_BASE_URL"] = server.url + "/v1"
        for number in range(15):
            agent = Agent("Echo", model="gpt-4o-mini", provider="openai")
            assert Runner().run_sync(agent, message=str(number)).content == str(number)
            if collect:
                del agent
                gc.collect()  # at once, as the collector may at any point of a long process
        print("connections", connections(server))
    """
)


@pytest.mark.parametrize("when", ["collect", "rebind"])
def test_clients_of_agents_made_per_call_are_closed(when: str) -> None:
    done = subprocess.run(
        # Not -X dev: its slow-callback reports depend on the machine's load, not on this.
        [sys.executable, "-W", "default", "-c", SCRIPT, when],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "connections 15"  # one client, one connection per agent
    assert "ResourceWarning" not in done.stderr, done.stderr[-3000:]
    assert "unclosed" not in done.stderr, done.stderr[-3000:]
    assert done.stderr == ""
