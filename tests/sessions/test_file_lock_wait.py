"""FileSession's wait for another process's lock is bounded by ``timeout=``.

``flock`` waits without limit: a process stopped while it holds a session file's lock (a
debugger, SIGSTOP, a hung NFS client) would hold every other caller for ever. Here the lock is
held through a second open file description, which ``flock`` treats as another holder.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from aniki import Message, StoreError, StoreUnavailableError, UserError
from aniki.sessions import FileSession, FileStore, open_session
from aniki.sessions.url import list_sessions


def user(text: str) -> Message:
    return Message(role="user", content=text)


@contextmanager
def held(path: Path, *, exclusive: bool = True) -> Iterator[int]:
    """Hold ``path``'s lock as another process would, until the block ends."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield fd
    finally:
        os.close(fd)  # releases the lock


def test_every_call_gives_up_after_timeout_with_a_clear_error(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path, timeout=0.3)
    session.add_message(user("kept"))
    with held(session.path):
        for call in (
            lambda: session.add_message(user("lost")),
            lambda: FileSession("s", tmp_path, timeout=0.3).get_messages(),
            lambda: session.set_meta("k", 1),
            session.clear,
        ):
            started = time.monotonic()
            with pytest.raises(StoreUnavailableError, match=r"timeout= \(now 0.3 s\)") as info:
                call()
            waited = time.monotonic() - started
            assert 0.3 <= waited < 10, waited
            assert info.value.store == f"file://{session.path}"
    # Nothing the refused calls tried was done, and the session works again.
    assert [m.content for m in FileSession("s", tmp_path).get_messages()] == ["kept"]
    session.add_message(user("after"))
    assert [m.content for m in session.get_messages()] == ["kept", "after"]


def test_a_lock_released_during_the_wait_is_taken(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path, timeout=30)
    session.add_message(user("first"))
    fd = os.open(session.path, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    release = threading.Timer(0.2, os.close, args=(fd,))
    release.start()
    session.add_message(user("second"))  # waits for the holder, then writes
    release.join()
    assert [m.content for m in session.get_messages()] == ["first", "second"]


def test_readers_share_the_lock_with_readers(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path, timeout=0)
    session.add_message(user("hi"))
    with held(session.path, exclusive=False):
        assert [m.content for m in FileSession("s", tmp_path, timeout=0).get_messages()] == ["hi"]
        with pytest.raises(StoreUnavailableError, match="timeout="):
            session.add_message(user("a writer needs it alone"))


def test_a_listing_reports_a_locked_file_and_lists_the_rest(tmp_path: Path) -> None:
    FileSession("free", tmp_path).add_message(user("x"))
    locked = FileSession("locked", tmp_path)
    locked.add_message(user("y"))
    problems: list[StoreError] = []
    with held(locked.path):
        infos = FileStore(tmp_path, timeout=0.1).list_sessions(problems=problems)
        url_problems: list[StoreError] = []
        by_url = list_sessions(f"file:{tmp_path}?timeout=0.1", problems=url_problems)
    assert [info.id for info in infos] == ["free"] == [info.id for info in by_url]
    assert len(problems) == 1 and isinstance(problems[0], StoreUnavailableError)
    assert len(url_problems) == 1


def test_the_timeout_reaches_sessions_opened_by_url_and_by_store(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(user("x"))
    with held(session.path):
        for opened in (
            open_session(f"file:{tmp_path}?timeout=0.1", "s"),
            FileStore(tmp_path, timeout=0.1).session("s"),
        ):
            with pytest.raises(StoreUnavailableError, match=r"now 0.1 s"):
                opened.add_message(user("y"))


@pytest.mark.parametrize("timeout", [-1, float("nan"), float("inf"), "5", True, None])
def test_a_bad_timeout_is_refused_at_once(tmp_path: Path, timeout: object) -> None:
    with pytest.raises(UserError, match="timeout must be the seconds to wait"):
        FileSession("s", tmp_path, timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(UserError, match="timeout must be the seconds to wait"):
        FileStore(tmp_path, timeout=timeout)  # type: ignore[arg-type]
