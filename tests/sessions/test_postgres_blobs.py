"""Attachments in a PostgreSQL store, against the real server: kept apart from their messages,
once per content, removed with the last message that names them, read back whole by every
read path (sync and async). Races with other writers: test_postgres_blobs_races.py."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Generator, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from aniki import CorruptStoreError, Message
from aniki._stamps import stamp
from aniki.messages import Attachment
from aniki.sessions import AsyncPostgresSession, PostgresSession, open_store
from aniki.sessions._codec import encode_message
from aniki.sessions._guard import HistoryMoved, TurnGuard, guarding
from aniki.sessions.postgres import _blobs as blobs_module
from aniki.sessions.postgres import _core as _postgres_core
from aniki.sessions.postgres import _drive
from aniki.sessions.postgres import session as _postgres_session
from aniki.sessions.postgres._flow import Query

from ..servers import postgres_dsn
from . import test_postgres
from .stores import Opener

pytestmark = pytest.mark.postgres

table = test_postgres.table  # the fixtures: a fresh table family, and a sync or async opener
store = test_postgres.store
admin = test_postgres.admin

IMAGE = os.urandom(200 * 1024)
OTHER = os.urandom(1000)


def photo(data: bytes = IMAGE, text: str = "look") -> Message:
    return Message("user", text, attachments=(Attachment("image/png", data=data, name="p.png"),))


def shown(messages: Any) -> list[str]:
    """Which bytes each message's attachments hold, by name (bytes make unreadable diffs)."""
    names = {IMAGE: "IMAGE", OTHER: "OTHER"}
    return [
        "+".join(names.get(part.data, "?") if part.data else "url" for part in m.attachments)
        for m in messages
    ]


def blob_rows(table: str) -> int:
    return int(admin(f'SELECT count(*) FROM "{table}_blobs"')[0][0])  # type: ignore[call-overload]


def link_rows(table: str) -> int:
    return int(admin(f'SELECT count(*) FROM "{table}_blob_refs"')[0][0])  # type: ignore[call-overload]


def sync(table: str, session_id: str = "s") -> PostgresSession:
    return PostgresSession(session_id, postgres_dsn(), table=table)


@pytest.fixture
def catalog(table: str) -> Iterator[Any]:
    with open_store(postgres_dsn(), table=table) as opened:
        yield opened


@pytest.fixture
def steps(monkeypatch: pytest.MonkeyPatch) -> list[Query]:
    """Every step of every flow a sync session runs from now on."""
    seen: list[Query] = []

    def recorded(conn: Any, flow: Any, *rest: Any) -> Any:
        return _drive.drive(conn, _watched(flow, seen), *rest)

    monkeypatch.setattr(_postgres_session, "drive", recorded)
    return seen


def _watched(flow: Generator[Query, Any, Any], seen: list[Query]) -> Generator[Query, Any, Any]:
    reply = None
    try:
        while True:
            step = flow.send(reply)
            seen.append(step)
            reply = yield step
    except StopIteration as done:
        return done.value


def test_every_read_path_gives_the_bytes_back(store: Opener, table: str) -> None:
    writer = store.open("s")
    store.driver.add_message(writer, photo())
    store.driver.add_messages(writer, [Message("assistant", "nice"), photo(OTHER, "and this")])
    sent = store.driver.get_messages(writer)
    assert sent[0].attachments[0].data == IMAGE and sent[2].attachments[0].data == OTHER
    assert blob_rows(table) == 2
    records = [text for (text,) in admin(f'SELECT message FROM "{table}"')]
    assert all(base64.b64encode(IMAGE[:30]).decode()[:20] not in text for text in records)
    assert all(len(text) < 1000 for text in records)  # the record names the blob: no bytes
    fresh = store.open("s")
    assert store.driver.get_messages(fresh, 1) == sent[-1:]  # the tail, nothing cached
    assert store.driver.get_messages(fresh) == sent
    store.driver.add_message(writer, photo(text="again"))  # read past what the reader holds
    again = store.driver.get_messages(fresh)
    assert again[-1].attachments[0] == Attachment("image/png", data=IMAGE, name="p.png")
    if not store.is_async:  # (a page is read by the sync class)
        page = store.open("s")._page(2, 2)
        assert list(page.messages) == again[2:4] and page.total == 4
    fused = store.run(store.open("s")._add_then_get([Message("assistant", "seen")], 3))
    assert shown(fused[:2]) == ["OTHER", "IMAGE"]
    whole = store.run(fresh._add_then_get([Message("user", "more")]))  # past its cache
    assert whole[:5] == (*again, fused[-1]) and len(whole) == 6
    assert blob_rows(table) == 2  # the same bytes twice: one blob


def test_the_same_image_ten_times_is_stored_once(table: str) -> None:
    session = sync(table)
    for turn in range(10):
        session.add_messages([photo(text=f"turn {turn}"), Message("assistant", "seen")])
    assert (blob_rows(table), link_rows(table)) == (1, 10)
    ((stored,),) = admin(f'SELECT sum(octet_length(data)) FROM "{table}_blobs"')
    ((records,),) = admin(f'SELECT sum(octet_length(message)) FROM "{table}"')
    assert stored == len(IMAGE) and records < 20 * 1024  # type: ignore[operator]
    assert [len(m.attachments) for m in sync(table).get_messages()] == [1, 0] * 10
    session.close()


def test_text_costs_nothing_more(table: str, steps: list[Query]) -> None:
    session = sync(table)
    session.add_message(Message("user", "warm up"))  # makes the tables
    steps.clear()
    session.add_message(Message("user", "plain"))
    session.add_messages([Message("assistant", "a"), Message("user", "b")])
    assert len(steps) == 2 and all(step.alone for step in steps)  # one statement each
    session.add_message(photo())
    session.add_messages([Message("user", "after")] * 3)
    steps.clear()
    assert len(sync(table).get_messages(limit=3)) == 3  # text only: no blob read
    assert len(steps) == 1
    steps.clear()
    assert sync(table).get_messages(limit=4)[0].attachments[0].data == IMAGE
    assert len(steps) == 2  # the rows, then the one blob they name
    session.close()


def test_a_blob_goes_with_the_last_message_naming_it(table: str, catalog: Any) -> None:
    first, second = catalog.session("first"), catalog.session("second")
    first.set_info(owner="ann")
    second.set_info(owner="bob")
    first.add_messages([photo(), Message("assistant", "a")])
    second.add_messages([photo(), Message("assistant", "b")])
    assert catalog.delete_sessions(owner="ann") == 1
    assert sync(table, "second").get_messages()[0].attachments[0].data == IMAGE
    assert blob_rows(table) == 1
    assert catalog.delete_sessions(owner="bob") == 1
    assert (blob_rows(table), link_rows(table)) == (0, 0)


@pytest.mark.parametrize("removal", ["undo", "clear", "replace", "prune", "delete"])
def test_each_removal_drops_the_blobs_only_it_named(table: str, catalog: Any, removal: str) -> None:
    kept = sync(table, "kept")
    kept.add_message(photo(OTHER))
    session = sync(table)
    session.add_messages([Message("user", "first"), Message("assistant", "ok")])
    both = (photo().attachments[0], photo(OTHER).attachments[0])
    session.add_messages([Message("user", "two", attachments=both), Message("assistant", "seen")])
    assert (blob_rows(table), link_rows(table)) == (2, 3)
    if removal == "undo":
        removed = session.undo()
        assert shown(removed) == ["IMAGE+OTHER", ""]  # what was undone, whole
    elif removal == "clear":
        session.clear()
    elif removal == "replace":
        session._replace([Message("user", "imported"), photo(OTHER, "shared with kept")])
    elif removal == "prune":
        long_ago = datetime(2020, 1, 1, tzinfo=timezone.utc)
        admin(f"UPDATE \"{table}_sessions\" SET updated_at = %s WHERE session_id = 's'", long_ago)
        assert catalog.prune(older_than=timedelta(days=1)) == 1
    else:
        session.set_info(owner="ann")
        assert catalog.delete_sessions(owner="ann") == 1
    assert blob_rows(table) == 1  # only OTHER, which "kept" still names
    assert link_rows(table) == (2 if removal == "replace" else 1)
    assert sync(table, "kept").get_messages()[0].attachments[0].data == OTHER
    kept.clear()
    session.clear()
    assert (blob_rows(table), link_rows(table)) == (0, 0)
    kept.close()
    session.close()


def test_a_fork_links_its_copies_so_the_blob_outlives_the_source(table: str) -> None:
    source = sync(table, "source")
    source.add_messages([photo(), Message("assistant", "a"), photo(OTHER, "two")])
    child = source.fork("child", upto=source.get_messages()[1].id)
    whole = source.fork("whole")
    assert link_rows(table) == 2 + 1 + 2
    source.clear()
    whole.clear()
    assert blob_rows(table) == 1  # OTHER went with the source; IMAGE stays for the child
    assert sync(table, "child").get_messages()[0].attachments[0].data == IMAGE
    child.clear()
    assert (blob_rows(table), link_rows(table)) == (0, 0)
    for session in (source, child, whole):
        session.close()


def test_a_fork_of_text_reads_no_link(table: str, steps: list[Query]) -> None:
    source = sync(table, "source")
    source.add_messages([Message("user", "hi"), Message("assistant", "hello")])
    source.fork("child").close()
    assert link_rows(table) == 0
    assert not any(b"SELECT hash, data" in step.statement for step in steps)  # no blob read
    assert [m.content for m in sync(table, "child").get_messages()] == ["hi", "hello"]
    source.close()


def test_appends_after_a_message_and_under_a_turn_guard_keep_their_blobs(
    store: Opener, table: str
) -> None:
    session = store.open("s")
    assert store.run(session._add_after([photo()], None)) is not None
    assert store.run(session._add_after([photo(OTHER, "wrong place")], "no-such-id")) is None
    last = store.driver.get_messages(session)[-1].id
    read = store.run(session._add_after([photo(text="read back")], last, read=True, limit=2))
    assert shown(read) == ["IMAGE", "IMAGE"]
    with guarding(TurnGuard()):
        store.driver.add_message(session, photo(OTHER, "guarded"))
        store.run(session._add_then_get([photo(OTHER, "guarded, read")], 1))
    stored = store.driver.get_messages(store.open("s"))
    assert shown(stored) == ["IMAGE", "IMAGE", "OTHER", "OTHER"]
    assert (blob_rows(table), link_rows(table)) == (2, 4)


def test_a_refused_guarded_append_leaves_no_blob(table: str) -> None:
    session = sync(table)
    with guarding(TurnGuard()):
        session.add_message(Message("user", "question"))
        sync(table).undo()  # another instance takes the turn back: the answer is refused
        with pytest.raises(HistoryMoved):
            session.add_message(photo(text="answer"))
    assert (blob_rows(table), link_rows(table)) == (0, 0)
    session.close()


def test_a_record_with_inline_bytes_from_an_older_store_still_reads(
    table: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    sync(table).add_message(Message("user", "makes the tables"))
    for suffix in ("_blobs", "_blob_refs"):  # the layout before attachments went apart
        admin(f'DROP TABLE "{table}{suffix}"')
    (old,) = stamp([photo(text="inline")])
    record = encode_message(old)
    assert base64.b64encode(IMAGE).decode()[:40] in record
    admin(f"INSERT INTO \"{table}\" (session_id, message) VALUES ('s', %s)", record)
    admin(f"UPDATE \"{table}_sessions\" SET message_count = 2 WHERE session_id = 's'")
    monkeypatch.setattr(_postgres_core, "_READY", set())  # as in a process started afterwards
    session = sync(table)
    assert session.get_messages()[1].attachments[0].data == IMAGE
    session.add_message(photo(text="new"))  # a new one goes apart, beside the old
    assert shown(sync(table).get_messages()) == ["", "IMAGE", "IMAGE"]
    assert session.undo()[0].attachments[0].data == IMAGE
    assert sync(table)._page(1, 1).messages[0].attachments[0].data == IMAGE
    session.add_message(photo(text="newer"))
    assert (blob_rows(table), link_rows(table)) == (1, 1)
    session.clear()
    assert blob_rows(table) == 0
    session.close()


def test_a_missing_blob_is_damage_that_names_the_store_and_not_the_bytes(table: str) -> None:
    secret = b"SECRET-BYTES-" * 10
    sync(table).add_message(photo(secret))
    admin(f'DELETE FROM "{table}_blobs"')
    for read in (
        lambda s: s.get_messages(),
        lambda s: s.get_messages(limit=1),
        lambda s: s._page(0, 1),
        lambda s: s.undo(),
    ):
        with pytest.raises(CorruptStoreError, match="missing from the store") as caught:
            read(sync(table))
        text = str(caught.value)
        assert table in caught.value.store and "SECRET" not in text
        assert base64.b64encode(secret[:12]).decode() not in text and secret.hex() not in text


@pytest.mark.parametrize("path", ["whole", "tail", "page", "fused"])
def test_a_blob_removed_between_the_two_reads_is_read_again_in_one_snapshot(
    table: str, monkeypatch: pytest.MonkeyPatch, steps: list[Query], path: str
) -> None:
    session = sync(table)
    session.add_messages([photo(), Message("assistant", "a")])
    fetch = blobs_module._fetch
    calls: list[int] = []

    def first_finds_nothing(q: Any, keys: list[str]) -> Generator[Query, Any, dict[str, bytes]]:
        calls.append(len(keys))
        found = yield from fetch(q, keys)
        return {} if len(calls) == 1 else found

    monkeypatch.setattr(blobs_module, "_fetch", first_finds_nothing)
    reader = sync(table)
    steps.clear()
    if path == "whole":
        read = reader.get_messages()
    elif path == "tail":
        read = reader.get_messages(limit=2)
    elif path == "page":
        read = reader._page(0, 2).messages
    else:
        read = reader._add_then_get([Message("user", "more")])[:2]
    assert read[0].attachments[0].data == IMAGE and len(read) == 2
    if path == "fused":  # the append is made: the history is read afresh
        assert calls == [1, 1]
    else:  # the rows and the blob again, in one statement
        assert calls == [1] and b"UNION ALL" in steps[-1].statement
    session.close()
    reader.close()


def test_an_attachment_by_url_stays_in_its_record(table: str) -> None:
    linked = Attachment("image/png", url="https://example.com/p.png")
    sync(table).add_message(Message("user", "see", attachments=(linked,)))
    assert sync(table).get_messages()[0].attachments == (linked,)
    assert (blob_rows(table), link_rows(table)) == (0, 0)
    ((record,),) = admin(f'SELECT message FROM "{table}"')
    assert json.loads(str(record))["attachments"][0]["url"] == "https://example.com/p.png"


async def test_the_async_twin_stores_and_reads_blobs(table: str) -> None:
    session = AsyncPostgresSession("s", postgres_dsn(), table=table)
    history = await session._add_then_get([photo(), Message("assistant", "ok")])
    assert history[0].attachments[0].data == IMAGE
    await session.add_messages([photo(OTHER, "more")])
    assert [len(m.attachments) for m in await session.get_messages(limit=2)] == [0, 1]
    reader = AsyncPostgresSession("s", postgres_dsn(), table=table)
    assert (await reader.get_messages())[0].attachments[0].data == IMAGE
    branch = await reader.fork("branch")
    assert len(await session.undo()) == 1
    assert (blob_rows(table), link_rows(table)) == (2, 1 + 2)
    await session.clear()
    assert (await branch.get_messages())[2].attachments[0].data == OTHER
    await branch.clear()
    assert (blob_rows(table), link_rows(table)) == (0, 0)
    for opened in (session, reader, branch):
        await opened.aclose()
