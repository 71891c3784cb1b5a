"""One phase of an approval, in a process of its own: ``run`` stops for approval and exits;
``resume`` (another process) approves the refund and prints the final reply."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from aniki import Runner
from aniki.sessions import open_session
from tests.approvals.scripted import REFUND, make_agent


async def main(url: str, session_id: str, phase: str, log: str) -> None:
    agent = make_agent(Path(log))
    session = open_session(url, session_id)
    if phase == "run":
        result = await Runner().run(agent, message="Refund order 42", session=session)
        print(json.dumps([call.id for call in result.pending_approvals]))
    else:
        result = await Runner().resume(agent, approve=[REFUND.id], session=session)
        print(json.dumps(result.content))
    close = getattr(session, "close", None)
    if close is not None:
        close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
