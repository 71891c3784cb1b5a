"""``ToolCall``: a model's request to call one tool, as an assistant message carries it
(re-exported by :mod:`aniki.messages`, where it belongs to the message rules)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ._checks import check_text, keys_shown
from .errors import ValidationError

__all__ = ["ToolCall"]

_TOOL_CALL_KEYS = frozenset({"id", "name", "arguments"})


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
            value = check_text(getattr(self, name), f"tool call {name}", field=f"tool_calls.{name}")
            if not value:
                raise ValidationError(
                    f"tool call {name} must not be empty", field=f"tool_calls.{name}"
                )
        check_text(self.arguments, "tool call arguments", field="tool_calls.arguments")

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
                f"unknown tool call key(s) {keys_shown(unknown)}; "
                f"allowed: {sorted(_TOOL_CALL_KEYS)}",
                field="tool_calls",
            )
        missing = {"id", "name"} - set(data)
        if missing:
            raise ValidationError(
                f"a tool call needs {sorted(missing)}", field=f"tool_calls.{min(missing)}"
            )
        return cls(id=data["id"], name=data["name"], arguments=data.get("arguments", "{}"))
