"""The DBOS steps of a run: each model call, tool call and session write is one step."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from dbos import DBOS

from ..errors import StoreError
from ..messages import Message, ToolCall
from ..providers.base import ModelRequest, ModelResponse
from ..sessions import AsyncSession, Session

__all__ = ["DBOSSteps", "response_from_dict", "response_to_dict"]


def response_to_dict(response: ModelResponse) -> dict[str, Any]:
    """``response`` as JSON-ready data (its text, tool calls, usage and reasoning travel as an
    assistant message's dict)."""
    return {
        "message": response.to_message().to_dict(),
        "finish_reason": response.finish_reason,
        "model": response.model,
        "id": response.id,
    }


def response_from_dict(data: dict[str, Any]) -> ModelResponse:
    """The :class:`~aniki.providers.base.ModelResponse` :func:`response_to_dict` recorded."""
    message = Message.from_dict(data["message"])
    return ModelResponse(
        content=message.content,
        tool_calls=message.tool_calls,
        usage=message.usage,
        finish_reason=data["finish_reason"],
        model=data["model"],
        reasoning=message.reasoning,
        id=data.get("id"),
    )


class DBOSSteps:
    """A :class:`~aniki._run.steps.Steps` that records each side effect as a DBOS step: a
    replayed workflow gets the recorded outcome back instead of doing it again.

    A step's effect and its record are two writes, so a crash between them repeats the
    effect on replay. Session writes are guarded against that: with ``session`` given, each
    write first records how many messages the session holds, and a replayed write that
    finds its messages already there does not append them again (one writer per session
    at a time assumed). Tools get no such guard: give them idempotency keys
    (:attr:`~aniki.Context.run_id` and the call's id).
    """

    def __init__(self, session: Session | AsyncSession | None = None) -> None:
        self._session = session

    async def model_call(
        self, request: ModelRequest, work: Callable[[], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """The model call as the step ``aniki.model_call``."""

        async def step() -> dict[str, Any]:
            return response_to_dict(await work())

        data = await DBOS.run_step_async({"name": "aniki.model_call"}, step)
        return response_from_dict(data)

    async def tool_call(self, call: ToolCall, work: Callable[[], Awaitable[Message]]) -> Message:
        """The tool call as the step ``aniki.tool:<name>``; records the tool message."""

        async def step() -> dict[str, Any]:
            return (await work()).to_dict()

        data = await DBOS.run_step_async({"name": f"aniki.tool:{call.name}"}, step)
        return Message.from_dict(data)

    async def store_write(
        self, messages: Sequence[Message], work: Callable[[], Awaitable[None]]
    ) -> None:
        """The append as the step ``aniki.store_write``, after the step
        ``aniki.store_length`` (the session's length before it) when a session is known."""
        if self._session is None:
            await DBOS.run_step_async({"name": "aniki.store_write"}, work)
            return
        base: int = await DBOS.run_step_async({"name": "aniki.store_length"}, self._length)

        async def step() -> None:
            held = await self._messages()
            if len(held) == base:
                await work()
            elif tuple(held[base : base + len(messages)]) != tuple(messages):
                raise StoreError(
                    f"the session changed under a replayed write: it held {base} messages "
                    f"before the write, and now {len(held)} that do not end with the write"
                )

        await DBOS.run_step_async({"name": "aniki.store_write"}, step)

    async def _messages(self) -> Sequence[Message]:
        found = self._session.get_messages() if self._session is not None else ()
        return await found if inspect.isawaitable(found) else found

    async def _length(self) -> int:
        return len(await self._messages())
