"""Messages and tool calls: the unit of conversation history, and the rules each one keeps.

A :class:`Message` validates itself when it is made, so an invalid one cannot exist: the
rules (from the specification) are a valid role; string content; non-empty content unless
an assistant message carries tool calls; tool calls only on assistant messages; and a
``tool_call_id`` on every ``tool`` message. Breaking one raises :class:`~aniki.ValidationError`
naming the field and the rule.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from .errors import ValidationError

__all__ = [
    "MAX_ATTACHMENT_BYTES",
    "MEDIA_TYPES",
    "Attachment",
    "AttachmentKind",
    "Message",
    "MessageLike",
    "Reasoning",
    "Role",
    "ToolCall",
    "to_message",
    "to_messages",
]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(get_args(Role))

_MESSAGE_KEYS = frozenset(
    {"role", "content", "tool_calls", "tool_call_id", "attachments", "reasoning"}
)
_TOOL_CALL_KEYS = frozenset({"id", "name", "arguments"})


def _shown(value: object) -> str:
    """``value`` for an error message: short, and safe for any input (huge, deeply nested)."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):  # a huge int's repr is long (or refused past 4300 digits)
        return repr(value) if -(10**20) < value < 10**20 else f"an int of {value.bit_length()} bits"
    # The repr of a hostile container can be huge or recurse too deeply: name the type only.
    return f"a {type(value).__name__}"


def _check_text(value: object, where: str, *, field: str) -> str:
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string, got {type(value).__name__}", field=field)
    if value.isascii():  # no surrogates possible; spares encoding a long text
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{where} is not valid Unicode text (a lone surrogate at index {exc.start}); "
            "decode the source bytes properly before storing them",
            field=field,
        ) from None
    return value


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A model's request to call one tool.

    Example::

        call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}')
    """

    id: str
    """The provider's id for this call; the ``tool`` message answering it repeats it."""
    name: str
    """The name of the tool to call."""
    arguments: str = "{}"
    """The arguments as the raw JSON text the model produced, kept verbatim even when invalid."""

    def __post_init__(self) -> None:
        for name in ("id", "name"):
            value = _check_text(
                getattr(self, name), f"tool call {name}", field=f"tool_calls.{name}"
            )
            if not value:
                raise ValidationError(
                    f"tool call {name} must not be empty", field=f"tool_calls.{name}"
                )
        _check_text(self.arguments, "tool call arguments", field="tool_calls.arguments")

    def to_dict(self) -> dict[str, str]:
        """The call as a JSON-safe dict: ``{"id": ..., "name": ..., "arguments": ...}``."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ToolCall:
        """Build a call from a mapping with the keys ``id``, ``name`` and ``arguments``."""
        if not isinstance(data, Mapping):
            raise ValidationError(
                f"a tool call must be a ToolCall or a mapping, got {type(data).__name__}",
                field="tool_calls",
            )
        unknown = set(data) - _TOOL_CALL_KEYS
        if unknown:
            raise ValidationError(
                f"unknown tool call key(s) {_keys(unknown)}; allowed: {sorted(_TOOL_CALL_KEYS)}",
                field="tool_calls",
            )
        missing = {"id", "name"} - set(data)
        if missing:
            raise ValidationError(
                f"a tool call needs {sorted(missing)}", field=f"tool_calls.{min(missing)}"
            )
        return cls(id=data["id"], name=data["name"], arguments=data.get("arguments", "{}"))


AttachmentKind: TypeAlias = Literal["image", "document", "audio"]

MEDIA_TYPES: Mapping[str, AttachmentKind] = {
    "image/png": "image",
    "image/jpeg": "image",
    "image/gif": "image",
    "image/webp": "image",
    "application/pdf": "document",
    "text/plain": "document",
    "audio/wav": "audio",
    "audio/mpeg": "audio",
}
"""The media types an :class:`Attachment` may have, each with its kind: those that the
OpenAI and Anthropic APIs take in a message (a provider refuses the kinds its API lacks)."""

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""The largest inline attachment: 20 MiB, the most OpenAI takes per image (Anthropic caps a
whole request at 32 MB). Larger files go by ``url=``."""

_ATTACHMENT_KEYS = frozenset({"media_type", "data", "url", "name"})
_REASONING_KEYS = frozenset({"text", "signature", "redacted"})


@dataclass(frozen=True, slots=True)
class Attachment:
    """An image, document or audio clip sent with a user or tool message: inline bytes, or a
    URL the provider fetches.

    Example::

        Attachment("image/png", data=Path("chart.png").read_bytes(), name="chart.png")
        Attachment("application/pdf", url="https://example.com/report.pdf")
    """

    media_type: str
    """The IANA media type, one of :data:`MEDIA_TYPES` (``"image/png"``, ...)."""
    data: bytes | None = field(default=None, kw_only=True)
    """The content itself, at most :data:`MAX_ATTACHMENT_BYTES`; or ``None`` with ``url``."""
    url: str | None = field(default=None, kw_only=True)
    """Where the provider fetches it (``http://`` or ``https://``); or ``None`` with ``data``."""
    name: str | None = field(default=None, kw_only=True)
    """A file name to show (and, for documents, to give the model); optional."""

    def __post_init__(self) -> None:
        kind = MEDIA_TYPES.get(self.media_type) if isinstance(self.media_type, str) else None
        if kind is None:
            raise ValidationError(
                f"attachment media_type must be one of {sorted(MEDIA_TYPES)}, got "
                f"{_shown(self.media_type)}",
                field="attachments.media_type",
            )
        if (self.data is None) == (self.url is None):
            raise ValidationError(
                "an attachment needs exactly one of data= (its bytes) or url= (where it is)",
                field="attachments.data",
            )
        if self.data is not None:
            data = self.data
            if isinstance(data, (bytearray, memoryview)):
                data = bytes(data)
                object.__setattr__(self, "data", data)
            if not isinstance(data, bytes):
                raise ValidationError(
                    f"attachment data must be bytes, got {type(data).__name__} (for base64 "
                    "text, use Attachment.from_dict or base64.b64decode)",
                    field="attachments.data",
                )
            if not data:
                raise ValidationError("attachment data is empty", field="attachments.data")
            if len(data) > MAX_ATTACHMENT_BYTES:
                raise ValidationError(
                    f"attachment data is {len(data):,} bytes, over the limit of "
                    f"{MAX_ATTACHMENT_BYTES:,}; send a file this large by url=",
                    field="attachments.data",
                )
        if self.url is not None:
            url = _check_text(self.url, "attachment url", field="attachments.url")
            if not url.startswith(("http://", "https://")) or len(url) <= len("https://"):
                raise ValidationError(
                    f"attachment url must be an http:// or https:// URL, got {_shown(url)}",
                    field="attachments.url",
                )
        if self.name is not None and not _check_text(
            self.name, "attachment name", field="attachments.name"
        ):
            raise ValidationError("attachment name must not be empty", field="attachments.name")

    @property
    def kind(self) -> AttachmentKind:
        """``"image"``, ``"document"`` or ``"audio"``, from the media type."""
        return MEDIA_TYPES[self.media_type]

    def __repr__(self) -> str:
        where = f"data=<{len(self.data):,} bytes>" if self.data is not None else f"url={self.url!r}"
        name = f", name={self.name!r}" if self.name is not None else ""
        return f"Attachment({self.media_type!r}, {where}{name})"

    def to_dict(self) -> dict[str, str]:
        """JSON-safe: ``{"media_type", "data" (base64) or "url", "name" (when set)}``."""
        data: dict[str, str] = {"media_type": self.media_type}
        if self.data is not None:
            data["data"] = base64.b64encode(self.data).decode("ascii")
        else:
            assert self.url is not None
            data["url"] = self.url
        if self.name is not None:
            data["name"] = self.name
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Attachment:
        """Build an attachment from :meth:`to_dict`'s mapping (``data`` as base64 text)."""
        _check_mapping(data, "an attachment", _ATTACHMENT_KEYS, field="attachments")
        if "media_type" not in data:
            raise ValidationError("an attachment needs a media_type", field="attachments")
        encoded = data.get("data")
        raw: bytes | None = None
        if encoded is not None:
            if not isinstance(encoded, str):
                raise ValidationError(
                    f"attachment data must be base64 text here, got {type(encoded).__name__}",
                    field="attachments.data",
                )
            try:
                raw = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise ValidationError(
                    "attachment data is not valid base64 text", field="attachments.data"
                ) from None
        return cls(data["media_type"], data=raw, url=data.get("url"), name=data.get("name"))


@dataclass(frozen=True, slots=True)
class Reasoning:
    """A model's thinking, kept verbatim on the assistant message that followed it, so that it
    can be sent back where an API requires it (Anthropic's extended thinking, with its
    signature, on the turn after a tool call).

    Example::

        Reasoning("The user wants the total, so add first.", signature="EqQBCkgIARABGAIi...")
        Reasoning(redacted="EmwKAhgBEgy3va3pzix/LafPsn4a...")  # encrypted by the provider
    """

    text: str = ""
    """The thinking as the model wrote it (empty when only ``redacted`` is given)."""
    signature: str | None = field(default=None, kw_only=True)
    """The provider's signature over ``text``, which it checks when the thinking comes back."""
    redacted: str | None = field(default=None, kw_only=True)
    """Thinking the provider sent encrypted (an opaque payload, returned as it came)."""

    def __post_init__(self) -> None:
        _check_text(self.text, "reasoning text", field="reasoning.text")
        for name in ("signature", "redacted"):
            value = getattr(self, name)
            if value is not None:
                _check_text(value, f"reasoning {name}", field=f"reasoning.{name}")
        if not self.text and not self.redacted and not self.signature:
            raise ValidationError(
                "reasoning needs text, a signature or a redacted payload", field="reasoning.text"
            )

    def to_dict(self) -> dict[str, str]:
        """JSON-safe: ``{"text", "signature" and "redacted" when set}``."""
        data = {"text": self.text}
        if self.signature is not None:
            data["signature"] = self.signature
        if self.redacted is not None:
            data["redacted"] = self.redacted
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reasoning:
        """Build reasoning from :meth:`to_dict`'s mapping."""
        _check_mapping(data, "reasoning", _REASONING_KEYS, field="reasoning")
        return cls(
            data.get("text", ""), signature=data.get("signature"), redacted=data.get("redacted")
        )


def _check_mapping(data: object, what: str, allowed: frozenset[str], *, field: str) -> None:
    if not isinstance(data, Mapping):
        raise ValidationError(f"{what} must be a mapping, got {type(data).__name__}", field=field)
    unknown = set(data) - allowed
    if unknown:
        raise ValidationError(
            f"unknown key(s) in {what}: {_keys(unknown)}; allowed: {sorted(allowed)}", field=field
        )


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation, validated when it is made.

    Example::

        Message(role="user", content="Hi")
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="add", arguments="{}"),))
        Message(role="tool", content="3", tool_call_id="c1")
        Message("user", "What is in it?", attachments=(Attachment("image/png", data=png),))
    """

    role: Role
    """Who speaks: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``."""
    content: str = ""
    """The text; empty only on an assistant message that carries tool calls."""
    tool_calls: tuple[ToolCall, ...] = field(default=())
    """The tools an assistant message asks to call, in the order the model gave them."""
    tool_call_id: str | None = None
    """On a ``tool`` message: the id of the call it answers."""
    attachments: tuple[Attachment, ...] = field(default=(), kw_only=True)
    """Images, documents or audio sent with a user message or returned by a tool."""
    reasoning: tuple[Reasoning, ...] = field(default=(), kw_only=True)
    """On an assistant message: the thinking that preceded it, kept verbatim."""

    def __post_init__(self) -> None:
        if not isinstance(self.role, str) or self.role not in ROLES:
            raise ValidationError(
                f"role must be one of {sorted(ROLES)}, got {_shown(self.role)}", field="role"
            )
        _check_text(self.content, "content", field="content")
        calls = self.tool_calls
        if not isinstance(calls, tuple):
            if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Iterable):
                raise ValidationError(
                    f"tool_calls must be a sequence of tool calls, got {type(calls).__name__}",
                    field="tool_calls",
                )
            calls = tuple(calls)
        if any(not isinstance(call, ToolCall) for call in calls):
            calls = tuple(
                call if isinstance(call, ToolCall) else ToolCall.from_dict(call) for call in calls
            )
        if calls is not self.tool_calls:
            object.__setattr__(self, "tool_calls", calls)
        if calls and self.role != "assistant":
            raise ValidationError(
                f"tool_calls are only allowed on assistant messages, not on a {self.role} message",
                field="tool_calls",
            )
        attachments = _coerce_parts(self, "attachments", Attachment)
        if attachments and self.role not in ("user", "tool"):
            raise ValidationError(
                f"attachments are only allowed on user and tool messages, not on a {self.role} "
                "message",
                field="attachments",
            )
        if _coerce_parts(self, "reasoning", Reasoning) and self.role != "assistant":
            raise ValidationError(
                f"reasoning is only allowed on assistant messages, not on a {self.role} message",
                field="reasoning",
            )
        if not self.content and not calls and not attachments:
            rule = (
                "an assistant message needs content or tool_calls"
                if self.role == "assistant"
                else f"a {self.role} message needs non-empty content"
                + (" or attachments" if self.role in ("user", "tool") else "")
            )
            raise ValidationError(f"content is empty: {rule}", field="content")
        if self.role == "tool":
            if self.tool_call_id is None:
                raise ValidationError(
                    "a tool message needs tool_call_id: the id of the call it answers",
                    field="tool_call_id",
                )
            if not _check_text(self.tool_call_id, "tool_call_id", field="tool_call_id"):
                raise ValidationError("tool_call_id must not be empty", field="tool_call_id")
        elif self.tool_call_id is not None:
            raise ValidationError(
                f"tool_call_id is only allowed on tool messages, not on a {self.role} message",
                field="tool_call_id",
            )

    @classmethod
    def _text(cls, role: str, content: str) -> Message:
        """A system, user or assistant message with text only, from values the caller has
        checked (``role`` one of those three; ``content`` a non-empty ``str`` that encodes
        as UTF-8). Skips ``__post_init__``, which costs more than the rest of reading a
        stored message; stores use it on records they have just checked."""
        message = object.__new__(cls)
        _set_role(message, role)  # the slots' own setters: half the cost of object.__setattr__
        _set_content(message, content)
        _set_tool_calls(message, ())
        _set_tool_call_id(message, None)
        _set_attachments(message, ())
        _set_reasoning(message, ())
        return message

    def to_dict(self) -> dict[str, Any]:
        """The message as a JSON-safe dict; :meth:`from_dict` gives back an equal message.

        Keys with their default value (no tool calls, no ``tool_call_id``, no attachments, no
        reasoning) are left out; attachment bytes are base64 text.
        """
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.attachments:
            data["attachments"] = [part.to_dict() for part in self.attachments]
        if self.reasoning:
            data["reasoning"] = [part.to_dict() for part in self.reasoning]
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Message:
        """Build and validate a message from a mapping with the same keys as the fields."""
        if not isinstance(data, Mapping):
            raise ValidationError(
                f"a message must be a Message or a mapping, got {type(data).__name__}"
            )
        unknown = set(data) - _MESSAGE_KEYS
        if unknown:
            raise ValidationError(
                f"unknown message key(s) {_keys(unknown)}; allowed: {sorted(_MESSAGE_KEYS)}",
                field=min(key if isinstance(key, str) else _shown(key) for key in unknown),
            )
        if "role" not in data:
            raise ValidationError("a message needs a role", field="role")
        # JSON null counts as absent; any other value is validated (0 or "" is not a list).
        calls, attachments, reasoning = (
            data.get(key) for key in ("tool_calls", "attachments", "reasoning")
        )
        return cls(
            role=data["role"],
            content=data.get("content", ""),
            tool_calls=() if calls is None else calls,
            tool_call_id=data.get("tool_call_id"),
            attachments=() if attachments is None else attachments,
            reasoning=() if reasoning is None else reasoning,
        )


_set_role = Message.__dict__["role"].__set__
_set_content = Message.__dict__["content"].__set__
_set_tool_calls = Message.__dict__["tool_calls"].__set__
_set_tool_call_id = Message.__dict__["tool_call_id"].__set__
_set_attachments = Message.__dict__["attachments"].__set__
_set_reasoning = Message.__dict__["reasoning"].__set__


def _coerce_parts(message: Message, name: str, kind: type[Any]) -> tuple[Any, ...]:
    """``message.<name>`` as a tuple of ``kind`` (mappings converted with ``from_dict``)."""
    given = getattr(message, name)
    parts: Any = given
    if not isinstance(parts, tuple):
        if isinstance(parts, (str, bytes, Mapping)) or not isinstance(parts, Iterable):
            raise ValidationError(
                f"{name} must be a sequence of {kind.__name__} objects, got {type(parts).__name__}",
                field=name,
            )
        parts = tuple(parts)
    if any(not isinstance(part, kind) for part in parts):
        parts = tuple(part if isinstance(part, kind) else kind.from_dict(part) for part in parts)
    if parts is not given:
        object.__setattr__(message, name, parts)
    checked: tuple[Any, ...] = parts
    return checked


def _keys(keys: Iterable[object]) -> str:
    shown = sorted(_shown(key) for key in keys)
    return ", ".join(shown[:5]) + (f" (+{len(shown) - 5} more)" if len(shown) > 5 else "")


MessageLike: TypeAlias = "Message | Mapping[str, Any]"
"""What every store accepts: a :class:`Message`, or a mapping with the same keys."""


def to_message(message: MessageLike) -> Message:
    """Return ``message`` as a validated :class:`Message` (mappings are converted)."""
    if isinstance(message, Message):
        return message
    return Message.from_dict(message)


def to_messages(messages: Iterable[MessageLike]) -> list[Message]:
    """Validate a whole batch before anything is stored: the first bad message raises.

    Refuses, with :class:`~aniki.ValidationError`, a single message or anything else that is
    not an iterable of messages (a string or a mapping would otherwise be walked item by item).
    """
    if isinstance(messages, (str, bytes, Mapping, Message)) or not isinstance(messages, Iterable):
        raise ValidationError(
            f"add_messages() takes an iterable of messages, got {type(messages).__name__}; "
            "use add_message() for a single message"
        )
    return [to_message(message) for message in messages]
