"""Messages and tool calls: the unit of conversation history, and the rules each one keeps.

A :class:`Message` validates itself when it is made, so an invalid one cannot exist: the
rules (from the specification) are a valid role; string content; non-empty content unless
an assistant message carries tool calls; tool calls only on assistant messages; and a
``tool_call_id`` on every ``tool`` message. Breaking one raises :class:`~aniki.ValidationError`
naming the field and the rule.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, get_args

from .errors import ValidationError

__all__ = ["Message", "MessageLike", "Role", "ToolCall", "to_message", "to_messages"]

Role: TypeAlias = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset(get_args(Role))

_MESSAGE_KEYS = frozenset({"role", "content", "tool_calls", "tool_call_id"})
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


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation, validated when it is made.

    Example::

        Message(role="user", content="Hi")
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="add", arguments="{}"),))
        Message(role="tool", content="3", tool_call_id="c1")
    """

    role: Role
    """Who speaks: ``"system"``, ``"user"``, ``"assistant"`` or ``"tool"``."""
    content: str = ""
    """The text; empty only on an assistant message that carries tool calls."""
    tool_calls: tuple[ToolCall, ...] = field(default=())
    """The tools an assistant message asks to call, in the order the model gave them."""
    tool_call_id: str | None = None
    """On a ``tool`` message: the id of the call it answers."""

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
        if not self.content and not calls:
            rule = (
                "an assistant message needs content or tool_calls"
                if self.role == "assistant"
                else f"a {self.role} message needs non-empty content"
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
        return message

    def to_dict(self) -> dict[str, Any]:
        """The message as a JSON-safe dict; :meth:`from_dict` gives back an equal message.

        Keys with their default value (no tool calls, no ``tool_call_id``) are left out.
        """
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
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
        calls = data.get("tool_calls")
        return cls(
            role=data["role"],
            content=data.get("content", ""),
            tool_calls=() if calls is None else calls,
            tool_call_id=data.get("tool_call_id"),
        )


_set_role = Message.__dict__["role"].__set__
_set_content = Message.__dict__["content"].__set__
_set_tool_calls = Message.__dict__["tool_calls"].__set__
_set_tool_call_id = Message.__dict__["tool_call_id"].__set__


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
