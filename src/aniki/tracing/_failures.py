"""How a failure is recorded on a span, with or without what its message says.

An error's text can quote the conversation: a provider's 400 body may echo the request it
refused (the prompt, the instructions, tool results), a JSON-schema error names the value it
rejected, and pydantic's ``input_value=`` in the error chained to an
:class:`~aniki.OutputValidationError` is the model's reply. So without ``include_content``
only what is known to be free of content is recorded: the classes of the error and of those
chained to it, their stack frames (source code, not data), a provider's HTTP status, and the
message of an error aniki composes from numbers alone. With it, the whole exception, as
OpenTelemetry records one.
"""

from __future__ import annotations

import traceback

from opentelemetry.trace import Span, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from ..errors import MaxTurnsExceeded, ProviderError, RunTimeoutError
from . import _names as n

__all__ = ["record_failure", "type_name"]

_COMPOSED = (MaxTurnsExceeded, RunTimeoutError)
"""Errors whose whole message aniki writes from a limit, never from a message or a reply."""

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def record_failure(span: Span, error: BaseException, *, with_message: bool) -> None:
    """Record ``error`` on ``span``; its message (and those chained) only ``with_message``."""
    kind = type_name(error)
    span.set_attribute(n.ERROR_TYPE, kind)
    if with_message:
        span.record_exception(error, attributes={n.EXCEPTION_TYPE: kind})
        span.set_status(Status(StatusCode.ERROR, f"{kind}: {error}"))
        return
    event: dict[str, AttributeValue] = {
        n.EXCEPTION_TYPE: kind,
        n.EXCEPTION_STACKTRACE: _frames(error),
    }
    said = None
    if type(error) in _COMPOSED:  # exactly: a subclass may say anything
        said = event[n.EXCEPTION_MESSAGE] = str(error)
    elif isinstance(error, ProviderError) and error.status_code is not None:
        said = f"HTTP {error.status_code}"
    span.add_event(n.EXCEPTION_EVENT, event)
    span.set_status(Status(StatusCode.ERROR, f"{kind}: {said}" if said else kind))


def type_name(error: BaseException) -> str:
    """The error's class as ``error.type`` wants it: qualified by its module."""
    cls = type(error)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _frames(error: BaseException) -> str:
    """``error``'s traceback as Python prints it, chained errors first, each message left out."""
    told: list[str] = []
    seen: set[int] = set()
    node = error
    while True:
        seen.add(id(node))
        frames = "".join(traceback.format_tb(node.__traceback__))
        told.append(f"Traceback (most recent call last):\n{frames}{type_name(node)}\n")
        if node.__cause__ is not None:
            chained, link = node.__cause__, _CAUSE
        elif node.__context__ is not None and not node.__suppress_context__:
            chained, link = node.__context__, _CONTEXT
        else:
            break
        if id(chained) in seen:
            break
        told.append(link)
        node = chained
    return "".join(reversed(told))
