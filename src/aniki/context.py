"""``Context``: per-run scratch space, unrelated to conversation history."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from datetime import datetime, timezone
from typing import Any

from ._stamps import new_run_id

__all__ = ["Context"]

CALL_ID: ContextVar[str | None] = ContextVar("aniki_tool_call_id", default=None)
"""The id of the tool call being run in this task (set by the run engine)."""


class Context:
    """Scratch space for one run: a run id, a start time and a small data bag.

    A fresh ``Context`` is made for every ``Runner.run`` / ``Runner.stream`` call. Use it for
    cross-cutting, single-run concerns (a trace id set by middleware, a database handle a tool
    needs); it never touches the conversation history, which lives in the session.

    Example::

        ctx = Context()
        ctx.set("trace_id", "abc")
        ctx.get("trace_id")  # "abc"
        ctx.has("missing")   # False
    """

    __slots__ = ("_data", "run_id", "started_at")

    def __init__(self, data: Mapping[str, Any] | None = None, *, run_id: str | None = None) -> None:
        self.run_id: str = run_id or new_run_id()
        """A unique id for this run."""
        self.started_at: datetime = datetime.now(timezone.utc)
        """When the run started (timezone-aware, UTC)."""
        self._data: dict[str, Any] = dict(data or {})

    @property
    def tool_call_id(self) -> str | None:
        """Inside a tool: the id of the call being run (``None`` elsewhere).

        With :attr:`run_id` it makes an idempotency key for the systems a tool calls: the
        same call, run again after a crash (``@tool(idempotent=True)``), sends the same key.
        """
        return CALL_ID.get()

    def get(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default``."""
        return self._data.get(key, default)

    def set(self, key: str, value: Any) -> None:
        """Store ``value`` under ``key`` for the rest of this run."""
        self._data[key] = value

    def has(self, key: str) -> bool:
        """Whether a value is stored under ``key``."""
        return key in self._data

    def __repr__(self) -> str:
        return f"Context(run_id={self.run_id!r}, keys={sorted(self._data)!r})"
