"""A run cut by a crash, finished once: a worker process is killed (SIGKILL) while its tools
run; ``Runner.recover`` then finishes the run from the journal in the session's store. The
call whose result was recorded is not run again; the idempotent call that the kill cut short
runs again, with the same idempotency key (docs/durable.md).

Run: ``python examples/durable.py [path.db]``. Offline: the model is scripted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

from aniki import Agent, Context, Runner, ToolCall, tool
from aniki.providers.base import ModelRequest
from aniki.sessions import SQLiteSession
from aniki.testing import MockProvider, MockReply

LEDGER = Path(os.environ.get("DURABLE_LEDGER", "ledger.txt"))
"""What the tools did, one line per side effect (a stand-in for other systems)."""


@tool
def reserve(item: str) -> str:
    """Reserve an item in the warehouse."""
    with LEDGER.open("a") as ledger:
        ledger.write(f"reserved {item}\n")
    return f"{item} reserved"


@tool(idempotent=True)
async def ship(item: str, ctx: Context) -> str:
    """Ship an item (the carrier applies each idempotency key once)."""
    key = f"{ctx.run_id}:{ctx.tool_call_id}"
    with LEDGER.open("a") as ledger:
        ledger.write(f"ship {item} key={key}\n")
    if os.environ.get("DURABLE_CRASH") == "1":
        await asyncio.sleep(0.3)  # reserve's result is recorded meanwhile
        os.kill(os.getpid(), signal.SIGKILL)  # the worker dies mid-call
    return f"{item} shipped"


def model(request: ModelRequest) -> MockReply:
    """A scripted model: reserve and ship at once, then report what the tools said."""
    if request.messages[-1].role == "user":
        return MockReply(
            tool_calls=(
                ToolCall("call_reserve", "reserve", '{"item": "lamp"}'),
                ToolCall("call_ship", "ship", '{"item": "lamp"}'),
            )
        )
    said = [m.content for m in request.messages if m.role == "tool"]
    return MockReply(content="Done: " + "; ".join(said))


agent = Agent(
    "Warehouse", model="scripted", provider=MockProvider(handler=model), tools=[reserve, ship]
)


def worker(path: str) -> None:
    """The worker that dies: it runs the agent until ship kills it."""
    Runner().run_sync(agent, message="Send the lamp", session=SQLiteSession("order-7", path))


def main(path: str) -> None:
    env = dict(os.environ, DURABLE_CRASH="1", DURABLE_LEDGER=str(LEDGER))
    child = subprocess.run([sys.executable, __file__, "--worker", path], env=env, check=False)
    print(f"worker ended by signal {-child.returncode}")
    session = SQLiteSession("order-7", path)
    print("stored before recovery:", [m.role for m in session.get_messages()])
    (result,) = Runner().recover_sync(agent, session=session)
    print("recovered run:", result.run_id)
    print(result.content)
    print("stored:", [m.role for m in session.get_messages()])
    lines = LEDGER.read_text().splitlines()
    keys = {line.split("key=")[1] for line in lines if line.startswith("ship")}
    print(f"reserve ran {sum(line.startswith('reserved') for line in lines)} time(s)")
    ships = sum(line.startswith("ship") for line in lines)
    print(f"ship ran {ships} time(s), with {len(keys)} idempotency key(s)")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(sys.argv[2])
    else:
        target = sys.argv[1] if len(sys.argv) > 1 else "durable_example.db"
        LEDGER = Path(target).with_suffix(".ledger.txt")
        main(target)
