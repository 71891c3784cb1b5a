"""The shared conformance suite over every store that needs no server."""

from __future__ import annotations

import functools

from aniki.sessions import (
    AsyncFileSession,
    AsyncInMemorySession,
    AsyncSQLiteSession,
    FileSession,
    InMemorySession,
    SQLiteSession,
)
from aniki.testing.conformance import SessionConformance, SessionFactory


class TestInMemorySession(SessionConformance):
    shares_history_across_instances = False

    def session_factory(self) -> SessionFactory:
        return InMemorySession


class TestSQLiteSession(SessionConformance):
    """The default durability, ``"normal"``."""

    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db")


class TestSQLiteSessionDurabilityOff(SessionConformance):
    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db", durability="off")


class TestSQLiteSessionDurabilityFull(SessionConformance):
    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db", durability="full")


class TestFileSession(SessionConformance):
    def session_factory(self) -> SessionFactory:
        return functools.partial(FileSession, directory=self.tmp_path / "sessions")


class TestFileSessionDurabilityFull(SessionConformance):
    def session_factory(self) -> SessionFactory:
        return functools.partial(
            FileSession, directory=self.tmp_path / "sessions", durability="full"
        )


# --- the async twins: the same suite, every call awaited ----------------------------------


class TestAsyncInMemorySession(SessionConformance):
    shares_history_across_instances = False

    def session_factory(self) -> SessionFactory:
        return AsyncInMemorySession


class TestAsyncSQLiteSession(SessionConformance):
    def session_factory(self) -> SessionFactory:
        return functools.partial(AsyncSQLiteSession, path=self.tmp_path / "store.db")


class TestAsyncSQLiteSessionDurabilityFull(SessionConformance):
    def session_factory(self) -> SessionFactory:
        return functools.partial(
            AsyncSQLiteSession, path=self.tmp_path / "store.db", durability="full"
        )


class TestAsyncFileSession(SessionConformance):
    def session_factory(self) -> SessionFactory:
        return functools.partial(AsyncFileSession, directory=self.tmp_path / "sessions")
