"""aniki's types to and from the Anthropic Messages wire format (pure, no I/O).

Messages are sent as content blocks. Every system message goes to the top-level ``system``
field; consecutive messages of one role (a run of tool results, say) merge into one
message, since a tool turn's results must all come back in a single ``user`` message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import UserError
from ..messages import Message, Reasoning
from ..usage import Usage
from ._anthropic_cache import add_breakpoints
from ._parts import anthropic_block, anthropic_thinking
from ._stream import IncompleteStream, MalformedReply, ToolCallAssembler, require_mapping
from ._stream import optional_text as _text
from .base import ModelRequest, ModelResponse, ModelSettings, ToolDefinition

__all__ = [
    "EventAccumulator",
    "build_params",
    "finish_reason",
    "messages_to_wire",
    "parse_message",
    "tool_input",
]

SchemaTransform = Callable[[dict[str, Any]], dict[str, Any]]

# The Messages API's stop reasons in aniki's (OpenAI's) words; others pass through.
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
}


def finish_reason(stop_reason: Any) -> str | None:
    """A ``stop_reason`` as aniki's finish reason (``"stop"``, ``"tool_calls"``, ...)."""
    if not isinstance(stop_reason, str):
        return None
    return _FINISH.get(stop_reason, stop_reason)


def tool_input(arguments: str) -> dict[str, Any]:
    """A stored call's raw arguments as a ``tool_use`` input object.

    The API needs an object. Arguments that are not a JSON object (the model once produced
    invalid JSON, say) are kept as text under ``"raw_arguments"`` rather than dropped, so the
    history stays sendable and the model still sees what it wrote.
    """
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):  # RecursionError: nested too deeply to decode
        value = None
    return value if isinstance(value, dict) else {"raw_arguments": arguments}


def _blocks(message: Message) -> list[dict[str, Any]]:
    attached = [anthropic_block(part) for part in message.attachments]
    if message.role == "tool":
        if not attached:
            content: Any = message.content
        else:
            content = [{"type": "text", "text": message.content}] if message.content else []
            content += attached
        return [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": content}]
    # Thinking goes back first, as it came; only Anthropic's own is taken back: reasoning
    # another provider wrote into the same history is left out (see anthropic_thinking).
    thinking = (anthropic_thinking(part) for part in message.reasoning)
    blocks: list[dict[str, Any]] = [block for block in thinking if block is not None]
    blocks += attached  # images and documents before the text that asks about them
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    blocks += [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": tool_input(call.arguments)}
        for call in message.tool_calls
    ]
    return blocks


EARLIER = "(earlier conversation omitted)"
"""The user turn put first when a history window starts with the assistant."""


def messages_to_wire(messages: tuple[Message, ...]) -> tuple[Any, list[dict[str, Any]]]:
    """``(system, messages)`` for the request; ``system`` is ``None`` when there is none."""
    system = [message.content for message in messages if message.role == "system"]
    wire: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if wire and wire[-1]["role"] == role:
            if role == "assistant":  # thinking may only open a turn: a later one's is left out
                blocks = [b for b in blocks if b["type"] not in ("thinking", "redacted_thinking")]
            wire[-1]["content"] += blocks
        else:
            wire.append({"role": role, "content": blocks})
    for turn in wire:
        # The API wants a user turn's tool results before its text.
        turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    if wire and wire[0]["role"] == "assistant":
        # A history policy may keep a window that opens on an assistant turn; the API
        # requires the conversation to open with a user turn.
        wire.insert(0, {"role": "user", "content": [{"type": "text", "text": EARLIER}]})
    if not system:
        return None, wire
    if len(system) == 1:
        return system[0], wire
    return [{"type": "text", "text": text} for text in system], wire


def tool_to_wire(tool: ToolDefinition) -> dict[str, Any]:
    """A tool definition as a client tool."""
    wire: dict[str, Any] = {"name": tool.name, "input_schema": tool.parameters}
    if tool.description:
        wire["description"] = tool.description
    return wire


def _tool_choice(settings: ModelSettings, tools: tuple[ToolDefinition, ...]) -> Any:
    choice = settings.get("tool_choice", "auto")
    wire: dict[str, Any]
    if choice in ("auto", "none"):
        wire = {"type": choice}
    elif choice == "required":
        wire = {"type": "any"}
    elif any(tool.name == choice for tool in tools):
        wire = {"type": "tool", "name": choice}
    else:
        raise UserError(
            f"settings tool_choice={choice!r} names no tool of this request; use 'auto', "
            f"'required', 'none' or one of {[tool.name for tool in tools]}"
        )
    if settings.get("parallel_tool_calls") is False and wire["type"] != "none":
        wire["disable_parallel_tool_use"] = True
    if wire == {"type": "auto"} and "tool_choice" not in settings:
        return None  # the API's default; leave the request as small as it can be
    return wire


def build_params(
    request: ModelRequest,
    *,
    default_max_tokens: int,
    transform_schema: SchemaTransform | None = None,
) -> dict[str, Any]:
    """Keyword arguments for ``messages.create`` (``stream`` itself left out).

    Unless ``settings["prompt_cache"]`` is ``False``, the request carries ``cache_control``
    breakpoints (see :mod:`._anthropic_cache`). ``transform_schema`` adapts an output schema
    to what structured outputs accept (the client ships one); without it the schema goes out
    as it is.
    """
    settings = request.settings
    system, messages = messages_to_wire(request.messages)
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": settings.get("max_tokens", default_max_tokens),
        "messages": messages,
    }
    if system is not None:
        params["system"] = system
    if request.tools:
        params["tools"] = [tool_to_wire(tool) for tool in request.tools]
        choice = _tool_choice(settings, request.tools)
        if choice is not None:
            params["tool_choice"] = choice
    if request.output_schema is not None:
        schema = dict(request.output_schema)
        params["output_config"] = {
            "format": {
                "type": "json_schema",
                "schema": transform_schema(schema) if transform_schema else schema,
            }
        }
    if "stop" in settings:
        params["stop_sequences"] = list(settings["stop"])
    if "timeout" in settings:
        params["timeout"] = settings["timeout"]
    if settings.get("extra_body"):
        params["extra_body"] = dict(settings["extra_body"])
    if settings.get("prompt_cache", True):
        add_breakpoints(params)
    return params


def _count(data: Mapping[str, Any], key: str) -> int | None:
    value = data.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


_USAGE_KEYS = (
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
)


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    counts = {key: _count(data, key) for key in _USAGE_KEYS}
    if all(value is None for value in counts.values()):
        return None  # no counts at all: unreported, not a measured zero
    uncached = counts["input_tokens"] or 0
    written = counts["cache_creation_input_tokens"] or 0
    read = counts["cache_read_input_tokens"] or 0
    return Usage(
        # The API's input_tokens leaves out the cached part; aniki's counts every token sent.
        input_tokens=uncached + written + read,
        output_tokens=counts["output_tokens"] or 0,
        requests=1,
        cache_read_tokens=read,
        cache_write_tokens=written,
    )


def _merged_usage(start: Mapping[str, Any], end: Mapping[str, Any]) -> dict[str, Any]:
    """``message_start``'s usage updated by ``message_delta``'s.

    ``message_delta`` always carries the final ``output_tokens``; it may also repeat the input
    counts (cumulative, so they replace ``message_start``'s) or send them as ``null``, which
    must not erase the counts ``message_start`` gave.
    """
    merged = dict(start)
    merged.update({key: value for key, value in end.items() if value is not None})
    return merged


def _mapping(value: Any) -> dict[str, Any]:
    # Usage is informational: a server that sends something else for it still gave a reply.
    return dict(value) if isinstance(value, Mapping) else {}


def _arguments(value: Any) -> str:
    if not isinstance(value, dict):
        raise MalformedReply(f"tool_use input is not an object: {value!r:.200}")
    return json.dumps(value, ensure_ascii=False)


def parse_message(data: Any) -> ModelResponse:
    """A whole (non-streamed) ``message`` object as a :class:`ModelResponse`."""
    data = require_mapping(data, "the reply")
    content = data.get("content")
    if not isinstance(content, list):
        raise MalformedReply("the reply has no content list")
    text: list[str] = []
    reasoning: list[Reasoning] = []
    calls = ToolCallAssembler()
    for index, raw in enumerate(content):
        block = require_mapping(raw, "a content block")
        if block.get("type") in ("thinking", "redacted_thinking"):
            reasoning.append(_reasoning(block))
        elif block.get("type") == "text":
            text.append(_text(block.get("text"), "a text block"))
        elif block.get("type") == "tool_use":
            calls.add(
                index,
                id=_text(block.get("id"), "tool_use id"),
                name=_text(block.get("name"), "tool_use name"),
                arguments=_arguments(block.get("input", {})),
            )
        # server-tool blocks carry nothing aniki keeps
    model = data.get("model")
    return ModelResponse(
        content="".join(text),
        tool_calls=calls.calls(),
        usage=_usage(data.get("usage")),
        finish_reason=finish_reason(data.get("stop_reason")),
        model=model if isinstance(model, str) else None,
        reasoning=tuple(reasoning),
        id=data.get("id") if isinstance(data.get("id"), str) else None,
    )


def _reasoning(block: Mapping[str, Any]) -> Reasoning:
    """A ``thinking`` or ``redacted_thinking`` block, verbatim, marked as Anthropic's."""
    if block.get("type") == "redacted_thinking":
        redacted = _text(block.get("data"), "redacted_thinking data")
        return Reasoning(redacted=redacted, provider="anthropic")
    signature = block.get("signature")
    return Reasoning(
        _text(block.get("thinking"), "a thinking block"),
        signature=_text(signature, "thinking signature") if signature is not None else None,
        provider="anthropic",
    )


class EventAccumulator:
    """Builds a :class:`ModelResponse` from Messages stream events, one at a time.

    The reply is complete only once ``message_stop`` arrived.
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._thinking: dict[int, dict[str, Any]] = {}  # by block index, in arrival order
        self._new_thinking: list[str] = []
        self._calls = ToolCallAssembler()
        self._start: dict[str, Any] = {}  # message_start's message: id, model, usage
        self._end_usage: dict[str, Any] = {}
        self._stop_reason: Any = None
        self.stopped = False

    def feed(self, event: Any) -> str:
        """Take one event; return the text it adds (often empty)."""
        event = require_mapping(event, "a stream event")
        kind = event.get("type")
        if kind == "message_start":
            self._start = require_mapping(event.get("message"), "message_start.message")
        elif kind == "content_block_start":
            return self._start_block(event)
        elif kind == "content_block_delta":
            return self._delta(event)
        elif kind == "message_delta":
            delta = require_mapping(event.get("delta") or {}, "message_delta.delta")
            self._stop_reason = delta.get("stop_reason", self._stop_reason)
            self._end_usage = _merged_usage(self._end_usage, _mapping(event.get("usage")))
        elif kind == "message_stop":
            self.stopped = True
        # ping, content_block_stop and event types added later carry nothing aniki keeps
        return ""

    def _index(self, event: dict[str, Any]) -> int:
        index = event.get("index")
        if not isinstance(index, int):
            raise MalformedReply(f"a content block event has no integer index: {index!r}")
        return index

    def _start_block(self, event: dict[str, Any]) -> str:
        block = require_mapping(event.get("content_block"), "content_block_start.content_block")
        if block.get("type") == "tool_use":
            self._calls.add(
                self._index(event),
                id=_text(block.get("id"), "tool_use id"),
                name=_text(block.get("name"), "tool_use name"),
                initial_arguments=_arguments(block.get("input") or {}),
            )
            return ""
        if block.get("type") == "text":
            text = _text(block.get("text"), "a text block")
            self._text.append(text)
            return text
        if block.get("type") in ("thinking", "redacted_thinking"):
            self._thinking[self._index(event)] = dict(block)
        return ""

    def _delta(self, event: dict[str, Any]) -> str:
        delta = require_mapping(event.get("delta"), "content_block_delta.delta")
        if delta.get("type") == "text_delta":
            text = _text(delta.get("text"), "text_delta.text")
            self._text.append(text)
            return text
        if delta.get("type") == "input_json_delta":
            self._calls.add(
                self._index(event), arguments=_text(delta.get("partial_json"), "partial_json")
            )
        elif delta.get("type") in ("thinking_delta", "signature_delta"):
            block = self._thinking.get(self._index(event))
            if block is None:
                raise MalformedReply(f"a {delta.get('type')} for a block that is not thinking")
            if delta["type"] == "thinking_delta":
                piece = _text(delta.get("thinking"), "thinking_delta.thinking")
                block["thinking"] = str(block.get("thinking") or "") + piece
                self._new_thinking.append(piece)
            else:
                block["signature"] = _text(delta.get("signature"), "signature_delta.signature")
        return ""

    def take_reasoning(self) -> str:
        """The thinking text fed since the last call."""
        new, self._new_thinking = "".join(self._new_thinking), []
        return new

    def finish(self) -> ModelResponse:
        """The whole reply; :class:`IncompleteStream` if ``message_stop`` never came."""
        if not self.stopped:
            raise IncompleteStream("the stream ended before message_stop")
        start = self._start
        return ModelResponse(
            content="".join(self._text),
            tool_calls=self._calls.calls(),
            usage=_usage(_merged_usage(_mapping(start.get("usage")), self._end_usage)),
            finish_reason=finish_reason(self._stop_reason),
            model=start.get("model") if isinstance(start.get("model"), str) else None,
            id=start.get("id") if isinstance(start.get("id"), str) else None,
            reasoning=tuple(_reasoning(block) for block in self._thinking.values()),
        )
