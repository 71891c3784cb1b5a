"""The DBOS steps of a run: each model call, tool call and session write is one step."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from dbos import DBOS

from ..messages import Message, ToolCall
from ..providers.base import ModelRequest, ModelResponse

__all__ = ["DBOSSteps", "response_from_dict", "response_to_dict"]


def response_to_dict(response: ModelResponse) -> dict[str, Any]:
    """``response`` as JSON-ready data (its text, tool calls, usage and reasoning travel as an
    assistant message's dict)."""
    return {
        "message": response.to_message().to_dict(),
        "finish_reason": response.finish_reason,
        "model": response.model,
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
    )


class DBOSSteps:
    """A :class:`~aniki._run.steps.Steps` that records each side effect as a DBOS step: a
    replayed workflow gets the recorded outcome back instead of doing it again."""

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
        """The append as the step ``aniki.store_write``."""

        async def step() -> None:
            await work()

        await DBOS.run_step_async({"name": "aniki.store_write"}, step)
