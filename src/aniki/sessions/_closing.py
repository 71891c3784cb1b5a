"""``with`` and ``async with`` for the stores: leaving the block closes the session.

A store that holds something open (a file, a connection, a worker's lane) says how to let it
go in ``close()`` (``aclose()`` for an async one); these bases add the block statements, so
that no store writes them again.
"""

from __future__ import annotations

from types import TracebackType

from typing_extensions import Self

__all__ = ["AsyncClosing", "Closing"]


class Closing:
    """A session usable as ``with session:``; leaving the block calls ``close()``."""

    def close(self) -> None:
        """Let go of what the session holds open; it reopens it on next use."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncClosing:
    """A session usable as ``async with session:``; leaving the block awaits ``aclose()``."""

    async def aclose(self) -> None:
        """Let go of what the session holds open; it reopens it on next use."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
