"""The OpenAI Responses API's server-sent events, read into one reply (pure, no I/O).

A stream announces each output item (``response.output_item.added``), streams its text
(``response.output_text.delta``), reasoning summary
(``response.reasoning_summary_text.delta``) or tool-call arguments
(``response.function_call_arguments.delta``), then sends the finished item
(``response.output_item.done``). It ends with one terminal event carrying the whole
response: ``response.completed``, ``response.incomplete`` (cut short, by
``max_output_tokens`` say) or ``response.failed``; an ``error`` event may end it instead.
"""

from __future__ import annotations

from typing import Any

from ._responses_wire import failure, parse_response
from ._stream import IncompleteStream, MalformedReply, ReplyFailed, require_mapping
from ._stream import optional_text as _text
from .base import ModelResponse

__all__ = ["EventAccumulator"]

_TERMINAL = ("response.completed", "response.incomplete")

_SUMMARY_BREAK = "\n\n"
"""Put between two summary parts in the streamed reasoning, so that a reader sees them apart."""


class EventAccumulator:
    """Builds a :class:`ModelResponse` from Responses stream events, one at a time.

    Text and reasoning-summary deltas are passed on as they arrive. The reply itself is the
    response the terminal event carries; when a server leaves its ``output`` empty, the
    items of the ``response.output_item.done`` events are used instead. Tool-call arguments
    are taken whole from those finished items, never from their deltas.
    """

    def __init__(self) -> None:
        self._done: dict[int, dict[str, Any]] = {}
        self._thinking: list[str] = []
        self._summary_at: tuple[Any, Any] | None = None
        self._final: dict[str, Any] | None = None

    def feed(self, event: Any) -> str:
        """Take one event; return the text it adds (often empty).

        :class:`~._stream.ReplyFailed` for ``response.failed`` and ``error`` events.
        """
        event = require_mapping(event, "a stream event")
        kind = event.get("type")
        if kind == "response.output_text.delta":
            return _text(event.get("delta"), "response.output_text.delta delta")
        if kind == "response.reasoning_summary_text.delta":
            self._summary_delta(event)
        elif kind == "response.output_item.done":
            index = event.get("output_index")
            if not isinstance(index, int):
                raise MalformedReply(f"output_item.done has no integer output_index: {index!r}")
            self._done[index] = require_mapping(event.get("item"), "output_item.done item")
        elif kind in _TERMINAL:
            self._final = require_mapping(event.get("response"), f"{kind} response")
        elif kind == "response.failed":
            raise failure(require_mapping(event.get("response"), "response.failed response"))
        elif kind == "error":
            said = event.get("message") or event.get("code") or "no reason given"
            raise ReplyFailed(str(said), body=event)
        # response.created, content_part.*, function_call_arguments.* and event types added
        # later carry nothing the finished items do not
        return ""

    def _summary_delta(self, event: dict[str, Any]) -> None:
        piece = _text(event.get("delta"), "reasoning_summary_text delta")
        at = (event.get("item_id"), event.get("summary_index"))
        if self._summary_at is not None and at != self._summary_at:
            piece = _SUMMARY_BREAK + piece
        self._summary_at = at
        if piece:
            self._thinking.append(piece)

    def take_reasoning(self) -> str:
        """The reasoning-summary text fed since the last call."""
        new, self._thinking = "".join(self._thinking), []
        return new

    def finish(self) -> ModelResponse:
        """The whole reply; :class:`IncompleteStream` if no terminal event came."""
        if self._final is None:
            raise IncompleteStream("the stream ended before response.completed")
        final = self._final
        if not final.get("output") and self._done:
            final = {**final, "output": [self._done[index] for index in sorted(self._done)]}
        return parse_response(final)
