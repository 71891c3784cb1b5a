"""What a server's resources, prompts and requests are, as aniki hands them over: small frozen
dataclasses made from the SDK's types (pure, no I/O)."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from mcp import types

from ..messages import MAX_ATTACHMENT_BYTES, MEDIA_TYPES, Attachment, Message, ToolCall
from ._results import safe_text

__all__ = [
    "ElicitationReply",
    "ElicitationRequest",
    "Prompt",
    "PromptArgument",
    "PromptResult",
    "Resource",
    "ResourceContents",
    "ResourceTemplate",
    "SamplingRequest",
    "log_text",
    "message_of",
    "prompt_of",
    "resource_contents_of",
    "resource_of",
    "template_of",
]


@dataclass(frozen=True, slots=True)
class Resource:
    """A resource a server lists (``await server.list_resources()``)."""

    uri: str
    """What ``read_resource`` takes to read it."""
    name: str
    """Its name."""
    title: str | None = None
    """A name for people, when the server gives one."""
    description: str | None = None
    """What it holds."""
    mime_type: str | None = None
    """Its media type, when known."""
    size: int | None = None
    """Its size in bytes, when known."""


@dataclass(frozen=True, slots=True)
class ResourceTemplate:
    """A family of resources a server can read (``await server.list_resource_templates()``):
    fill in its URI template (RFC 6570) and pass the URI to ``read_resource``."""

    uri_template: str
    """The URI template, such as ``"demo://resource/dynamic/text/{index}"``."""
    name: str
    """Its name."""
    title: str | None = None
    """A name for people, when the server gives one."""
    description: str | None = None
    """What its resources hold."""
    mime_type: str | None = None
    """Their media type, when all share one."""


@dataclass(frozen=True, slots=True)
class ResourceContents:
    """One part of what ``read_resource`` read: text or bytes."""

    uri: str
    """The URI of this part."""
    mime_type: str | None = None
    """Its media type, when the server says."""
    text: str | None = None
    """Its text (``None`` for binary contents)."""
    data: bytes | None = field(default=None, repr=False)
    """Its bytes (``None`` for text contents)."""


@dataclass(frozen=True, slots=True)
class PromptArgument:
    """An argument a prompt takes."""

    name: str
    """Its name, a key of ``get_prompt``'s ``arguments``."""
    description: str | None = None
    """What it is."""
    required: bool = False
    """Whether ``get_prompt`` must be given it."""


@dataclass(frozen=True, slots=True)
class Prompt:
    """A prompt a server offers (``await server.list_prompts()``)."""

    name: str
    """What ``get_prompt`` takes."""
    title: str | None = None
    """A name for people, when the server gives one."""
    description: str | None = None
    """What it is for."""
    arguments: tuple[PromptArgument, ...] = ()
    """The arguments it takes."""


@dataclass(frozen=True, slots=True)
class PromptResult:
    """A prompt filled in by its server (``await server.get_prompt(name, arguments)``)."""

    messages: tuple[Message, ...]
    """Its messages, as aniki messages: send them to a run (or add them to a session).
    Images in a user message are attachments; other media are described in the text."""
    description: str | None = None
    """What the server says about it."""


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """A server asking the model for a reply (MCP sampling), as the ``approve_sampling=``
    hook and a ``sampling=`` function receive it."""

    server: str
    """The name of the server asking."""
    messages: tuple[Message, ...]
    """The conversation it wants a reply to (user and assistant messages)."""
    system_prompt: str | None
    """The instructions it asks for, if any."""
    max_tokens: int
    """The most tokens the reply may have."""
    temperature: float | None = None
    """The sampling temperature it asks for."""
    stop_sequences: tuple[str, ...] = ()
    """Sequences that end the reply."""
    model_hints: tuple[str, ...] = ()
    """Models it would prefer, best first (hints only: the client chooses)."""
    tool_call: ToolCall | None = None
    """The tool call of the run that the request came during, when aniki can tell."""


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """A server asking the user for something (MCP elicitation), as the ``elicitation=``
    handler receives it."""

    server: str
    """The name of the server asking."""
    message: str
    """What it asks, to show the user."""
    mode: Literal["form", "url"]
    """``"form"``: answer with values matching :attr:`schema`; ``"url"``: the user should
    open :attr:`url` (accepting means they agree to)."""
    schema: dict[str, Any] | None = None
    """For a form: a JSON schema (an object of flat properties) of the answer."""
    url: str | None = None
    """For a URL request: the page to open."""
    tool_call: ToolCall | None = None
    """The tool call of the run that the request came during, when aniki can tell."""


@dataclass(frozen=True, slots=True)
class ElicitationReply:
    """The user's answer to an :class:`ElicitationRequest` (a handler may also return a dict,
    meaning accept with that content, or ``None``, meaning decline)."""

    action: Literal["accept", "decline", "cancel"]
    """Accept (with :attr:`content` for a form), decline, or cancel (dismissed unanswered)."""
    content: dict[str, str | int | float | bool | list[str] | None] | None = None
    """For an accepted form: the values, matching the request's schema."""


def resource_of(item: types.Resource) -> Resource:
    return Resource(item.uri, item.name, item.title, item.description, item.mime_type, item.size)


def template_of(item: types.ResourceTemplate) -> ResourceTemplate:
    return ResourceTemplate(
        item.uri_template, item.name, item.title, item.description, item.mime_type
    )


def resource_contents_of(
    item: types.TextResourceContents | types.BlobResourceContents,
) -> ResourceContents:
    """Raises ``ValueError`` for bytes that are not valid base64."""
    if isinstance(item, types.TextResourceContents):
        return ResourceContents(item.uri, item.mime_type, text=item.text)
    try:
        data = base64.b64decode(item.blob, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"the contents of {item.uri} are not valid base64") from exc
    return ResourceContents(item.uri, item.mime_type, data=data)


def prompt_of(item: types.Prompt) -> Prompt:
    arguments = tuple(
        PromptArgument(argument.name, argument.description, bool(argument.required))
        for argument in item.arguments or ()
    )
    return Prompt(item.name, item.title, item.description, arguments)


def message_of(role: Literal["user", "assistant"], blocks: list[Any]) -> Message:
    """Content blocks of one prompt or sampling message as an aniki message: text joined by
    newlines, images on a user message as attachments, anything else described."""
    parts: list[str] = []
    attachments: list[Attachment] = []
    for block in blocks:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            parts.append(_image(block, attachments if role == "user" else None))
        elif isinstance(block, types.EmbeddedResource) and isinstance(
            block.resource, types.TextResourceContents
        ):
            parts.append(f"[resource {block.resource.uri}]\n{block.resource.text}")
        elif isinstance(block, types.EmbeddedResource):
            parts.append(f"[resource {block.resource.uri}, binary, not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.name} <{block.uri}>]")
        else:
            kind = getattr(block, "type", type(block).__name__)
            parts.append(f"[{kind} content, not shown]")
    text = safe_text("\n".join(part for part in parts if part))
    if not text and not attachments:
        text = "[empty message]"  # a message must say something
    return Message(role, text, attachments=tuple(attachments))


def _image(block: types.ImageContent, attachments: list[Attachment] | None) -> str:
    try:
        raw = base64.b64decode(block.data, validate=True)
    except (binascii.Error, ValueError):
        return f"[image ({block.mime_type}) sent as invalid base64, not shown]"
    fits = MEDIA_TYPES.get(block.mime_type) == "image" and 0 < len(raw) <= MAX_ATTACHMENT_BYTES
    if attachments is not None and fits:
        attachments.append(Attachment(block.mime_type, data=raw))
        return ""
    return f"[image ({block.mime_type}, {len(raw):,} bytes), not shown]"


def log_text(data: Any) -> str:
    """A log message's data as text: a string as it is, anything else as JSON."""
    if isinstance(data, str):
        return safe_text(data)
    try:
        return safe_text(json.dumps(data, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return safe_text(repr(data))
