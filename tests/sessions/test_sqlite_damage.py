"""Damaged SQLite stores: every operation fails with CorruptStoreError, and nothing is written.

A real store (several sessions, meta) is written once; each seeded trial damages a copy
(bit flips anywhere or in the header, truncation, a page overwritten with random bytes or
zeros, random bytes after an intact header), then runs every operation on it: reads first
(``list_sessions``, ``get_messages``, a limited read on a fresh instance, ``get_meta``),
then every write. Whatever happens, only aniki errors come out, and damage never passes
for a full disk, a permission problem or a lock. When SQLite itself can see the damage
(``PRAGMA integrity_check`` of the copy fails), every operation raises
``CorruptStoreError`` naming the file; once any operation has reported damage, every write
is refused and the file's bytes stay as they were. Damage SQLite cannot see (a changed byte
inside a stored text) is counted: it either reads as ``CorruptStoreError`` or as altered
text, since neither SQLite nor aniki keeps a checksum of a plain record.
"""

from __future__ import annotations

import hashlib
import random
import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aniki import AnikiError, CorruptStoreError, Message, SchemaVersionError, ToolCall
from aniki.sessions import SQLiteSession, SQLiteStore

TRIALS = 320
SESSIONS = [f"session-{i}" for i in range(4)]
PAGE = 4096


def _history(number: int) -> list[Message]:
    messages: list[Message] = []
    for turn in range(12):
        messages.append(Message("user", f"question {turn} of {number}: " + "é✓" * (turn * 5)))
        if turn % 4 == 3:
            call = ToolCall(id=f"c{turn}", name="lookup", arguments='{"q": "x"}')
            messages.append(Message("assistant", tool_calls=(call,)))
            messages.append(Message("tool", "found " * 40, tool_call_id=f"c{turn}"))
        messages.append(Message("assistant", f"answer {turn} " + "z" * (turn * 37)))
    return messages


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The bytes of a whole store: its WAL checkpointed, so the file alone is the store."""
    path = tmp_path_factory.mktemp("pristine") / "chat.db"
    for number, session_id in enumerate(SESSIONS):
        with SQLiteSession(session_id, path) as session:
            session.add_messages(_history(number))
            session.set_meta("summary", {"text": f"summary {number}", "covers": [1, 2, 3]})
            session.set_meta("cut", number)
    SQLiteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path.read_bytes()


def _damage(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    damaged = bytearray(data)
    kind = rng.choice(["flip", "flip-header", "truncate", "random-page", "zero-page", "garbage"])
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
    elif kind == "flip-header":
        damaged[rng.randrange(16, 100)] ^= 1 << rng.randrange(8)
    elif kind == "truncate":
        cut = rng.randrange(1, len(damaged))
        if rng.random() < 0.5:
            cut -= cut % PAGE  # at a page boundary: what a lost tail of pages looks like
        damaged = damaged[: max(cut, 1)]
    elif kind in ("random-page", "zero-page"):
        page = rng.randrange(len(damaged) // PAGE)
        filler = rng.randbytes(PAGE) if kind == "random-page" else bytes(PAGE)
        damaged[page * PAGE : (page + 1) * PAGE] = filler
    else:  # a valid header, then noise
        damaged[100:] = rng.randbytes(len(damaged) - 100)
    return kind, bytes(damaged)


def _sqlite_sees_damage(path: Path, check: str = "integrity_check") -> bool:
    try:
        # immutable: the check itself must not create or change anything beside the copy
        with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
            return conn.execute(f"PRAGMA {check}").fetchall() != [("ok",)]
    except (sqlite3.Error, UnicodeDecodeError):  # a report naming damaged text is damage too
        return True


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


Operation = Callable[[Path, str], Any]

READS: dict[str, Operation] = {
    "list_sessions": lambda path, sid: SQLiteStore(path).list_sessions(),
    "get_messages": lambda path, sid: SQLiteSession(sid, path).get_messages(),
    "limited read": lambda path, sid: SQLiteSession(sid, path).get_messages(limit=3),
    "get_meta": lambda path, sid: SQLiteSession(sid, path).get_meta("summary"),
}
WRITES: dict[str, Operation] = {
    "add_message": lambda path, sid: SQLiteSession(sid, path).add_message(
        Message("user", "appended")
    ),
    "add_messages": lambda path, sid: SQLiteSession(sid, path).add_messages(
        [Message("user", "one"), Message("assistant", "two")]
    ),
    "new session": lambda path, sid: SQLiteSession("brand-new", path).add_message(
        Message("user", "hello")
    ),
    "set_meta": lambda path, sid: SQLiteSession(sid, path).set_meta("cut", 99),
    "swap_meta": lambda path, sid: SQLiteSession(sid, path)._swap_meta("cut", 0, 1),
    "clear": lambda path, sid: SQLiteSession(sid, path).clear(),
    "replace": lambda path, sid: SQLiteSession(sid, path)._replace([Message("user", "r")]),
}


def _run(operation: Operation, path: Path, session_id: str) -> str:
    """The outcome of one operation: "ok", or the aniki error's class name."""
    try:
        operation(path, session_id)
    except CorruptStoreError as error:
        assert str(path) in str(error), f"the error does not name the file: {error}"
        assert error.store == f"sqlite:///{path}"
        return "CorruptStoreError"
    except SchemaVersionError:
        return "SchemaVersionError"  # a flipped bit in user_version reads as a newer schema
    except AnikiError as error:  # anything else hides the damage behind the wrong advice
        raise AssertionError(f"damage reported as {type(error).__name__}: {error}") from error
    return "ok"


def test_every_damaged_copy_fails_cleanly_and_is_never_written(
    pristine: bytes, tmp_path: Path
) -> None:
    outcomes: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for trial in range(TRIALS):
        rng = random.Random(trial)
        kind, data = _damage(pristine, rng)
        path = tmp_path / f"trial-{trial}.db"
        path.write_bytes(data)
        visible = _sqlite_sees_damage(path)
        # What opening checks (quick_check): every read sees it. An index entry that no
        # longer matches its row (integrity_check only) is met by the writes, not every read.
        on_open = _sqlite_sees_damage(path, "quick_check")
        session_id = rng.choice(SESSIONS)
        before = _digest(path)
        reported = False
        try:
            for name, operation in READS.items():
                outcome = _run(operation, path, session_id)
                outcomes[f"{name}: {outcome}"] += 1
                if on_open:
                    assert outcome != "ok", f"trial {trial} ({kind}): {name} read a broken file"
                reported = reported or outcome != "ok"
            if not reported:  # the damage is not where the reads go: look at the rest too
                for other in SESSIONS:
                    outcome = _run(READS["get_messages"], path, other)
                    reported = reported or outcome != "ok"
            for name, operation in WRITES.items():
                outcome = _run(operation, path, session_id)
                outcomes[f"{name}: {outcome}"] += 1
                if reported or visible:
                    assert outcome != "ok", f"trial {trial} ({kind}): {name} wrote a damaged file"
        finally:
            SQLiteStore(path).close()
        if reported or visible:
            assert _digest(path) == before, f"trial {trial} ({kind}): the damaged file changed"
        files[f"{kind}: " + ("refused" if reported else "damage unseen")] += 1
        path.unlink()
        for side in ("-wal", "-shm"):
            Path(f"{path}{side}").unlink(missing_ok=True)
    print("\nfiles:", dict(sorted(files.items())))
    print("operations:", dict(sorted(outcomes.items())))
    refused = sum(count for key, count in files.items() if key.endswith("refused"))
    assert refused > TRIALS * 0.6  # the fuzz really damages stores


def test_a_schema_text_byte_that_is_not_utf8_is_damage(pristine: bytes, tmp_path: Path) -> None:
    """A byte of the stored CREATE statements made 0xFF: SQLite then quotes text that is not
    UTF-8 in its error, which the sqlite3 module cannot decode; still damage, named."""
    import re

    starts = [found.start() for found in re.finditer(rb"CREATE (TABLE|INDEX)", pristine)]
    assert starts
    positions = [start + offset for start in starts for offset in range(0, 60, 4)]
    outcomes: Counter[str] = Counter()
    for position in positions:
        path = tmp_path / f"schema-{position}.db"
        data = bytearray(pristine)
        data[position] = 0xFF
        path.write_bytes(bytes(data))
        try:
            for operation in [*READS.values(), *WRITES.values()]:
                outcomes[_run(operation, path, SESSIONS[0])] += 1
        finally:
            SQLiteStore(path).close()
        assert path.read_bytes() == bytes(data) or not _sqlite_sees_damage(path)
    assert outcomes["CorruptStoreError"] > 0, outcomes


def test_a_page_of_another_store_in_the_middle_is_refused(pristine: bytes, tmp_path: Path) -> None:
    # A whole valid-looking page from another file: structure fine, content not ours.
    path = tmp_path / "chat.db"
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x TEXT)")
        conn.executemany("INSERT INTO t VALUES (?)", [("y" * 300,)] * 40)
    data = bytearray(pristine)
    data[2 * PAGE : 3 * PAGE] = other.read_bytes()[PAGE : 2 * PAGE]
    path.write_bytes(bytes(data))
    before = _digest(path)
    for operation in [*READS.values(), *WRITES.values()]:
        assert _run(operation, path, SESSIONS[0]) in ("CorruptStoreError", "ok")
    SQLiteStore(path).close()
    assert _digest(path) == before or not _sqlite_sees_damage(path)


def test_the_text_encoding_flipped_to_utf16_is_damage(pristine: bytes, tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    data = bytearray(pristine)
    data[56:60] = (2).to_bytes(4, "big")  # UTF-16le: every stored text would read as noise
    path.write_bytes(bytes(data))
    for operation in [*READS.values(), *WRITES.values()]:
        assert _run(operation, path, SESSIONS[0]) == "CorruptStoreError"
    SQLiteStore(path).close()
    assert path.read_bytes() == bytes(data)


def test_a_record_found_damaged_stops_every_later_write_to_the_file(
    pristine: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "chat.db"
    path.write_bytes(pristine)
    conn = sqlite3.connect(path, isolation_level=None)
    try:  # a valid file whose one record is not a message
        conn.execute(
            "UPDATE aniki_messages SET body = '{\"role\": 5}' WHERE key = "
            "(SELECT min(key) FROM aniki_messages)"
        )
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    before = _digest(path)
    with pytest.raises(CorruptStoreError, match="cannot be read"):
        SQLiteSession(SESSIONS[0], path).get_messages()
    for name, operation in WRITES.items():
        for session_id in SESSIONS:  # other sessions' writes too: the file is damaged
            assert _run(operation, path, session_id) == "CorruptStoreError", name
    SQLiteStore(path).close()
    assert _digest(path) == before
    # Reads of what is intact still work, so the rest can be exported before repairing.
    assert SQLiteSession(SESSIONS[1], path).get_messages() == tuple(_history(1))


def test_a_damaged_file_moved_aside_lets_a_new_store_start_at_the_same_path(
    pristine: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "chat.db"
    path.write_bytes(pristine[:100] + bytes(len(pristine) - 100))
    with pytest.raises(CorruptStoreError, match=r"\.recover"):
        SQLiteSession("s", path).add_message(Message("user", "lost?"))
    SQLiteStore(path).close()
    path.rename(tmp_path / "chat.db.damaged")
    SQLiteSession("s", path).add_message(Message("user", "fresh"))
    assert SQLiteSession("s", path).get_messages() == (Message("user", "fresh"),)


def test_every_single_bit_flip_of_the_header_is_harmless_or_refused(
    pristine: bytes, tmp_path: Path
) -> None:
    # Exhaustive over the 84 header bytes SQLite reads after the magic: 672 files.
    outcomes: Counter[str] = Counter()
    expected = tuple(_history(0))
    for offset in range(16, 100):
        for bit in range(8):
            data = bytearray(pristine)
            data[offset] ^= 1 << bit
            path = tmp_path / f"flip-{offset}-{bit}.db"
            path.write_bytes(bytes(data))
            try:
                read = _run(READS["get_messages"], path, SESSIONS[0])
                if read == "ok":  # a harmless bit: the history reads back exactly
                    assert SQLiteSession(SESSIONS[0], path).get_messages() == expected
                write = _run(WRITES["add_message"], path, SESSIONS[0])
                if read != "ok":
                    assert write != "ok", f"byte {offset} bit {bit}: written after an error"
            finally:
                SQLiteStore(path).close()
            if read != "ok":
                assert path.read_bytes() == bytes(data), f"byte {offset} bit {bit}: changed"
            outcomes[f"{read}, then {write}"] += 1
            path.unlink()
    print("\nheader bit flips:", dict(outcomes))


def test_a_new_file_never_inherits_the_refusal_of_a_deleted_damaged_one(
    pristine: bytes, tmp_path: Path
) -> None:
    # File systems hand a freed inode to the next new file: the refusal must not follow it.
    for attempt in range(30):
        path = tmp_path / f"chat-{attempt}.db"
        path.write_bytes(pristine[:100] + bytes(len(pristine) - 100))
        with pytest.raises(CorruptStoreError):
            SQLiteSession("s", path).add_message(Message("user", "refused"))
        SQLiteStore(path).close()
        path.unlink()
        path.write_bytes(b"")  # a new, empty file at the same path
        SQLiteSession("s", path).add_message(Message("user", "fresh"))
        assert SQLiteSession("s", path).get_messages() == (Message("user", "fresh"),)
        SQLiteStore(path).close()
