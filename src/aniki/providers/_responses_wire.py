"""aniki's types to and from the OpenAI Responses wire format (pure, no I/O).

The request side builds the keyword arguments of ``responses.create``: a stateless request
(``store=False``) whose ``input`` holds the whole history as items. The reply side reads a
``response`` object as plain dicts (the stream side is :mod:`._responses_stream`).

Each message becomes input items, in order:

=============  ============================================================================
message        input items
=============  ============================================================================
system         a ``developer`` message, where it stands in the history
user           a ``user`` message; attachments as ``input_image`` / ``input_file`` /
               ``input_text`` content
assistant      its own reasoning items (encrypted, as they came), then an ``assistant``
               message with its text, then one ``function_call`` item per tool call
tool           a ``function_call_output`` item; attachments in its output list
=============  ============================================================================

A reasoning item of a reply becomes one :class:`~aniki.Reasoning` part per summary part
(one part when the summary is empty), each with the item's id as ``signature``; the first
also holds the item's ``encrypted_content`` as ``redacted``. Consecutive parts with one id
become one item again when they are sent back, so the item goes back exactly as it came.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..messages import Message, Reasoning
from ..usage import Usage
from ._openai_wire import is_strict_schema, response_format, shared_settings
from ._parts import responses_part
from ._stream import MalformedReply, ReplyFailed, ToolCallAssembler, require_mapping
from ._stream import optional_text as _text
from ._strict import strict_schema
from .base import ModelRequest, ModelResponse, ModelSettings, ToolDefinition

__all__ = [
    "INCLUDE",
    "PROVIDER",
    "build_params",
    "failure",
    "message_to_items",
    "parse_response",
    "reasoning_items",
]

PROVIDER = "openai-responses"
"""The registered name of the provider, recorded on the reasoning it reads."""

INCLUDE = "reasoning.encrypted_content"
"""What a stateless request asks to be included: each reasoning item's encrypted content,
the only way to send the model's reasoning back without the server storing it."""

# Settings sent under the same name. The Responses API has no stop, seed or penalties.
_SAME_NAME = ("temperature", "top_p")

# incomplete_details.reason in aniki's (Chat Completions') words; others pass through.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def reasoning_items(parts: tuple[Reasoning, ...]) -> list[dict[str, Any]]:
    """The reasoning items to send back for ``parts``.

    Only reasoning this API wrote (``provider == "openai-responses"``) goes back, and only
    an item with its encrypted content: with ``store=False`` the server keeps nothing, so an
    id alone would name an item it cannot find.
    """
    groups: list[list[Reasoning]] = []
    for part in parts:
        if part.provider != PROVIDER or part.signature is None:
            continue
        if groups and groups[-1][0].signature == part.signature:
            groups[-1].append(part)
        else:
            groups.append([part])
    items: list[dict[str, Any]] = []
    for group in groups:
        encrypted = next((part.redacted for part in group if part.redacted), None)
        if encrypted is None:
            continue
        summary = [{"type": "summary_text", "text": part.text} for part in group if part.text]
        items.append(
            {
                "type": "reasoning",
                "id": group[0].signature,
                "summary": summary,
                "encrypted_content": encrypted,
            }
        )
    return items


def _content(message: Message) -> str | list[dict[str, Any]]:
    if not message.attachments:
        return message.content
    text = [{"type": "input_text", "text": message.content}] if message.content else []
    return text + [responses_part(part) for part in message.attachments]


def message_to_items(message: Message) -> list[dict[str, Any]]:
    """``message`` as input items; tool-call arguments go out verbatim."""
    if message.role == "system":
        return [{"role": "developer", "content": message.content}]
    if message.role == "user":
        return [{"role": "user", "content": _content(message)}]
    if message.role == "tool":
        output = _content(message)
        return [{"type": "function_call_output", "call_id": message.tool_call_id, "output": output}]
    items = reasoning_items(message.reasoning)  # before the output they led to
    if message.content:
        items.append({"role": "assistant", "content": message.content})
    for call in message.tool_calls:
        arguments = call.arguments
        items.append(
            {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": arguments}
        )
    return items


def tool_to_wire(tool: ToolDefinition, *, strict: bool = True) -> dict[str, Any]:
    """A tool definition as a ``function`` tool, in strict mode when its schema can be
    (see :mod:`aniki.providers._strict`) unless ``strict`` is off."""
    wire: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        wire["description"] = tool.description
    strict_parameters = strict_schema(tool.parameters) if strict else None
    wire["parameters"] = tool.parameters if strict_parameters is None else strict_parameters
    # The API's default is strict, which refuses a schema that leaves objects open: say it.
    wire["strict"] = strict_parameters is not None or is_strict_schema(tool.parameters)
    return wire


def settings_params(settings: ModelSettings, tools: tuple[ToolDefinition, ...]) -> dict[str, Any]:
    """The request fields ``settings`` maps to (``timeout`` and ``extra_body`` included)."""
    params: dict[str, Any] = {key: settings[key] for key in _SAME_NAME if key in settings}  # type: ignore[literal-required]
    if "max_tokens" in settings:
        params["max_output_tokens"] = settings["max_tokens"]
    return shared_settings(params, settings, tools, lambda name: {"type": "function", "name": name})


def build_params(request: ModelRequest, *, encrypted_reasoning: bool = True) -> dict[str, Any]:
    """Keyword arguments for ``responses.create`` (``stream`` itself left out)."""
    params: dict[str, Any] = {
        "model": request.model,
        "input": [item for message in request.messages for item in message_to_items(message)],
        "store": False,
    }
    if encrypted_reasoning:
        params["include"] = [INCLUDE]
    strict = request.settings.get("strict_schemas", True)
    if request.tools:
        params["tools"] = [tool_to_wire(tool, strict=strict) for tool in request.tools]
    if request.output_schema is not None:
        schema_format = response_format(request.output_schema, strict=strict)["json_schema"]
        params["text"] = {"format": {"type": "json_schema", **schema_format}}
    params.update(settings_params(request.settings, request.tools))
    return params


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    given, produced = data.get("input_tokens"), data.get("output_tokens")
    if not isinstance(given, int) and not isinstance(produced, int):
        return None  # no counts at all: unreported, not a measured zero
    details = data.get("input_tokens_details")
    details = details if isinstance(details, Mapping) else {}
    cached, written = details.get("cached_tokens"), details.get("cache_write_tokens")
    return Usage(
        input_tokens=given if isinstance(given, int) else 0,
        output_tokens=produced if isinstance(produced, int) else 0,
        requests=1,
        cache_read_tokens=cached if isinstance(cached, int) else 0,  # parts of input_tokens
        cache_write_tokens=written if isinstance(written, int) else 0,
    )


def failure(response: Mapping[str, Any]) -> ReplyFailed:
    """The error for a response whose status says it failed (or was cancelled)."""
    error = response.get("error")
    if isinstance(error, Mapping):
        code, said = error.get("code"), error.get("message")
        text = f"{code}: {said}" if code and said else str(said or code or "no reason given")
        return ReplyFailed(f"the response failed ({text})", body=dict(error))
    return ReplyFailed(f"the response ended with status {response.get('status')!r}")


def _reasoning(item: Mapping[str, Any]) -> list[Reasoning]:
    """A reasoning item as one part per summary part (see the module docstring)."""
    item_id = _text(item.get("id"), "reasoning item id") or None
    encrypted = _text(item.get("encrypted_content"), "reasoning encrypted_content") or None
    summary = item.get("summary") or []
    if not isinstance(summary, list):
        raise MalformedReply(f"reasoning summary is not a list: {summary!r:.200}")
    texts = [
        _text(require_mapping(part, "a summary part").get("text"), "summary text")
        for part in summary
    ]
    parts: list[Reasoning] = []
    for position, text in enumerate(texts or [""]):
        redacted = encrypted if position == 0 else None
        if text or redacted or item_id:
            parts.append(Reasoning(text, signature=item_id, redacted=redacted, provider=PROVIDER))
    return parts


def _finish_reason(data: Mapping[str, Any], calls: bool) -> str:
    if data.get("status") != "incomplete":
        return "tool_calls" if calls else "stop"
    details = data.get("incomplete_details")
    reason = details.get("reason") if isinstance(details, Mapping) else None
    if not isinstance(reason, str):
        return "incomplete"
    return _INCOMPLETE.get(reason, reason)


def parse_response(data: Any) -> ModelResponse:
    """A whole ``response`` object as a :class:`ModelResponse`.

    :class:`~._stream.ReplyFailed` when its status is ``failed`` or ``cancelled``. An
    ``incomplete`` one is a reply like any other, its finish reason saying why it stopped
    (``"length"`` when it reached ``max_output_tokens``), as Chat Completions has it.
    """
    data = require_mapping(data, "the reply")
    if data.get("status") in ("failed", "cancelled"):
        raise failure(data)
    output = data.get("output")
    if not isinstance(output, list):
        raise MalformedReply("the reply has no output list")
    text: list[str] = []
    refusal: list[str] = []
    reasoning: list[Reasoning] = []
    calls = ToolCallAssembler()
    for index, raw in enumerate(output):
        item = require_mapping(raw, "an output item")
        kind = item.get("type")
        if kind == "message":
            content = item.get("content") or []
            if not isinstance(content, list):
                raise MalformedReply("a message's content is not a list")
            for raw_part in content:
                part = require_mapping(raw_part, "a message content part")
                if part.get("type") == "output_text":
                    text.append(_text(part.get("text"), "output_text text"))
                elif part.get("type") == "refusal":
                    refusal.append(_text(part.get("refusal"), "a refusal"))
        elif kind == "function_call":
            calls.add(
                index,
                id=_text(item.get("call_id"), "function_call call_id"),
                name=_text(item.get("name"), "function_call name"),
                arguments=_text(item.get("arguments"), "function_call arguments"),
            )
        elif kind == "reasoning":
            reasoning += _reasoning(item)
        # hosted tools' items (web_search_call, ...) carry nothing aniki keeps
    model = data.get("model")
    return ModelResponse(
        content="".join(text) or "".join(refusal),
        tool_calls=calls.calls(),
        usage=_usage(data.get("usage")),
        finish_reason=_finish_reason(data, bool(calls)),
        model=model if isinstance(model, str) else None,
        reasoning=tuple(reasoning),
        id=data.get("id") if isinstance(data.get("id"), str) else None,
    )
