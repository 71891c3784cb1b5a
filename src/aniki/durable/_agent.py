"""``DurableAgent``: one DBOS workflow per agent, running each run of it to completion."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from typing import Any

from dbos import DBOS, Queue, SetWorkflowID, WorkflowHandleAsync

from .._run import steps
from ..agent import Agent
from ..context import Context
from ..messages import Message, ToolCall
from ..result import RunResult
from ..runner import Runner
from ..sessions import AsyncSession, Session, open_session
from ..usage import Usage
from ._steps import DBOSSteps

__all__ = ["APPROVAL_TOPIC", "DurableAgent", "SessionOpener"]

APPROVAL_TOPIC = "aniki.approval"
"""The DBOS message topic on which a waiting run receives its approval decision."""

SessionOpener = Callable[[str], "Session | AsyncSession"]
"""Opens the session with the given id."""


_POLL = 0.05
"""Seconds between two looks at the system database for a run that another process runs
(DBOS's default, 1 s, would add up to a second to every wait)."""


class DurableAgent:
    """An :class:`~aniki.Agent` whose runs are DBOS workflows that survive a crash.

    Construct it before ``DBOS.launch()``, in every process that runs or recovers its runs:
    construction registers the workflow ``aniki.durable:<agent name>`` (``name`` overrides
    the part after the colon). Each run is the workflow with id = the run id: it opens the
    session, then runs the agent with every model call, tool call and session write
    recorded as a DBOS step. A run that stops for approval waits, inside the workflow, for
    :meth:`decide`, then goes on.

    Example::

        durable = DurableAgent(agent, "sqlite:///chat.db")
        DBOS(config={"name": "app", "system_database_url": "sqlite:///dbos.sqlite"})
        DBOS.launch()
        result = await durable.run("Hi", session_id="conversation-42")

    Args:
        agent: the agent to run.
        sessions: a store URL (``sqlite:///chat.db``, ``postgresql://...``; see
            :func:`~aniki.sessions.open_session`), or a callable opening a session by id.
        name: the workflow's name after ``aniki.durable:`` (default: the agent's name); two
            durable agents in one process need different names.
        approval_timeout: seconds a run waits for :meth:`decide`; after that it ends with
            its ``pending_approvals`` still set.
    """

    def __init__(
        self,
        agent: Agent[Any],
        sessions: str | SessionOpener,
        *,
        name: str | None = None,
        approval_timeout: float = 7 * 24 * 3600.0,
    ) -> None:
        self.agent = agent
        self.workflow_name = f"aniki.durable:{name or agent.name}"
        self._sessions = sessions
        self._approval_timeout = approval_timeout

        async def workflow(message: str | dict[str, Any], session_id: str) -> dict[str, Any]:
            return await self._body(message, session_id)

        self._workflow = DBOS.workflow(name=self.workflow_name)(workflow)

    def open_session(self, session_id: str) -> Session | AsyncSession:
        """The session ``session_id``, as the workflow opens it."""
        if isinstance(self._sessions, str):
            return open_session(self._sessions, session_id, asynchronous=True)
        return self._sessions(session_id)

    async def run(
        self, message: str | Message, *, session_id: str, run_id: str | None = None
    ) -> RunResult[Any]:
        """Run the workflow with id ``run_id`` (a fresh one when ``None``) and wait for its
        result. Calling it again with a finished run's id returns that run's result."""
        handle = await self._start(None, message, session_id, run_id)
        return self._result_of(await handle.get_result(polling_interval_sec=_POLL))

    async def start(
        self, message: str | Message, *, session_id: str, run_id: str | None = None
    ) -> str:
        """Start the run in this process and return its run id without waiting."""
        handle = await self._start(None, message, session_id, run_id)
        return handle.get_workflow_id()

    async def enqueue(
        self, queue: Queue, message: str | Message, *, session_id: str, run_id: str | None = None
    ) -> str:
        """Put the run on the DBOS ``queue`` (any worker process listening to it runs it) and
        return its run id."""
        handle = await self._start(queue, message, session_id, run_id)
        return handle.get_workflow_id()

    async def result(self, run_id: str) -> RunResult[Any]:
        """Wait for the run ``run_id`` (started in any process) and return its result."""
        handle: WorkflowHandleAsync[dict[str, Any]] = await DBOS.retrieve_workflow_async(run_id)
        return self._result_of(await handle.get_result(polling_interval_sec=_POLL))

    async def decide(
        self, run_id: str, *, approve: Sequence[str] = (), deny: Sequence[str] = ()
    ) -> None:
        """Send the decision on the held tool calls (by id) to the run waiting for it."""
        decision = {"approve": list(approve), "deny": list(deny)}
        await DBOS.send_async(run_id, decision, APPROVAL_TOPIC)

    async def _start(
        self, queue: Queue | None, message: str | Message, session_id: str, run_id: str | None
    ) -> WorkflowHandleAsync[dict[str, Any]]:
        payload: str | dict[str, Any] = (
            message.to_dict() if isinstance(message, Message) else message
        )
        with SetWorkflowID(run_id) if run_id else nullcontext():
            if queue is None:
                return await DBOS.start_workflow_async(self._workflow, payload, session_id)
            return await queue.enqueue_async(self._workflow, payload, session_id)

    async def _body(self, message: str | dict[str, Any], session_id: str) -> dict[str, Any]:
        run_id = DBOS.workflow_id
        if run_id is None:  # DBOS calls this only as a workflow, which always has an id
            raise RuntimeError("a durable run must run as a DBOS workflow")
        user = Message.from_dict(message) if isinstance(message, dict) else message
        session = self.open_session(session_id)
        try:
            with steps.using(DBOSSteps(session)):
                return _record(await self._drive(user, session, run_id))
        finally:
            if isinstance(self._sessions, str):
                await _close(session)

    async def _drive(
        self, user: str | Message, session: Session | AsyncSession, run_id: str
    ) -> RunResult[Any]:
        """The run, then each resumption after an approval decision arrives."""
        runner = Runner()
        result = await runner.run(
            self.agent, message=user, session=session, context=Context(run_id=run_id)
        )
        while result.pending_approvals:
            decision = await DBOS.recv_async(APPROVAL_TOPIC, self._approval_timeout)
            if decision is None:
                break
            result = await runner.resume(
                self.agent,
                approve=decision.get("approve", ()),
                deny=decision.get("deny", ()),
                session=session,
                context=Context(run_id=run_id),
            )
        return result

    def _result_of(self, record: dict[str, Any]) -> RunResult[Any]:
        content = record["content"]
        return RunResult(
            messages=tuple(Message.from_dict(m) for m in record["messages"]),
            new_messages=tuple(Message.from_dict(m) for m in record["new_messages"]),
            content=content,
            output=record["output"],
            usage=Usage.from_dict(record["usage"]),
            run_id=record["run_id"],
            context=Context(run_id=record["run_id"]),
            last_agent=record["last_agent"],
            pending_approvals=tuple(ToolCall.from_dict(c) for c in record["pending_approvals"]),
        )


def _record(result: RunResult[Any]) -> dict[str, Any]:
    """What the workflow returns: the result as JSON-ready data."""
    output = result.output
    if hasattr(output, "model_dump"):
        output = output.model_dump(mode="json")
    return {
        "messages": [m.to_dict() for m in result.messages],
        "new_messages": [m.to_dict() for m in result.new_messages],
        "content": result.content,
        "output": output,
        "usage": result.usage.to_dict(),
        "run_id": result.run_id,
        "last_agent": result.last_agent,
        "pending_approvals": [c.to_dict() for c in result.pending_approvals],
    }


async def _close(session: Session | AsyncSession) -> None:
    aclose = getattr(session, "aclose", None)
    if aclose is not None:
        await aclose()
        return
    close = getattr(session, "close", None)
    if close is not None:
        close()
