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
    assigns_ids = supports_fork_and_undo = True
    shares_history_across_instances = False

    def session_factory(self) -> SessionFactory:
        return InMemorySession


class TestSQLiteSession(SessionConformance):
    """The default durability, ``"normal"``."""

    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db")


class TestSQLiteSessionDurabilityOff(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db", durability="off")


class TestSQLiteSessionDurabilityFull(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db", durability="full")


class TestFileSession(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(FileSession, directory=self.tmp_path / "sessions")


class TestFileSessionDurabilityFull(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(
            FileSession, directory=self.tmp_path / "sessions", durability="full"
        )


# --- the async twins: the same suite, every call awaited ----------------------------------


class TestAsyncInMemorySession(SessionConformance):
    assigns_ids = supports_fork_and_undo = True
    shares_history_across_instances = False

    def session_factory(self) -> SessionFactory:
        return AsyncInMemorySession


class TestAsyncSQLiteSession(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(AsyncSQLiteSession, path=self.tmp_path / "store.db")


class TestAsyncSQLiteSessionDurabilityFull(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(
            AsyncSQLiteSession, path=self.tmp_path / "store.db", durability="full"
        )


class TestAsyncFileSession(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(AsyncFileSession, directory=self.tmp_path / "sessions")
