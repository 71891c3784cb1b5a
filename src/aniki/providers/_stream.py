"""Pieces every wire format's stream handling shares: tool-call assembly and failure reasons."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..errors import ValidationError
from ..messages import ToolCall
from ._errors import VendorErrors, server_message

__all__ = [
    "IncompleteStream",
    "MalformedReply",
    "ReplyFailed",
    "ToolCallAssembler",
    "describe_stream_failure",
    "guarded",
    "new_call_id",
    "require_mapping",
    "undecodable_json",
]

T = TypeVar("T")


class MalformedReply(ValueError):
    """A reply or stream chunk that does not have the vendor's documented shape."""


def optional_text(value: Any, what: str) -> str:
    """A reply's text field: ``None`` as ``""``, anything but a string a :class:`MalformedReply`."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise MalformedReply(f"{what} is not a string: {value!r:.200}")
    return value


class IncompleteStream(MalformedReply):
    """A stream that ended cleanly but before the provider said the reply was finished."""


class ReplyFailed(MalformedReply):
    """A well-formed reply or stream event in which the server says it failed to produce
    the reply (the Responses API's ``response.failed`` and ``error`` events)."""

    def __init__(self, message: str, *, body: Any = None) -> None:
        super().__init__(message)
        self.body = body
        """What the server sent about the failure (its error object)."""


def require_mapping(value: Any, what: str) -> dict[str, Any]:
    """``value`` if it is a JSON object, else :class:`MalformedReply` naming ``what``."""
    if not isinstance(value, dict):
        raise MalformedReply(f"{what} is not a JSON object: {value!r:.200}")
    return value


def new_call_id() -> str:
    """An id for a tool call whose server gave none (some compatible servers omit it)."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(slots=True)
class _PartialCall:
    id: str | None = None
    name: str | None = None
    arguments: list[str] = field(default_factory=list)
    initial_arguments: str | None = None


class ToolCallAssembler:
    """Builds tool calls from fragments that arrive over many chunks, keyed by position.

    Both vendors stream a call as a start (id, name) followed by argument fragments; several
    calls may be in flight at once, told apart by an index.
    """

    def __init__(self) -> None:
        self._calls: dict[int, _PartialCall] = {}

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(
        self,
        index: int,
        *,
        id: str | None = None,
        name: str | None = None,
        arguments: str | None = None,
        initial_arguments: str | None = None,
    ) -> None:
        """Record a fragment of the call at ``index``; ``arguments`` is appended verbatim."""
        call = self._calls.setdefault(index, _PartialCall())
        if id and call.id is None:
            call.id = id
        if name and call.name is None:
            # Some servers repeat the name on every fragment; the first one counts.
            call.name = name
        if arguments:
            call.arguments.append(arguments)
        if initial_arguments is not None:
            call.initial_arguments = initial_arguments

    def calls(self) -> tuple[ToolCall, ...]:
        """The finished calls in index order; a call that never got a name is malformed, and
        so is one that is not valid text (a lone surrogate sent as a JSON escape)."""
        done: list[ToolCall] = []
        for index in sorted(self._calls):
            call = self._calls[index]
            if not call.name:
                raise MalformedReply(f"tool call #{index} has no name")
            arguments = "".join(call.arguments) or call.initial_arguments or "{}"
            try:
                made = ToolCall(id=call.id or new_call_id(), name=call.name, arguments=arguments)
            except ValidationError as exc:
                raise MalformedReply(f"tool call #{index}: {exc}") from None
            done.append(made)
        return tuple(done)


def undecodable_json(exc: BaseException) -> bool:
    """Whether ``exc`` was raised decoding JSON: a syntax error, nesting too deep to decode,
    or a number too long to convert. The vendor clients decode replies with ``json.loads``
    and let these through as they are."""
    if isinstance(exc, json.JSONDecodeError):
        return True
    if not isinstance(exc, (ValueError, RecursionError)):
        return False
    frame = exc.__traceback__
    while frame is not None:
        if frame.tb_frame.f_globals.get("__name__") == "json.decoder":
            return True
        frame = frame.tb_next
    return False


def _looks_like_timeout(exc: BaseException) -> bool:
    # The clients wrap their HTTP library's timeouts only sometimes, and the HTTP library
    # is theirs to choose, so recognise a timeout by name anywhere in the cause chain.
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, TimeoutError) or any(
            "Timeout" in cls.__name__ for cls in type(seen).__mro__
        ):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def describe_stream_failure(exc: BaseException, vendor: VendorErrors) -> str:
    """Why a stream broke, in words, from the exception its iteration raised."""
    if isinstance(exc, IncompleteStream):
        return str(exc)
    if isinstance(exc, ReplyFailed):
        return f"the server sent an error part-way: {exc}"
    if isinstance(exc, MalformedReply) or undecodable_json(exc):
        return f"a malformed chunk: {exc}"
    if _looks_like_timeout(exc):
        return "no data arrived within the read timeout"
    if isinstance(exc, vendor.base) and not isinstance(exc, vendor.connection):
        said = server_message(getattr(exc, "body", None)) or getattr(exc, "message", str(exc))
        return f"the server sent an error part-way: {said}"
    cause = exc.__cause__ or exc
    return f"the connection dropped: {type(cause).__name__}: {cause}"


async def guarded(
    source: AsyncIterable[T], on_error: Callable[[Exception], BaseException]
) -> AsyncGenerator[T, None]:
    """Iterate ``source``, turning an exception raised while *fetching* an item into
    ``on_error(exc)``; exceptions thrown in by the consumer pass through untouched."""
    iterator = source.__aiter__()
    while True:
        try:
            item = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except Exception as exc:
            raise on_error(exc) from exc
        yield item
