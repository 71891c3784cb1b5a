"""Hostile input through every store: exact round trips or clear refusals, ids contained.

For each store (in memory, SQLite, files, Redis and PostgreSQL, sync and async), hypothesis
appends random messages and malformed ones, one at a time and in batches. What was accepted
reads back exactly, from the same instance and from a fresh one; what was refused raised
``ValidationError`` and stored nothing; after the fuzz every acknowledged history still reads
back and an untouched session beside them is unchanged. Then hostile session ids (paths,
SQL, Redis glob and key syntax, NUL, lone surrogates, very long ones): each is refused with
``UserError`` exactly when it breaks the documented id rules, and otherwise stored under
that id alone: no file outside the store's directory, no key outside its prefix, no table
touched, no other session changed. Table names and key prefixes are validated too.
"""

from __future__ import annotations

import os
import re
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aniki import InMemorySession, Message, UserError, ValidationError
from aniki.messages import to_message
from aniki.sessions import FileSession, FileStore, SQLiteSession, SQLiteStore
from aniki.sessions._args import MAX_ID_LENGTH
from aniki.sessions.postgres._sql import check_table
from aniki.sessions.redis._core import RedisCore

from .hostile import HOSTILE_IDS, hostile_text, message_dicts, session_ids, valid_messages
from .stores import Store

FUZZ = settings(
    deadline=timedelta(seconds=10),
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,  # every example works on ids of its own
    ],
)
VICTIM = [Message("user", "kept \x00 exactly"), Message("assistant", "as it was")]


def write_victim(store: Store) -> Any:
    victim = store.opener.open("victim")  # closed with the opener
    store.opener.driver.add_messages(victim, VICTIM)
    return victim


def assert_victim_intact(store: Store, victim: Any) -> None:
    assert store.read(victim) == VICTIM
    if store.shared:
        assert store.read_fresh("victim") == VICTIM


steps = st.lists(
    st.one_of(
        st.tuples(st.just("add_message"), st.one_of(valid_messages, message_dicts)),
        st.tuples(
            st.just("add_messages"),
            st.lists(st.one_of(valid_messages, valid_messages, message_dicts), max_size=4),
        ),
    ),
    min_size=1,
    max_size=6,
)


def test_every_store_keeps_exactly_what_it_accepted(store: Store) -> None:
    driver = store.opener.driver
    victim = write_victim(store)
    acknowledged: dict[str, list[Message]] = {}

    @settings(FUZZ, max_examples=store.examples)
    @given(steps)
    def check(operations: list[tuple[str, Any]]) -> None:
        session_id = f"fuzz-{uuid.uuid4().hex}"
        model: list[Message] = []
        with store.session(session_id) as session:
            for name, value in operations:
                try:
                    getattr(driver, name)(session, value)
                except ValidationError as error:
                    assert str(error) and len(str(error)) < 1000
                    continue
                model += [to_message(value)] if name == "add_message" else map(to_message, value)
            assert store.read(session) == model
        if store.shared:
            assert store.read_fresh(session_id) == model
        acknowledged[session_id] = model

    check()
    assert acknowledged
    # Nothing the fuzz did damaged what was stored before or during it.
    assert_victim_intact(store, victim)
    if store.shared:
        for session_id, model in acknowledged.items():
            assert store.read_fresh(session_id) == model
    if store.list_ids is not None:
        stored = {sid for sid, model in acknowledged.items() if model}
        assert store.list_ids() == stored | {"victim"}
    store.contained()


def follows_the_id_rules(session_id: str) -> bool:
    """The documented id rules: non-empty text of at most 1,024 characters, no NUL, encodable."""
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return 0 < len(session_id) <= MAX_ID_LENGTH and "\x00" not in session_id


def test_hostile_session_ids_are_refused_clearly_or_contained(store: Store) -> None:
    driver = store.opener.driver
    victim = write_victim(store)
    stored: set[str] = set()

    def try_id(session_id: str) -> None:
        try:
            session = store.make(session_id)
        except UserError as error:
            # Every store, the in-memory one included, applies the same id rules.
            assert not follows_the_id_rules(session_id)
            assert "session id" in str(error) and len(str(error)) < 500
            return
        assert follows_the_id_rules(session_id)
        marker = Message("user", f"for {session_id[:50]!r}")
        try:
            driver.clear(session)
            driver.add_message(session, marker)
            assert store.read(session) == [marker]
        finally:
            driver.release(session)
        if store.shared:
            assert store.read_fresh(session_id) == [marker]
        stored.add(session_id)

    for session_id in HOSTILE_IDS:
        try_id(session_id)

    @settings(FUZZ, max_examples=store.examples * 2)
    @given(session_ids)
    def check(session_id: str) -> None:
        try_id(session_id)

    check()
    assert_victim_intact(store, victim)
    if store.list_ids is not None:
        assert store.list_ids() == stored | {"victim"}
    store.contained()
    # Clearing every hostile session (ids like "*" or "%" included) clears only itself.
    for session_id in stored:
        with store.session(session_id) as session:
            driver.clear(session)
    assert_victim_intact(store, victim)
    if store.list_ids is not None:
        assert store.list_ids() == {"victim"}


# --- names the stores build from configuration -------------------------------------------------

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@settings(FUZZ, max_examples=300)
@given(
    st.one_of(
        hostile_text,
        st.from_regex(
            r"[A-Za-z_][A-Za-z0-9_]{0,60}(\.[A-Za-z_][A-Za-z0-9_]{0,60})?", fullmatch=True
        ),
    )
)
def test_table_names_are_identifiers_or_refused(name: str) -> None:
    parts = name.split(".")
    valid = (
        1 <= len(parts) <= 2
        and all(IDENTIFIER.match(part) for part in parts)
        and len(parts[-1]) <= 48
        and len(parts[0]) <= 63
    )
    try:
        checked = check_table(name)
    except UserError as error:
        assert not valid
        assert "invalid table name" in str(error)
    else:
        assert valid and checked == name


@settings(FUZZ, max_examples=200)
@given(hostile_text, st.sampled_from(HOSTILE_IDS[:20]))
def test_key_prefixes_are_text_and_every_key_starts_with_the_prefix(
    prefix: str, session_id: str
) -> None:
    try:
        core = RedisCore(session_id, store="test", prefix=prefix, ttl=None)
    except UserError as error:
        assert "prefix" in str(error) or "session id" in str(error)
        return
    raw = prefix.encode("utf-8")
    assert len(set(core.keys)) == 4
    for key in core.keys:
        assert key.startswith(raw + b"{" + session_id.encode("utf-8") + b"}:")


STORE_PLACES = {
    "SQLiteSession": lambda place: SQLiteSession("s", place),
    "SQLiteStore": SQLiteStore,
    "FileSession": lambda place: FileSession("s", place),
    "FileStore": FileStore,
}


@pytest.mark.parametrize("make", list(STORE_PLACES.values()), ids=list(STORE_PLACES))
@pytest.mark.parametrize("place", ["chats\x00.db", "chats\ud800", 5, None], ids=repr)
def test_store_paths_the_os_cannot_name_are_refused(make: Any, place: Any) -> None:
    with pytest.raises(UserError, match=r"NUL|file name|path"):
        make(place)


def test_a_path_with_an_undecodable_byte_is_a_path_like_any_other(tmp_path: Path) -> None:
    # On POSIX a file name is bytes; Python shows a byte that is not UTF-8 as a surrogate.
    odd = "chats-\udc80"
    SQLiteSession("s", tmp_path / (odd + ".db")).add_message({"role": "user", "content": "a"})
    FileSession("s", tmp_path / odd).add_message({"role": "user", "content": "b"})
    assert [m.content for m in SQLiteSession("s", tmp_path / (odd + ".db")).get_messages()] == ["a"]
    assert [m.content for m in FileSession("s", tmp_path / odd).get_messages()] == ["b"]
    assert sorted(os.fsencode(p.name) for p in tmp_path.iterdir())[0].startswith(b"chats-\x80")


# --- every constructor parameter of the local stores is checked when the object is built ----

# 1e10 s overflows SQLite's 32-bit millisecond count into no wait at all: refused too.
BAD_TIMEOUTS = ["abc", -1, -0.5, float("nan"), float("inf"), -float("inf"), 1e10, True, None, [1]]


@pytest.mark.parametrize("make", [SQLiteSession, SQLiteStore], ids=["SQLiteSession", "Store"])
@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_a_bad_sqlite_timeout_is_refused_at_construction(
    make: Any, timeout: Any, tmp_path: Path
) -> None:
    args = ("s", tmp_path / "c.db") if make is SQLiteSession else (tmp_path / "c.db",)
    with pytest.raises(UserError, match=r"timeout must be the seconds to wait"):
        make(*args, timeout=timeout)
    assert not (tmp_path / "c.db").exists()


@pytest.mark.parametrize("timeout", [0, 0.0, 2, 7.5, 2_147_483])
def test_a_usable_sqlite_timeout_is_kept(timeout: float, tmp_path: Path) -> None:
    session = SQLiteSession("s", tmp_path / "c.db", timeout=timeout)
    session.add_message({"role": "user", "content": "hi"})
    assert [
        m.content
        for m in SQLiteStore(tmp_path / "c.db", timeout=timeout).session("s").get_messages()
    ] == ["hi"]


LOCAL_MAKERS = {
    "SQLiteSession": lambda place, **kw: SQLiteSession("s", place, **kw),
    "SQLiteStore": lambda place, **kw: SQLiteStore(place, **kw),
    "FileSession": lambda place, **kw: FileSession("s", place, **kw),
    "FileStore": lambda place, **kw: FileStore(place, **kw),
}


@pytest.mark.parametrize("make", list(LOCAL_MAKERS.values()), ids=list(LOCAL_MAKERS))
@pytest.mark.parametrize("durability", ["sometimes", "FULL", None, 1, True], ids=repr)
def test_a_bad_durability_is_refused_at_construction(
    make: Any, durability: Any, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match=r"durability must be one of \['off', 'normal', 'full'\]"):
        make(tmp_path / "place", durability=durability)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("make", [LOCAL_MAKERS["FileSession"], LOCAL_MAKERS["FileStore"]])
def test_a_directory_that_is_a_file_is_refused_at_construction(make: Any, tmp_path: Path) -> None:
    place = tmp_path / "chats"
    place.write_bytes(b"not a directory")
    with pytest.raises(UserError, match=r"is a file, not a directory"):
        make(place)
    with pytest.raises(UserError, match=r"is a file, not a directory"):
        make(place / "inner")  # its parent is the file: it can never become a directory
    assert place.read_bytes() == b"not a directory"


@pytest.mark.parametrize("make", [LOCAL_MAKERS["SQLiteSession"], LOCAL_MAKERS["SQLiteStore"]])
def test_a_database_path_that_is_a_directory_is_refused_at_construction(
    make: Any, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match=r"is a directory; pass the path of a database file"):
        make(tmp_path)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(UserError, match=r"is a file, not a directory"):
        make(tmp_path / "file" / "chat.db")


@pytest.mark.parametrize(
    "session_id", [5, b"s", "", "a\x00b", "x" * (MAX_ID_LENGTH + 1)], ids=lambda v: repr(v)[:12]
)
def test_an_in_memory_session_keeps_the_id_rules_of_every_store(session_id: Any) -> None:
    with pytest.raises(UserError, match="session id"):
        InMemorySession(session_id)
    assert InMemorySession("x" * MAX_ID_LENGTH).id == "x" * MAX_ID_LENGTH
    assert len(InMemorySession().id) == 32


@pytest.mark.parametrize("make", list(LOCAL_MAKERS.values()), ids=list(LOCAL_MAKERS))
def test_an_empty_path_is_refused_at_construction(make: Any) -> None:
    with pytest.raises(UserError, match="is empty"):
        make("")


@pytest.mark.parametrize("make", list(LOCAL_MAKERS.values()), ids=list(LOCAL_MAKERS))
def test_unknown_keyword_arguments_are_type_errors(make: Any, tmp_path: Path) -> None:
    with pytest.raises(TypeError):
        make(tmp_path / "x", durabilty="full")


# --- every store's timeout=: the same check, the same bound ---------------------------------

HUGE_TIMEOUTS = [10**400, -(10**400), 2_147_484, 1e10]


def _every_store_maker(tmp_path: Path) -> dict[str, Any]:
    from aniki.sessions import (
        AsyncPostgresSession,
        AsyncRedisSession,
        PostgresSession,
        RedisSession,
    )

    from ..servers import postgres_dsn, redis_url

    return {
        **{name: lambda make=make, **kw: make(tmp_path / "place", **kw)
           for name, make in LOCAL_MAKERS.items()},
        "RedisSession": lambda **kw: RedisSession("s", redis_url(), **kw),
        "AsyncRedisSession": lambda **kw: AsyncRedisSession("s", redis_url(), **kw),
        "PostgresSession": lambda **kw: PostgresSession("s", postgres_dsn(), **kw),
        "AsyncPostgresSession": lambda **kw: AsyncPostgresSession("s", postgres_dsn(), **kw),
    }  # fmt: skip


@pytest.mark.parametrize(
    "timeout", [t for t in BAD_TIMEOUTS if t is not None] + HUGE_TIMEOUTS, ids=repr
)  # None: the default
def test_every_store_refuses_a_timeout_it_cannot_keep(timeout: Any, tmp_path: Path) -> None:
    """Huge values overflowed underneath (a raw OverflowError; on PostgreSQL the shared
    timer thread died, leaving later calls without a bound): refused at construction, in
    words that fit on a line whatever the value."""
    for name, make in _every_store_maker(tmp_path).items():
        with pytest.raises(UserError, match=r"timeout must be the seconds to wait") as info:
            make(timeout=timeout)
        assert len(str(info.value)) < 400, (name, str(info.value)[:500])


def test_the_postgres_timer_outlives_a_deadline_beyond_any_clock() -> None:
    """The thread that ends PostgreSQL calls at their deadline keeps working after a
    deadline too far for the platform's wait, and restarts if it ever ended."""
    import threading
    import time

    from aniki.sessions.postgres import _drive as drive

    watchdog = drive._Watchdog()
    far = watchdog.arm(time.monotonic() + 1e12, lambda: None)
    time.sleep(0.3)  # the thread now waits for the far deadline
    fired = threading.Event()
    near = watchdog.arm(time.monotonic() + 0.05, fired.set)
    assert fired.wait(10), "the timer thread stopped"
    assert watchdog.disarm(near) is True
    assert watchdog.disarm(far) is False
