"""Damaged session files: reads fail with CorruptStoreError, and no write touches the files.

A session file (and its meta file) is written once; each seeded trial damages a copy (bit
flips, a run of random bytes, a line's bytes swapped for noise, a damaged header, a damaged
meta file), then runs every read and every write. Only aniki errors come out, damage is
never reported as an unavailable store, and once anything reported the damage, every write
is refused and the bytes of both files stay as they were. A file cut short is not damage
(a torn last line is what a crash leaves: it is ignored, then cut off by the next write).

``FileStore.list_sessions`` lists the readable sessions of a directory holding damaged or
foreign files, and reports each bad file once.
"""

from __future__ import annotations

import hashlib
import logging
import random
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from aniki import AnikiError, CorruptStoreError, Message, SchemaVersionError, StoreError, ToolCall
from aniki.sessions import FileSession, FileStore
from aniki.sessions.file._format import file_stem

TRIALS = 300
SESSION = "conversation"


def _history() -> list[list[Message]]:
    batches: list[list[Message]] = []
    for turn in range(10):
        batches.append([Message("user", f"question {turn} " + "é✓" * turn)])
        if turn % 3 == 2:
            call = ToolCall(id=f"c{turn}", name="lookup", arguments='{"q": "x"}')
            batches.append(
                [
                    Message("assistant", tool_calls=(call,)),
                    Message("tool", "found", tool_call_id=f"c{turn}"),
                ]
            )
        batches.append([Message("assistant", f"answer {turn} " + "z" * (turn * 11))])
    return batches


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding one session file and its meta file."""
    directory = tmp_path_factory.mktemp("pristine")
    session = FileSession(SESSION, directory)
    for batch in _history():
        session.add_messages(batch)
    session.set_meta("summary", {"text": "so far", "covers": 4})
    session.set_meta("cut", 2)
    session.close()
    return directory


def _damage(data: bytes, meta: bytes, rng: random.Random) -> tuple[str, bytes, bytes]:
    damaged = bytearray(data)
    kind = rng.choice(["flip", "noise", "line", "header", "meta"])
    body = len(damaged) - 1  # the last byte is the last newline: see the module docstring
    if kind == "flip":
        for _ in range(rng.randint(1, 6)):
            damaged[rng.randrange(body)] ^= 1 << rng.randrange(8)
    elif kind == "noise":
        start = rng.randrange(body)
        end = min(body, start + rng.randint(1, 64))
        damaged[start:end] = rng.randbytes(end - start)
    elif kind == "line":
        lines = bytes(damaged).split(b"\n")
        number = rng.randrange(1, len(lines) - 1)
        lines[number] = rng.randbytes(len(lines[number]))
        damaged = bytearray(b"\n".join(lines))
    elif kind == "header":
        damaged[rng.randrange(damaged.index(b"\n"))] ^= 1 << rng.randrange(8)
    else:
        spoiled = bytearray(meta)
        spoiled[rng.randrange(len(spoiled))] ^= 1 << rng.randrange(8)
        return kind, bytes(damaged), bytes(spoiled)
    return kind, bytes(damaged), meta


def _digest(directory: Path, *, meta_only: bool = False) -> str:
    digest = hashlib.sha256()
    for path in sorted(directory.rglob("*")):  # the index's markers too
        if path.is_dir() or (meta_only and not path.name.endswith(".meta.json")):
            continue
        digest.update(str(path.relative_to(directory)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


Operation = Callable[[Path], Any]

READS: dict[str, Operation] = {
    "list_sessions": lambda d: FileStore(d).list_sessions(problems=[]),
    "get_messages": lambda d: FileSession(SESSION, d).get_messages(),
    "limited read": lambda d: FileSession(SESSION, d).get_messages(limit=3),
    "get_meta": lambda d: FileSession(SESSION, d).get_meta("summary"),
}
WRITES: dict[str, Operation] = {
    "add_message": lambda d: FileSession(SESSION, d).add_message(Message("user", "new")),
    "add_messages": lambda d: FileSession(SESSION, d).add_messages(
        [Message("user", "one"), Message("assistant", "two")]
    ),
    "set_meta": lambda d: FileSession(SESSION, d).set_meta("cut", 5),
    "swap_meta": lambda d: FileSession(SESSION, d)._swap_meta("cut", 2, 3),
    "clear": lambda d: FileSession(SESSION, d).clear(),
}

META_WRITES = ("set_meta", "swap_meta", "clear")


def _run(operation: Operation, directory: Path) -> str:
    try:
        result = operation(directory)
    except CorruptStoreError as error:
        assert str(directory) in str(error), f"the error does not name the file: {error}"
        return "CorruptStoreError"
    except SchemaVersionError:
        return "SchemaVersionError"  # a flipped bit in the header's version reads as newer
    except AnikiError as error:
        raise AssertionError(f"damage reported as {type(error).__name__}: {error}") from error
    if isinstance(result, list) and not result:  # list_sessions left the file out
        return "left out"
    return "ok"


def test_every_damaged_copy_fails_cleanly_and_is_never_written(
    pristine: Path, tmp_path: Path
) -> None:
    data_path = FileSession(SESSION, pristine).path
    meta_path = data_path.with_name(file_stem(SESSION) + ".meta.json")
    data, meta = data_path.read_bytes(), meta_path.read_bytes()
    outcomes: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for trial in range(TRIALS):
        rng = random.Random(trial)
        kind, damaged, spoiled = _damage(data, meta, rng)
        directory = tmp_path / f"trial-{trial}"
        shutil.copytree(pristine, directory)
        (directory / data_path.name).write_bytes(damaged)
        (directory / meta_path.name).write_bytes(spoiled)
        before = _digest(directory, meta_only=kind == "meta")
        reported = False
        for name, operation in READS.items():
            outcome = _run(operation, directory)
            outcomes[f"{name}: {outcome}"] += 1
            reported = reported or outcome not in ("ok",)
        # A damaged meta file refuses what writes it; appends go to the intact session file.
        refusing = META_WRITES if kind == "meta" else WRITES
        for name, operation in WRITES.items():
            outcome = _run(operation, directory)
            outcomes[f"{name}: {outcome}"] += 1
            if reported and name in refusing:
                assert outcome != "ok", f"trial {trial} ({kind}): {name} wrote a damaged file"
        if reported:
            changed = _digest(directory, meta_only=kind == "meta") != before
            assert not changed, f"trial {trial} ({kind}): a damaged file changed"
        files[f"{kind}: " + ("refused" if reported else "damage unseen")] += 1
        shutil.rmtree(directory)
    print("\nfiles:", dict(sorted(files.items())))
    print("operations:", dict(sorted(outcomes.items())))
    refused = sum(count for key, count in files.items() if key.endswith("refused"))
    assert refused > TRIALS * 0.6


def test_a_damaged_line_stops_every_write_and_no_byte_changes(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    for text in ("a", "b", "c"):
        session.add_message(Message("user", text))
    session.set_meta("k", 1)
    lines = session.path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b'"b"', b'"b\xff')  # a record that no longer decodes
    session.path.write_bytes(b"\n".join(lines))
    before = _digest(tmp_path)
    fresh = FileSession("s", tmp_path)
    writes: list[Callable[[FileSession], Any]] = [
        lambda s: s.add_message(Message("user", "d")),
        lambda s: s.add_messages([Message("user", "d"), Message("user", "e")]),
        lambda s: s.set_meta("k", 2),
        lambda s: s.set_meta("k", None),
        lambda s: s._swap_meta("k", 1, 2),
        lambda s: s.clear(),
    ]
    for write in writes:
        for instance in (fresh, FileSession("s", tmp_path), session):
            with pytest.raises(CorruptStoreError, match=r"damaged.*move the file aside"):
                write(instance)
    assert _digest(tmp_path) == before
    # The line is named, so it can be repaired or the file moved aside.
    with pytest.raises(CorruptStoreError, match=r"line 3"):
        FileSession("s", tmp_path).get_messages()


def test_a_damaged_meta_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(Message("user", "a"))
    session.set_meta("k", 1)
    meta = tmp_path / (file_stem("s") + ".meta.json")
    meta.write_bytes(meta.read_bytes()[:-3])
    before = _digest(tmp_path)
    for write in (
        lambda: session.set_meta("k", 2),
        lambda: session._swap_meta("k", 1, 2),
        lambda: session.clear(),
    ):
        with pytest.raises(CorruptStoreError, match="meta file"):
            write()
    assert _digest(tmp_path) == before


def test_a_failed_read_never_leaves_a_partial_cache(tmp_path: Path) -> None:
    session = FileSession("s", tmp_path)
    session.add_message(Message("user", "a"))
    reader = FileSession("s", tmp_path)
    assert reader.get_messages() == (Message("user", "a"),)
    session.add_message(Message("user", "b"))
    session.add_message(Message("user", "c"))
    good = session.path.read_bytes()
    session.path.write_bytes(good[:-2] + b"\n")  # the last line loses its closing brace
    with pytest.raises(CorruptStoreError):
        reader.get_messages()
    session.path.write_bytes(good)  # repaired by hand
    assert reader.get_messages() == tuple(Message("user", t) for t in "abc")


# --- listing a directory that holds bad files ----------------------------------------------


def _directory_with_bad_files(root: Path) -> dict[str, str]:
    store = FileStore(root)
    store.session("good-1").add_messages([Message("user", "1"), Message("user", "2")])
    store.session("good-2").add_message(Message("user", "1"))
    damaged = store.session("damaged")
    damaged.add_message(Message("user", "x"))
    damaged.path.write_bytes(damaged.path.read_bytes() + b"{not json}\n")
    gapped = store.session("gapped")  # a blank line in the middle: a read refuses it
    gapped.add_messages([Message("user", "1"), Message("user", "2")])
    header, rest = gapped.path.read_bytes().split(b"\n", 1)
    gapped.path.write_bytes(header + b"\n\n" + rest)
    (root / "notes.jsonl").write_bytes(b'{"some": "other program"}\n')
    (root / "future.jsonl").write_bytes(
        b'{"aniki":"session","version":99,"id":"future","generation":0}\n{}\n'
    )
    copied = root / (file_stem("copy") + ".jsonl")  # a file copied under another name
    copied.write_bytes(store.session("good-2").path.read_bytes())
    (root / "folder.jsonl").mkdir()
    return {
        damaged.path.name: "CorruptStoreError",
        gapped.path.name: "CorruptStoreError",
        "notes.jsonl": "CorruptStoreError",
        "future.jsonl": "SchemaVersionError",
        copied.name: "CorruptStoreError",
        "folder.jsonl": "StoreUnavailableError",
    }


def test_list_sessions_lists_the_good_files_and_reports_each_bad_one(tmp_path: Path) -> None:
    bad = _directory_with_bad_files(tmp_path)
    problems: list[StoreError] = []
    infos = FileStore(tmp_path).list_sessions(problems=problems)
    assert {info.id: info.message_count for info in infos} == {"good-1": 2, "good-2": 1}
    found = {Path(str(error.store).removeprefix("file://")).name: error for error in problems}
    assert {name: type(error).__name__ for name, error in found.items()} == bad
    assert "belongs to session 'good-2'" in str(found[file_stem("copy") + ".jsonl"])


def test_list_sessions_without_a_problems_list_logs_each_bad_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    bad = _directory_with_bad_files(tmp_path)
    with caplog.at_level(logging.WARNING, logger="aniki"):
        infos = FileStore(tmp_path).list_sessions()
    assert sorted(info.id for info in infos) == ["good-1", "good-2"]
    logged = [record.getMessage() for record in caplog.records]
    assert len(logged) == len(bad)
    for name in bad:
        assert any(name in line for line in logged)


def test_a_new_file_never_inherits_the_refusal_of_a_deleted_damaged_one(tmp_path: Path) -> None:
    # File systems hand a freed inode to the next new file: the refusal must not follow it.
    for attempt in range(30):
        directory = tmp_path / f"round-{attempt}"
        session = FileSession("s", directory)
        session.add_message(Message("user", "a"))
        session.path.write_bytes(session.path.read_bytes() + b"{damaged}\n")
        with pytest.raises(CorruptStoreError):
            FileSession("s", directory).add_message(Message("user", "b"))
        session.close()
        shutil.rmtree(directory)
        fresh = FileSession("t", tmp_path / f"other-{attempt}")
        fresh.add_message(Message("user", "new file, new history"))
        assert fresh.get_messages() == (Message("user", "new file, new history"),)
        fresh.close()
