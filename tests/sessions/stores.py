"""Open sync and async server-backed sessions the same way, so each check is written once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aniki import Message
from aniki.testing._conformance_support import Driver


class Opener:
    """Opens sessions of one class (sync or async) and drives them with plain calls."""

    def __init__(self, cls: type, **options: Any) -> None:
        self.cls = cls
        self.options = options
        self.driver = Driver()
        self._opened: list[Any] = []

    @property
    def is_async(self) -> bool:
        return self.cls.__name__.startswith("Async")

    def open(self, session_id: str, **options: Any) -> Any:
        """A new instance for ``session_id`` (closed by :meth:`close`)."""
        session = self.cls(session_id, **{**self.options, **options})
        self._opened.append(session)
        return session

    def run(self, value: Any) -> Any:
        """``value``, awaited when it is awaitable."""
        return self.driver.run(value)

    def call(self, session: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        return self.run(getattr(session, method)(*args, **kwargs))

    def add(self, session: Any, *contents: str) -> None:
        for content in contents:
            self.driver.add_message(session, Message(role="user", content=content))

    def read(self, session: Any, limit: int | None = None) -> list[str]:
        return [m.content for m in self.driver.get_messages(session, limit)]

    def close(self) -> None:
        for session in self._opened:
            self.driver.release(session)
        self.driver.close()


def counting(monkeypatch: Any, module: Any, name: str) -> list[int]:
    """Count the calls of ``module.name`` (one element appended per call)."""
    calls: list[int] = []
    original: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)
    return calls
