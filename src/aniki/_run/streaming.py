"""``StreamedRun``: a run whose events are consumed as they happen.

The run itself works in a background task that feeds a queue; the consumer reads events from
it. The run's messages (beyond the user message, stored at once) are committed by the
*consumer*, just before it is handed ``RunCompleted``: a consumer that stops earlier — by
``abort()``, ``break`` and ``aclose()``, an exception, or cancellation — commits nothing,
even when the run had already finished in the background.

A run's :class:`~aniki._run.deadline.Deadline` bounds all of it: storing the user message
(as far as the run waits for it), the turns, and the commit.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic

from typing_extensions import TypeVar

from ..errors import UserError
from ..events import RunCompleted, StreamEvent
from ..result import RunResult
from .deadline import Deadline
from .observe import UNOBSERVED, RunObservation
from .plan import Outcome

__all__ = ["StreamedRun"]


@dataclass(slots=True)
class _Finished:
    outcome: Outcome


@dataclass(slots=True)
class _Failed:
    error: BaseException


Produce = Callable[[Callable[[StreamEvent], None], Awaitable[None]], Awaitable[Outcome]]
"""Runs the turns, sending events to its first argument, once its second (the user message
being stored) is done."""
Finish = Callable[[Outcome], Awaitable[RunResult[Any]]]

OutputT = TypeVar("OutputT", default=str)


class StreamedRun(Generic[OutputT]):
    """An async iterator of a run's events, ending with :class:`~aniki.RunCompleted`.

    Example::

        async with runner.stream(agent, message="Tell me a story") as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    print(event.text, end="")
        stream.result.content  # the whole reply

    ``await stream.abort()`` stops the run; the session then holds just the user message.
    """

    def __init__(
        self,
        start: Callable[[], Awaitable[None]],
        produce: Produce,
        finish: Finish,
        *,
        deadline: Deadline | None = None,
        observed: RunObservation = UNOBSERVED,
        aborted: Callable[[], None] | None = None,
    ):
        self._start = start
        self._produce = produce
        self._finish = finish
        self._deadline = deadline if deadline is not None else Deadline(None)
        self._observed = observed
        self._aborted = aborted
        self._queue: asyncio.Queue[StreamEvent | _Finished | _Failed] = asyncio.Queue()
        self._started: asyncio.Future[None] | None = None
        self._task: asyncio.Future[None] | None = None
        self._events: weakref.ref[AsyncGenerator[StreamEvent, None]] | None = None
        self._held: AsyncIterator[StreamEvent] | None = None
        self._closed = False
        self.result: RunResult[OutputT] | None = None
        """The run's result, once ``RunCompleted`` was delivered; ``None`` before."""
        with contextlib.suppress(RuntimeError):
            asyncio.get_running_loop()
            self._begin()

    def _begin(self) -> None:
        if self._task is not None:
            return
        self._deadline.start()
        # The user message is stored by its own task, which abort() never cancels: once
        # stream() was called, the session holds the user message whatever happens next.
        with self._observed.entered():  # the tasks run inside the run's span
            self._started = asyncio.ensure_future(self._start())
            # The producer must not hold a reference to this object, so that a consumer that
            # walks away lets it (and the iterator) be collected, which stops the run.
            self._task = asyncio.ensure_future(
                _produce(self._started, self._produce, self._queue, self._deadline)
            )

    def __aiter__(self) -> AsyncIterator[StreamEvent]:
        events = self._events() if self._events is not None else None
        if events is None:
            # Only a weak reference: the ``async for`` holds the iterator, so when the
            # consumer goes away the iterator is finalized, and its cleanup stops the run.
            events = self._iterate()
            self._events = weakref.ref(events)
        return events

    async def __anext__(self) -> StreamEvent:
        # Driving the stream by hand: keep the iterator alive between calls.
        self._held = self.__aiter__()
        return await self._held.__anext__()

    async def _iterate(self) -> AsyncGenerator[StreamEvent, None]:
        self._begin()
        try:
            while not self._closed:
                item = await self._queue.get()
                if isinstance(item, _Failed):
                    raise item.error
                if isinstance(item, _Finished):
                    result = await self._deadline.bound(self._finish(item.outcome))
                    self.result = result
                    self._closed = True
                    self._observed.finished(result)
                    yield RunCompleted(result)
                    return
                yield item
        except Exception as exc:  # the run failed, or storing what it produced did
            self._observed.failed(exc)
            raise
        finally:
            if self.result is None:
                await self.abort()

    async def abort(self) -> None:
        """Stop the run. Nothing beyond the user message is stored; no task keeps running."""
        self._closed = True
        for task in (self._task,):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if self._started is not None:
            # Wait for the user message to be stored, but not past the run's deadline.
            with contextlib.suppress(Exception):
                await self._deadline.bound(asyncio.shield(self._started))
        if self._aborted is not None and self.result is None:
            self._aborted()
        self._observed.aborted()

    async def aclose(self) -> None:
        """Stop consuming: the same as :meth:`abort` unless the run already completed."""
        events = self._events() if self._events is not None else None
        if events is not None:
            await events.aclose()
        if self.result is None:
            await self.abort()

    async def __aenter__(self) -> StreamedRun[OutputT]:
        self._begin()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def wait(self) -> RunResult[OutputT]:
        """Consume every remaining event and return the result."""
        async for _ in self:
            pass
        if self.result is None:
            raise UserError("the stream was aborted before it completed")
        return self.result

    def __del__(self) -> None:
        # A stream dropped unconsumed must not keep calling the model in the background.
        if self._task is not None and not self._task.done():
            self._task.cancel()

    def __repr__(self) -> str:
        state = "completed" if self.result else ("closed" if self._closed else "running")
        return f"StreamedRun({state})"


async def _produce(
    started: asyncio.Future[None],
    produce: Produce,
    queue: asyncio.Queue[StreamEvent | _Finished | _Failed],
    deadline: Deadline,
) -> None:
    try:
        outcome = await deadline.bound(produce(queue.put_nowait, asyncio.shield(started)))
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        queue.put_nowait(_Failed(exc))
    else:
        queue.put_nowait(_Finished(outcome))
