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
    open_store,
)
from aniki.sessions.store import AsyncSessionStore, SessionStore
from aniki.testing.conformance import SessionConformance, SessionFactory


class TestInMemorySession(SessionConformance):
    assigns_ids = supports_fork_and_undo = supports_info = True
    shares_history_across_instances = False

    def session_factory(self) -> SessionFactory:
        return InMemorySession

    def store_factory(self) -> SessionStore:
        return open_store("memory:")


class TestSQLiteSession(SessionConformance):
    """The default durability, ``"normal"``."""

    assigns_ids = supports_fork_and_undo = supports_info = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db")

    def store_factory(self) -> SessionStore:
        return open_store(f"sqlite:///{self.tmp_path / 'store.db'}")


class TestSQLiteSessionDurabilityOff(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db", durability="off")


class TestSQLiteSessionDurabilityFull(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(SQLiteSession, path=self.tmp_path / "store.db", durability="full")


class TestFileSession(SessionConformance):
    assigns_ids = supports_fork_and_undo = supports_info = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(FileSession, directory=self.tmp_path / "sessions")

    def store_factory(self) -> SessionStore:
        return open_store((self.tmp_path / "sessions").as_uri())


class TestFileSessionDurabilityFull(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(
            FileSession, directory=self.tmp_path / "sessions", durability="full"
        )


# --- the async twins: the same suite, every call awaited ----------------------------------


class TestAsyncInMemorySession(SessionConformance):
    assigns_ids = supports_fork_and_undo = supports_info = True
    shares_history_across_instances = False

    def session_factory(self) -> SessionFactory:
        return AsyncInMemorySession

    def store_factory(self) -> AsyncSessionStore:
        return open_store("memory:", asynchronous=True)


class TestAsyncSQLiteSession(SessionConformance):
    assigns_ids = supports_fork_and_undo = supports_info = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(AsyncSQLiteSession, path=self.tmp_path / "store.db")

    def store_factory(self) -> AsyncSessionStore:
        return open_store(f"sqlite:///{self.tmp_path / 'store.db'}", asynchronous=True)


class TestAsyncSQLiteSessionDurabilityFull(SessionConformance):
    assigns_ids = supports_fork_and_undo = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(
            AsyncSQLiteSession, path=self.tmp_path / "store.db", durability="full"
        )


class TestAsyncFileSession(SessionConformance):
    assigns_ids = supports_fork_and_undo = supports_info = True

    def session_factory(self) -> SessionFactory:
        return functools.partial(AsyncFileSession, directory=self.tmp_path / "sessions")

    def store_factory(self) -> AsyncSessionStore:
        return open_store((self.tmp_path / "sessions").as_uri(), asynchronous=True)
