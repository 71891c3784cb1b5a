"""The shape of one model call, shared by every vendor: call, translate errors, parse.

A provider supplies the vendor-specific parts (the client call, the reply parser, the
stream accumulator); these functions own the error boundary and the stream rules: text
deltas as they arrive, then the whole reply, or :class:`~aniki.StreamInterruptedError` when
the stream breaks, is malformed, or ends before the vendor's end-of-reply marker.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterable, Awaitable, Callable
from typing import Any, Protocol

from .._secrets import redact, scrub
from ..errors import ProviderError, UserError
from ..events import ReasoningDelta, TextDelta
from ._errors import ErrorContext, VendorErrors, stream_interrupted, translate
from ._stream import MalformedReply, describe_stream_failure, guarded, undecodable_json
from .base import ModelResponse, ModelStreamEvent

__all__ = ["Accumulator", "VendorStream", "complete_call", "plain", "stream_call"]


class Accumulator(Protocol):
    """Builds one reply from a vendor's stream items."""

    def feed(self, item: Any) -> str:
        """Take one item (as plain JSON data); return the text it adds."""
        ...

    def take_reasoning(self) -> str:
        """The thinking text fed since the last call (often empty)."""
        ...

    def finish(self) -> ModelResponse:
        """The whole reply, or ``IncompleteStream`` when the end marker never came."""
        ...


class VendorStream(AsyncIterable[Any], Protocol):
    """What a vendor client returns for a streamed call."""

    async def close(self) -> None:
        """Release the HTTP response."""
        ...


def plain(item: Any) -> Any:
    """A vendor client's response object as the plain JSON data the server sent."""
    to_dict = getattr(item, "to_dict", None)
    # The clients build their objects without validation, so a malformed reply is still a
    # model object; warnings=False keeps serialising it quiet.
    return to_dict(warnings=False) if callable(to_dict) else item


async def _open(call: Awaitable[Any], ctx: ErrorContext, vendor: VendorErrors) -> Any:
    try:
        return await call
    except vendor.base as exc:
        raise translate(exc, ctx, vendor) from exc
    except (TypeError, ValueError, RecursionError) as exc:
        if undecodable_json(exc):
            raise ProviderError(
                f"{ctx.provider}: the reply is not valid JSON ({redact(str(exc), ctx.secret)}); "
                "is base_url pointing at a compatible server?",
                provider=ctx.provider,
            ) from scrub(exc, ctx.secret)
        if isinstance(exc, RecursionError):
            raise
        # The clients check some arguments themselves before sending anything.
        raise UserError(
            f"{ctx.provider}: the client refused the request: {redact(str(exc), ctx.secret)}"
        ) from scrub(exc, ctx.secret)


async def complete_call(
    call: Awaitable[Any],
    parse: Callable[[Any], ModelResponse],
    ctx: ErrorContext,
    vendor: VendorErrors,
) -> ModelResponse:
    """Await ``call`` and parse its reply, translating every failure into an aniki error."""
    reply = await _open(call, ctx, vendor)
    try:
        return parse(plain(reply))
    except MalformedReply as exc:
        raise ProviderError(
            f"{ctx.provider}: the reply does not have the documented shape "
            f"({redact(str(exc), ctx.secret)}); is base_url pointing at a compatible server?",
            provider=ctx.provider,
            body=redact(plain(reply), ctx.secret),
        ) from scrub(exc, ctx.secret)


async def stream_call(
    call: Awaitable[VendorStream],
    accumulator: Accumulator,
    ctx: ErrorContext,
    vendor: VendorErrors,
) -> AsyncGenerator[ModelStreamEvent, None]:
    """Stream one reply: :class:`~aniki.TextDelta` items, then the whole :class:`ModelResponse`.

    Errors before the stream starts (status codes, timeouts) are translated as for
    :func:`complete_call`; anything that goes wrong after it started is a
    :class:`~aniki.StreamInterruptedError`, because part of the reply was already delivered.
    """

    def interrupted(exc: BaseException) -> ProviderError:
        scrub(exc, ctx.secret)  # it becomes the __cause__
        body = getattr(exc, "body", None)
        return stream_interrupted(describe_stream_failure(exc, vendor), ctx, body=body)

    stream = await _open(call, ctx, vendor)
    try:
        async with contextlib.aclosing(guarded(stream, interrupted)) as items:
            async for item in items:
                try:
                    text = accumulator.feed(plain(item))
                except MalformedReply as exc:
                    raise interrupted(exc) from exc
                thinking = accumulator.take_reasoning()
                if thinking:
                    yield ReasoningDelta(thinking)
                if text:
                    yield TextDelta(text)
        try:
            response = accumulator.finish()
        except MalformedReply as exc:
            raise interrupted(exc) from exc
    finally:
        # Closing only releases the connection; a failure there must not hide the real error.
        with contextlib.suppress(Exception):
            await stream.close()
    yield response
