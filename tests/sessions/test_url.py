"""open_session / list_sessions by URL, and the aniki.sessions namespace."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import aniki
import aniki.sessions
from aniki import Message, UserError
from aniki.sessions import (
    FileSession,
    InMemorySession,
    SQLiteSession,
    list_sessions,
    open_session,
)


def test_memory_url_gives_an_in_memory_session() -> None:
    for url in ("memory:", "memory://", "MEMORY:"):
        session = open_session(url, "s1")
        assert isinstance(session, InMemorySession)
        assert session.id == "s1"


def test_sqlite_urls_with_three_slashes_are_relative_and_four_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cwd = Path.cwd()
    for url, expected in [
        ("sqlite:///chat.db", cwd / "chat.db"),
        ("sqlite:///./sub/../chat.db", cwd / "chat.db"),
        ("sqlite:///data/x%20y.db", cwd / "data" / "x y.db"),
        ("sqlite:////var/lib/aniki/chat.db", Path("/var/lib/aniki/chat.db")),
    ]:
        session = open_session(url, "s")
        assert isinstance(session, SQLiteSession)
        assert session.path == expected, url


def test_sqlite_url_options(tmp_path: Path) -> None:
    session = open_session(f"sqlite:///{tmp_path}/c.db?durability=full&timeout=2.5", "s")
    assert isinstance(session, SQLiteSession)
    assert session.durability == "full"
    session.add_message({"role": "user", "content": "hi"})
    assert SQLiteSession("s", tmp_path / "c.db").get_messages() == (
        Message(role="user", content="hi"),
    )


def test_file_urls_follow_the_file_url_standard(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    absolute = open_session(f"file://{tmp_path}/chats", "s")
    assert isinstance(absolute, FileSession)
    assert absolute.path.parent == tmp_path / "chats"
    localhost = open_session(f"file://localhost{tmp_path}/chats?durability=full", "s")
    assert localhost.path == absolute.path  # type: ignore[attr-defined]
    relative = open_session("file:chats", "s")
    assert relative.path == absolute.path  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("url", "match"),
    [
        ("mysql://localhost/db", "unknown session URL scheme 'mysql'.*sqlite:///.*redis://"),
        ("https://user:secret@example.invalid/x", "user:\\*\\*\\*@"),
        ("no scheme at all", "must be a string like"),
        ("sqlite://chat.db", "sqlite:///relative"),
        ("sqlite:///", "sqlite:///relative"),
        ("sqlite:///c.db?durability=sometimes", "durability"),
        ("sqlite:///c.db?colour=blue", "unknown option"),
        ("sqlite:///c.db?timeout=soon", "timeout"),
        ("file://otherhost/dir", "remote hosts"),
        ("file:", "names no directory"),
        ("file:///d?timeout=soon", "timeout must be a number"),
        ("memory:whatever", "just 'memory:'"),
    ],
)
def test_bad_urls_are_user_errors_that_say_what_is_allowed(url: str, match: str) -> None:
    with pytest.raises(UserError, match=match) as info:
        open_session(url, "s")
    assert "secret" not in str(info.value)


def test_a_non_string_url_is_a_user_error() -> None:
    with pytest.raises(UserError):
        open_session(None, "s")  # type: ignore[arg-type]


def test_local_stores_open_their_async_twins_with_the_url_options(tmp_path: Path) -> None:
    from aniki.sessions import AsyncFileSession, AsyncInMemorySession, AsyncSQLiteSession

    lite = open_session(f"sqlite:///{tmp_path}/c.db?durability=full", "s", asynchronous=True)
    assert type(lite) is AsyncSQLiteSession
    assert (lite.id, lite.path, lite.durability) == ("s", tmp_path / "c.db", "full")
    files = open_session(f"file://{tmp_path}/d?timeout=0.5", "s", asynchronous=True)
    assert type(files) is AsyncFileSession
    assert files.path.parent == tmp_path / "d"
    assert type(open_session("memory:", "s", asynchronous=True)) is AsyncInMemorySession
    with pytest.raises(UserError, match="durability"):
        open_session(f"sqlite:///{tmp_path}/c.db?durability=most", "s", asynchronous=True)


def test_remote_urls_pick_the_remote_classes_without_connecting() -> None:
    pytest.importorskip("redis")
    pytest.importorskip("psycopg")
    from aniki.sessions.postgres import AsyncPostgresSession, PostgresSession
    from aniki.sessions.redis import AsyncRedisSession, RedisSession

    cases = [
        ("redis://127.0.0.1:1/0", False, RedisSession),
        ("rediss://127.0.0.1:1/0", False, RedisSession),
        ("redis://127.0.0.1:1/0", True, AsyncRedisSession),
        ("postgresql://nobody@127.0.0.1:1/none", False, PostgresSession),
        ("postgres://nobody@127.0.0.1:1/none", True, AsyncPostgresSession),
    ]
    for url, asynchronous, cls in cases:
        session = open_session(url, "s", asynchronous=asynchronous)  # type: ignore[call-overload]
        assert type(session) is cls
        assert session.id == "s"


def test_list_sessions_by_url(tmp_path: Path) -> None:
    open_session(f"sqlite:///{tmp_path}/c.db", "a").add_message({"role": "user", "content": "1"})
    open_session(f"file://{tmp_path}/d", "b").add_message({"role": "user", "content": "1"})
    assert [i.id for i in list_sessions(f"sqlite:///{tmp_path}/c.db")] == ["a"]
    assert [i.id for i in list_sessions(f"file://{tmp_path}/d")] == ["b"]
    assert list_sessions(f"sqlite:///{tmp_path}/missing.db") == []
    assert not (tmp_path / "missing.db").exists()
    with pytest.raises(UserError, match="cannot be listed"):
        list_sessions("memory:")


# --- the namespace -------------------------------------------------------------------------


def test_all_is_sorted_and_every_name_resolves() -> None:
    names = aniki.sessions.__all__
    assert list(names) == sorted(names)
    for name in names:
        assert getattr(aniki.sessions, name) is not None, name
    assert set(names) <= set(dir(aniki.sessions))


def test_unknown_attributes_raise_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchSession"):
        aniki.sessions.NoSuchSession  # noqa: B018


def test_importing_aniki_does_not_import_optional_drivers() -> None:
    code = (
        "import sys, aniki, aniki.sessions, aniki.sessions.url\n"
        "aniki.sessions.open_session('memory:', 'x')\n"
        "loaded = [m for m in ('redis', 'psycopg', 'psycopg_pool') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_listing_a_file_url_reports_the_files_it_skipped(tmp_path: Path) -> None:
    FileSession("good", tmp_path).add_message(Message(role="user", content="hi"))
    (tmp_path / "bad.jsonl").write_bytes(b"\xff\xfe not a session\n")
    problems: list[aniki.StoreError] = []
    infos = list_sessions(f"file:{tmp_path}", problems=problems)
    assert [info.id for info in infos] == ["good"]
    assert len(problems) == 1 and isinstance(problems[0], aniki.CorruptStoreError)
    assert "bad.jsonl" in str(problems[0].store)
    # A store of one database has nothing to skip: the list stays empty.
    SQLiteSession("one", tmp_path / "chat.db").add_message(Message(role="user", content="x"))
    sqlite_problems: list[aniki.StoreError] = []
    listed = list_sessions(f"sqlite:///{tmp_path}/chat.db", problems=sqlite_problems)
    assert [info.id for info in listed] == ["one"] and sqlite_problems == []


def test_altered_data_error_is_exported_beside_decryption_error() -> None:
    assert issubclass(aniki.sessions.AlteredDataError, aniki.sessions.DecryptionError)
    assert "AlteredDataError" in aniki.sessions.__all__
