"""``MockProvider``: a scripted model for testing agents without a network or a key."""

from __future__ import annotations

import asyncio
import inspect
import json
import uuid
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ..errors import UserError
from ..events import ReasoningDelta, TextDelta
from ..messages import Reasoning, ToolCall
from ..providers.base import ModelRequest, ModelResponse, ModelStreamEvent
from ..usage import Usage

__all__ = ["MockProvider", "MockReply", "MockReplyLike"]


@dataclass(frozen=True, slots=True)
class MockReply:
    """One scripted model reply."""

    content: str = ""
    """The reply text."""
    tool_calls: tuple[ToolCall, ...] = ()
    """Tool calls the reply asks for."""
    usage: Usage | None = None
    """The usage to report (``None``: report none)."""
    chunks: tuple[str, ...] | None = None
    """How ``stream`` delivers ``content``; ``None``: one chunk per word."""
    error: BaseException | None = None
    """Raised instead of replying (in a stream: after the chunks)."""
    delay: float = 0.0
    """Seconds to sleep (``asyncio.sleep``) before replying."""
    finish_reason: str | None = field(default=None)
    """The finish reason to report (default: ``"tool_calls"`` or ``"stop"``)."""
    reasoning: tuple[Reasoning, ...] = ()
    """The thinking the reply carries; ``stream`` sends its text as ``ReasoningDelta`` first."""

    def response(self) -> ModelResponse:
        """The reply as the :class:`ModelResponse` a provider returns."""
        finish = self.finish_reason or ("tool_calls" if self.tool_calls else "stop")
        return ModelResponse(
            content=self.content,
            tool_calls=self.tool_calls,
            usage=self.usage,
            finish_reason=finish,
            reasoning=self.reasoning,
        )

    def stream_chunks(self) -> list[str]:
        """The text pieces ``stream`` yields."""
        if self.chunks is not None:
            return list(self.chunks)
        words = self.content.split(" ")
        return [w + " " for w in words[:-1]] + [words[-1]] if self.content else []


MockReplyLike: TypeAlias = "MockReply | ModelResponse | str"
"""What a ``handler`` may return: a reply, a finished response, or just the text."""

Handler = Callable[[ModelRequest], "MockReplyLike | Awaitable[MockReplyLike]"]


def _tool_calls(calls: Iterable[ToolCall | Mapping[str, Any]]) -> tuple[ToolCall, ...]:
    made: list[ToolCall] = []
    for call in calls:
        if isinstance(call, ToolCall):
            made.append(call)
            continue
        if not isinstance(call, Mapping) or "name" not in call:
            raise UserError(
                f"a mock tool call needs at least a name, e.g. {{'name': 'add', "
                f"'arguments': {{'a': 1}}}}; got {call!r}"
            )
        arguments = call.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        made.append(
            ToolCall(
                id=call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                name=call["name"],
                arguments=arguments,
            )
        )
    return tuple(made)


def _usage(fields: Mapping[str, int]) -> Usage:
    known = set(Usage.__dataclass_fields__)
    unknown = sorted(set(fields) - known)
    if unknown:
        raise UserError(f"a mock usage has unknown fields {unknown}; use {sorted(known)}")
    return Usage(**fields)


class MockProvider:
    """A provider that replies from a script, and records every request it receives.

    Queue replies with :meth:`enqueue_response`, or compute them with ``handler=``. Both
    ``complete`` and ``stream`` take the next reply; an empty queue raises
    :class:`~aniki.UserError` naming the call.

    Example::

        provider = MockProvider()
        provider.enqueue_response(tool_calls=[{"name": "add", "arguments": {"a": 1, "b": 2}}])
        provider.enqueue_response(content="1 + 2 = 3")
        agent = Agent("Calc", model="mock", provider=provider, tools=[add])
        Runner().run_sync(agent, message="1 + 2?").content  # "1 + 2 = 3"
        provider.requests[1].messages[-1].content  # "3"

        echo = MockProvider(handler=lambda request: request.messages[-1].content)
    """

    def __init__(self, replies: Iterable[MockReplyLike] = (), *, handler: Handler | None = None):
        self._queue: deque[MockReply | ModelResponse] = deque(_coerce(reply) for reply in replies)
        self._handler = handler
        self.requests: list[ModelRequest] = []
        """Every request received, in order."""

    def enqueue_response(
        self,
        content: str = "",
        *,
        tool_calls: Sequence[ToolCall | Mapping[str, Any]] = (),
        usage: Usage | Mapping[str, int] | None = None,
        chunks: Sequence[str] | None = None,
        error: BaseException | None = None,
        delay: float = 0.0,
        reasoning: Sequence[Reasoning | str] = (),
    ) -> None:
        """Queue one reply.

        Args:
            content: the reply text.
            tool_calls: ``ToolCall`` objects or mappings with ``name``, ``arguments`` (a JSON
                string or a value to encode) and optionally ``id``.
            usage: what the call reports as its cost: a ``Usage`` or a mapping of its fields
                (``{"input_tokens": 1200, "cache_read_tokens": 1024, "requests": 1}``).
                ``None`` reports none, which a run counts in ``Usage.unreported_requests``.
            chunks: how ``stream`` delivers ``content`` (default: one chunk per word).
            error: raised instead of replying; in a stream, after the chunks.
            delay: seconds to sleep first.
            reasoning: the model's thinking before the reply: ``Reasoning`` objects or text
                (``stream`` sends it as ``ReasoningDelta`` events before the text).
        """
        if usage is not None and not isinstance(usage, Usage):
            usage = _usage(usage)
        self._queue.append(
            MockReply(
                content=content,
                tool_calls=_tool_calls(tool_calls),
                usage=usage,
                chunks=tuple(chunks) if chunks is not None else None,
                error=error,
                delay=delay,
                reasoning=tuple(
                    part if isinstance(part, Reasoning) else Reasoning(part) for part in reasoning
                ),
            )
        )

    @property
    def pending(self) -> int:
        """How many queued replies are not used yet."""
        return len(self._queue)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Record ``request`` and return the next reply."""
        reply = await self._next(request, "complete")
        if isinstance(reply, ModelResponse):
            return reply
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.error is not None:
            raise reply.error
        return reply.response()

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Record ``request`` and stream the next reply chunk by chunk."""
        reply = await self._next(request, "stream")
        if isinstance(reply, ModelResponse):
            for part in reply.reasoning:
                if part.text:
                    yield ReasoningDelta(part.text)
            if reply.content:
                yield TextDelta(reply.content)
            yield reply
            return
        if reply.delay:
            await asyncio.sleep(reply.delay)
        for part in reply.reasoning:
            if part.text:
                yield ReasoningDelta(part.text)
        for chunk in reply.stream_chunks():
            yield TextDelta(chunk)
            await asyncio.sleep(0)
        if reply.error is not None:
            raise reply.error
        yield reply.response()

    async def _next(self, request: ModelRequest, kind: str) -> MockReply | ModelResponse:
        self.requests.append(request)
        if self._handler is not None:
            made = self._handler(request)
            if inspect.isawaitable(made):
                made = await made
            return _coerce(made)
        if not self._queue:
            last = request.messages[-1] if request.messages else None
            said = f"; the last message is {last.role}: {last.content[:60]!r}" if last else ""
            raise UserError(
                f"MockProvider has no reply queued for call #{len(self.requests)} "
                f"({kind}, model {request.model!r}{said}); queue one with "
                "provider.enqueue_response(...) or pass MockProvider(handler=...)"
            )
        return self._queue.popleft()

    def __repr__(self) -> str:
        return f"MockProvider(pending={len(self._queue)}, requests={len(self.requests)})"


def _coerce(reply: Any) -> MockReply | ModelResponse:
    if isinstance(reply, (MockReply, ModelResponse)):
        return reply
    if isinstance(reply, str):
        return MockReply(content=reply)
    raise UserError(
        f"a MockProvider reply must be a MockReply, a ModelResponse or a str, "
        f"got {type(reply).__name__}"
    )
