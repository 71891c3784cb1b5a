"""One streamed model call: text and reasoning deltas passed on as they arrive, the whole
reply returned, and a stream that breaks part-way retried afresh (its text so far void)."""

from __future__ import annotations

import asyncio
import random
from typing import TYPE_CHECKING

from ..errors import (
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    StreamInterruptedError,
)
from ..events import ReasoningDelta, StreamRestarted, TextDelta
from ..providers.base import ModelRequest, ModelResponse
from . import observe

if TYPE_CHECKING:
    from .plan import RunPlan

__all__ = ["stream_response"]


async def stream_response(plan: RunPlan, request: ModelRequest) -> ModelResponse:
    """Stream one reply; a stream that breaks part-way is retried with a fresh stream.

    Only breaks the vendor client cannot retry itself are retried here (an interrupted
    stream, or a connection lost after the reply began), so the two never multiply.
    """
    attempt = 0
    while True:
        received = [False]
        try:
            return await _stream_once(plan, request, received)
        except (StreamInterruptedError, ProviderConnectionError, ProviderTimeoutError) as exc:
            if attempt >= plan.stream_retries or not (
                isinstance(exc, StreamInterruptedError) or received[0]
            ):
                raise
            attempt += 1
            if plan.emit is not None:
                plan.emit(StreamRestarted(f"{type(exc).__name__}: {exc}"))
            await asyncio.sleep(_backoff(plan.retry_backoff, attempt))


def _backoff(base: float, attempt: int) -> float:
    delay: float = min(base * 2 ** (attempt - 1), 8.0)
    return delay * random.uniform(0.8, 1.2)


async def _stream_once(plan: RunPlan, request: ModelRequest, received: list[bool]) -> ModelResponse:
    assert plan.provider is not None, "prepare() builds the provider before the first turn"
    response: ModelResponse | None = None
    delivered = False
    async for item in plan.provider.stream(request):
        received[0] = True
        if isinstance(item, (TextDelta, ReasoningDelta)):
            if response is not None:
                raise StreamInterruptedError("the provider sent text after its final reply")
            if not delivered:
                delivered = True
                observe.first_chunk()
            if item.text and plan.emit is not None:
                plan.emit(item)
        elif isinstance(item, ModelResponse):
            response = item
        else:
            raise ProviderError(
                f"the provider's stream yielded {type(item).__name__}; "
                "expected TextDelta and ReasoningDelta items and a final ModelResponse"
            )
    if response is None:
        raise StreamInterruptedError(
            f"the stream for model {request.model!r} ended before the reply was complete"
        )
    return response
