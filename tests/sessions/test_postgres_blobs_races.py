"""Attachments on PostgreSQL while other writers race (against the real server): a removal and
an append that name the same blob, in either order, leave it stored for the messages that
still name it, and readers racing removals never see a message without its bytes."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from aniki import Message
from aniki._stamps import stamp
from aniki.messages import Attachment
from aniki.sessions.postgres import PostgresSession
from aniki.sessions.postgres._core import PostgresCore
from aniki.sessions.postgres._drive import drive

from ..servers import postgres_dsn
from . import test_postgres

pytestmark = pytest.mark.postgres

table = test_postgres.table  # the fixture: a fresh table family
admin = test_postgres.admin

IMAGE = os.urandom(64 * 1024)


def photo(text: str = "look") -> Message:
    return Message("user", text, attachments=(Attachment("image/png", data=IMAGE),))


def sync(table: str, session_id: str) -> PostgresSession:
    return PostgresSession(session_id, postgres_dsn(), table=table)


def blob_rows(table: str) -> int:
    return int(admin(f'SELECT count(*) FROM "{table}_blobs"')[0][0])  # type: ignore[call-overload]


@pytest.fixture
def other() -> Iterator[psycopg.Connection[Any]]:
    """A connection whose writes stay in an open transaction until the test ends it."""
    conn = psycopg.connect(postgres_dsn())
    conn.execute("SELECT 1")  # opens the transaction: the flows' own ones nest in it
    yield conn
    conn.close()


def _core(table: str, session_id: str) -> PostgresCore:
    return PostgresCore(session_id, table=table, store="test", conninfo=postgres_dsn())


def _waits_then(table: str, call: Callable[[], object], end: Callable[[], None]) -> None:
    """Run ``call`` in a thread until it waits for a lock, then ``end`` the other writer."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 10
    while not admin(
        "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s",
        f"%{table}%",
    ):
        assert time.monotonic() < deadline, "the second writer never waited for the first"
        time.sleep(0.01)
    end()
    thread.join(10)
    assert errors == []


@pytest.mark.parametrize("ends", ["commit", "rollback"])
def test_a_removal_waits_for_an_append_that_names_its_blob(
    table: str, other: psycopg.Connection[Any], ends: str
) -> None:
    sync(table, "a").add_message(photo("a's"))
    drive(other, _core(table, "b").append(stamp([photo("b's")])))  # holds the blob's lock
    _waits_then(table, sync(table, "a").clear, getattr(other, ends))
    if ends == "commit":  # the removal saw the link committed: the blob stays for b
        assert sync(table, "b").get_messages()[0].attachments[0].data == IMAGE
        assert blob_rows(table) == 1
    else:  # nothing names it now
        assert sync(table, "b").get_messages() == ()
        assert blob_rows(table) == 0


@pytest.mark.parametrize("ends", ["commit", "rollback"])
def test_an_append_waits_for_a_removal_of_its_blob_and_stores_it_anew(
    table: str, other: psycopg.Connection[Any], ends: str
) -> None:
    sync(table, "a").add_message(photo("a's"))
    drive(other, _core(table, "a").clear())  # deletes the blob, not yet committed
    _waits_then(table, lambda: sync(table, "b").add_message(photo("b's")), getattr(other, ends))
    assert sync(table, "b").get_messages()[0].attachments[0].data == IMAGE
    assert blob_rows(table) == 1
    assert len(sync(table, "a").get_messages()) == (0 if ends == "commit" else 1)


def test_readers_racing_removals_see_every_message_whole(table: str) -> None:
    dsn, rounds = postgres_dsn(), 40
    errors: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        with PostgresSession("churn", dsn, table=table) as session:
            try:
                for n in range(rounds):
                    session.add_messages([photo(f"{n}"), Message("assistant", "seen")])
                    if n % 2:
                        session.undo()
                    if n % 5 == 4:
                        session.clear()
            except BaseException as exc:
                errors.append(exc)
            finally:
                stop.set()

    def read() -> None:
        with PostgresSession("churn", dsn, table=table) as session:
            try:
                while not stop.is_set():
                    for message in session.get_messages(limit=3):
                        assert not message.attachments or message.attachments[0].data == IMAGE
                    fresh = PostgresSession("churn", dsn, table=table)
                    for message in fresh.get_messages():
                        assert not message.attachments or message.attachments[0].data == IMAGE
                    fresh.close()
            except BaseException as exc:
                errors.append(exc)

    with PostgresSession("kept", dsn, table=table) as kept:
        kept.add_message(Message("user", "no image"))
        threads = [threading.Thread(target=write), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert errors == []
    left = sync(table, "churn").get_messages()
    assert blob_rows(table) == (1 if any(m.attachments for m in left) else 0)
