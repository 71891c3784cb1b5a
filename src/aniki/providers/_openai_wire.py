"""aniki's types to and from the Chat Completions wire format (pure, no I/O).

The request side builds the keyword arguments of ``chat.completions.create``; the reply side
reads the JSON the server sent (as plain dicts), whole or as stream chunks.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..errors import UserError
from ..messages import Message, Reasoning
from ..usage import Usage
from ._parts import kinds, openai_part
from ._stream import IncompleteStream, MalformedReply, ToolCallAssembler, require_mapping
from ._stream import optional_text as _text
from ._strict import strict_schema
from .base import ModelRequest, ModelResponse, ModelSettings, ToolDefinition

__all__ = [
    "ChunkAccumulator",
    "MaxTokensParam",
    "build_params",
    "is_strict_schema",
    "message_to_wire",
    "parse_completion",
    "response_format",
]

MaxTokensParam = Literal["max_tokens", "max_completion_tokens"]

# Settings sent under the same name in the request body.
_SAME_NAME = ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty")


def message_to_wire(message: Message) -> dict[str, Any]:
    """One message in the Chat Completions format; tool-call arguments go out verbatim.

    Attachments of a user message become content parts (images, PDFs and audio inline or,
    for images, by URL; a text document as a text part). Reasoning is not sent: the format
    has no place for it (servers that stream ``reasoning_content`` refuse it back).
    """
    if message.attachments:
        if message.role == "tool":
            raise UserError(
                "the Chat Completions API takes only text in a tool result, and a tool "
                f"returned {kinds(message.attachments)}; return text from that tool, or use "
                "a provider that takes them (anthropic)"
            )
        text = [{"type": "text", "text": message.content}] if message.content else []
        return {
            "role": message.role,
            "content": text + [openai_part(part) for part in message.attachments],
        }
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments},
                }
                for call in message.tool_calls
            ],
        }
    if message.role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
    return {"role": message.role, "content": message.content}


def tool_to_wire(tool: ToolDefinition, *, strict: bool = True) -> dict[str, Any]:
    """A tool definition as a ``function`` tool, in strict mode when its schema can be
    (see :mod:`aniki.providers._strict`) unless ``strict`` is off."""
    strict_parameters = strict_schema(tool.parameters) if strict else None
    function: dict[str, Any] = {
        "name": tool.name,
        "parameters": tool.parameters if strict_parameters is None else strict_parameters,
    }
    if tool.description:
        function["description"] = tool.description
    if strict_parameters is not None:
        function["strict"] = True
    return {"type": "function", "function": function}


def is_strict_schema(schema: Any) -> bool:
    """Whether OpenAI's strict mode accepts ``schema`` as it is.

    Strict mode needs every object to list all its properties as required and to forbid
    others (``additionalProperties: false``); the root must be an object.
    """
    return isinstance(schema, Mapping) and schema.get("type") == "object" and _strict(schema)


def _strict(node: Any) -> bool:
    if isinstance(node, list):
        return all(_strict(item) for item in node)
    if not isinstance(node, Mapping):
        return True
    if node.get("type") == "object" or "properties" in node:
        properties = node.get("properties") or {}
        if node.get("additionalProperties") is not False:
            return False
        if not isinstance(properties, Mapping) or set(node.get("required") or ()) != set(
            properties
        ):
            return False
    return all(_strict(value) for key, value in node.items() if key != "enum" and key != "const")


def _schema_name(schema: Mapping[str, Any]) -> str:
    title = schema.get("title")
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", title)[:64] if isinstance(title, str) else ""
    return name or "output"


def response_format(schema: Mapping[str, Any], *, strict: bool = True) -> dict[str, Any]:
    """The ``json_schema`` response format for an output schema, in strict mode when the
    schema can be (unless ``strict`` is off)."""
    strict_form = strict_schema(schema) if strict else None
    return {
        "type": "json_schema",
        "json_schema": {
            "name": _schema_name(schema),
            "schema": dict(schema) if strict_form is None else strict_form,
            "strict": strict_form is not None or is_strict_schema(schema),
        },
    }


def _tool_choice(choice: str, tools: tuple[ToolDefinition, ...], named: NamedTool) -> Any:
    if choice in ("auto", "required", "none"):
        return choice
    if not any(tool.name == choice for tool in tools):
        raise UserError(
            f"settings tool_choice={choice!r} names no tool of this request; use 'auto', "
            f"'required', 'none' or one of {[tool.name for tool in tools]}"
        )
    return named(choice)


NamedTool = Callable[[str], dict[str, Any]]
"""How an API names one tool in ``tool_choice``."""


def settings_params(
    settings: ModelSettings, tools: tuple[ToolDefinition, ...], max_tokens_param: MaxTokensParam
) -> dict[str, Any]:
    """The request fields ``settings`` maps to (``timeout`` and ``extra_body`` included)."""
    params: dict[str, Any] = {key: settings[key] for key in _SAME_NAME if key in settings}  # type: ignore[literal-required]
    if "max_tokens" in settings:
        params[max_tokens_param] = settings["max_tokens"]
    if "stop" in settings:
        params["stop"] = list(settings["stop"])
    return shared_settings(
        params, settings, tools, lambda name: {"type": "function", "function": {"name": name}}
    )


def shared_settings(
    params: dict[str, Any],
    settings: ModelSettings,
    tools: tuple[ToolDefinition, ...],
    named: NamedTool,
) -> dict[str, Any]:
    """``params`` with the settings both OpenAI APIs send alike (Chat Completions and
    Responses): tool options, the timeout, the cache key and ``extra_body``."""
    # OpenAI rejects tool options in a request without tools.
    if tools and "parallel_tool_calls" in settings:
        params["parallel_tool_calls"] = settings["parallel_tool_calls"]
    if tools and "tool_choice" in settings:
        params["tool_choice"] = _tool_choice(settings["tool_choice"], tools, named)
    if "timeout" in settings:
        params["timeout"] = settings["timeout"]
    if settings.get("prompt_cache_key"):
        params["prompt_cache_key"] = settings["prompt_cache_key"]
    if settings.get("extra_body"):
        params["extra_body"] = dict(settings["extra_body"])
    return params


def build_params(
    request: ModelRequest,
    *,
    stream: bool,
    max_tokens_param: MaxTokensParam = "max_completion_tokens",
    stream_usage: bool = True,
) -> dict[str, Any]:
    """Keyword arguments for ``chat.completions.create`` (``stream`` itself left out)."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": [message_to_wire(message) for message in request.messages],
    }
    strict = request.settings.get("strict_schemas", True)
    if request.tools:
        params["tools"] = [tool_to_wire(tool, strict=strict) for tool in request.tools]
    if request.output_schema is not None:
        params["response_format"] = response_format(request.output_schema, strict=strict)
    if stream and stream_usage:
        params["stream_options"] = {"include_usage": True}
    params.update(settings_params(request.settings, request.tools, max_tokens_param))
    return params


def _usage(data: Any) -> Usage | None:
    if not isinstance(data, Mapping):
        return None
    prompt, completion = data.get("prompt_tokens"), data.get("completion_tokens")
    if not isinstance(prompt, int) and not isinstance(completion, int):
        return None
    details = data.get("prompt_tokens_details")
    cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
    return Usage(
        input_tokens=prompt if isinstance(prompt, int) else 0,
        output_tokens=completion if isinstance(completion, int) else 0,
        requests=1,
        # Part of prompt_tokens. OpenAI writes to its cache without reporting (or billing) it.
        cache_read_tokens=cached if isinstance(cached, int) else 0,
    )


def _first_choice(data: Mapping[str, Any]) -> dict[str, Any]:
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedReply("the reply has no choices")
    return require_mapping(choices[0], "choices[0]")


def parse_completion(data: Any) -> ModelResponse:
    """A whole (non-streamed) ``chat.completion`` object as a :class:`ModelResponse`."""
    data = require_mapping(data, "the reply")
    choice = _first_choice(data)
    message = require_mapping(choice.get("message"), "choices[0].message")
    calls = ToolCallAssembler()
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise MalformedReply("message.tool_calls is not a list")
    for position, raw in enumerate(raw_calls):
        raw = require_mapping(raw, "a tool call")
        function = require_mapping(raw.get("function"), "a tool call's function")
        calls.add(
            position,
            id=_text(raw.get("id"), "tool call id"),
            name=_text(function.get("name"), "tool call name"),
            arguments=_text(function.get("arguments"), "tool call arguments"),
        )
    content = _text(message.get("content"), "message.content")
    refusal = _text(message.get("refusal"), "message.refusal")
    thinking = _text(message.get("reasoning_content"), "message.reasoning_content")
    model = data.get("model")
    return ModelResponse(
        content=content or refusal,
        tool_calls=calls.calls(),
        usage=_usage(data.get("usage")),
        finish_reason=_text(choice.get("finish_reason"), "finish_reason") or None,
        model=model if isinstance(model, str) else None,
        reasoning=(Reasoning(thinking, provider="openai"),) if thinking else (),
        id=data.get("id") if isinstance(data.get("id"), str) else None,
    )


class ChunkAccumulator:
    """Builds a :class:`ModelResponse` from ``chat.completion.chunk`` objects, one at a time.

    The reply is complete once a chunk carries a ``finish_reason``; usage comes from the
    last chunk (its ``choices`` are empty) when the request asked for it.
    """

    def __init__(self) -> None:
        self._text: list[str] = []
        self._refusal: list[str] = []
        self._thinking: list[str] = []  # reasoning_content (llama.cpp, vLLM, DeepSeek)
        self._thinking_taken = 0
        self._calls = ToolCallAssembler()
        self._usage: Usage | None = None
        self._model: str | None = None
        self._id: str | None = None  # the same on every chunk
        self.finish_reason: str | None = None
        self.chunks = 0
        """How many chunks were fed (none: the server sent nothing but the stream's end)."""

    def feed(self, chunk: Any) -> str:
        """Take one chunk; return the text it adds (often empty)."""
        self.chunks += 1
        chunk = require_mapping(chunk, "a stream chunk")
        if isinstance(chunk.get("model"), str):
            self._model = chunk["model"]
        if isinstance(chunk.get("id"), str):
            self._id = chunk["id"]
        usage = _usage(chunk.get("usage"))
        if usage is not None:
            self._usage = usage
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise MalformedReply("chunk.choices is not a list")
        added = ""
        for raw_choice in choices:
            choice = require_mapping(raw_choice, "a chunk choice")
            if choice.get("index", 0) != 0:
                continue  # only the first choice is used (aniki never asks for n > 1)
            added += self._feed_choice(choice)
        return added

    def _feed_choice(self, choice: dict[str, Any]) -> str:
        delta = require_mapping(choice.get("delta") or {}, "a chunk delta")
        text = _text(delta.get("content"), "delta.content")
        if text:
            self._text.append(text)
        refusal = _text(delta.get("refusal"), "delta.refusal")
        if refusal:
            self._refusal.append(refusal)
        thinking = _text(delta.get("reasoning_content"), "delta.reasoning_content")
        if thinking:
            self._thinking.append(thinking)
        fragments = delta.get("tool_calls") or []
        if not isinstance(fragments, list):
            raise MalformedReply("delta.tool_calls is not a list")
        for position, raw in enumerate(fragments):
            fragment = require_mapping(raw, "a tool call fragment")
            function = require_mapping(fragment.get("function") or {}, "a fragment's function")
            index = fragment.get("index", position)
            if not isinstance(index, int):
                raise MalformedReply(f"tool call fragment index is not an integer: {index!r}")
            self._calls.add(
                index,
                id=_text(fragment.get("id"), "tool call id") or None,
                name=_text(function.get("name"), "tool call name") or None,
                arguments=_text(function.get("arguments"), "tool call arguments"),
            )
        finish = _text(choice.get("finish_reason"), "finish_reason")
        if finish:
            self.finish_reason = finish
        return text

    def take_reasoning(self) -> str:
        """The reasoning text fed since the last call."""
        new = "".join(self._thinking[self._thinking_taken :])
        self._thinking_taken = len(self._thinking)
        return new

    def finish(self) -> ModelResponse:
        """The whole reply; :class:`IncompleteStream` if the stream never said it finished."""
        if self.finish_reason is None:
            raise IncompleteStream("the stream ended without a finish_reason")
        return ModelResponse(
            content="".join(self._text) or "".join(self._refusal),
            tool_calls=self._calls.calls(),
            usage=self._usage,
            finish_reason=self.finish_reason,
            model=self._model,
            id=self._id,
            reasoning=(
                (Reasoning("".join(self._thinking), provider="openai"),) if self._thinking else ()
            ),
        )
