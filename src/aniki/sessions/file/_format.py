"""The on-disk layout of :class:`~aniki.sessions.FileSession`, without I/O.

A session file ``<name>.jsonl`` is::

    {"aniki":"session","version":1,"id":"conversation-42","generation":0                   }
    {"role":"user","content":"Hi"}
    [{"role":"assistant","tool_calls":[...]},{"role":"tool","content":"3","tool_call_id":"c1"}]

* Line 1, the header, names the session (the file name alone may be a hash) and holds the
  format version and the *generation*, bumped by ``clear()`` and ``undo()``, so that every
  instance that cached the history reads it afresh. The generation is padded to a fixed
  width so the header can be rewritten in place without changing its length. A file that a
  fork or an import puts in place of another starts at a random generation
  (:func:`fresh_generation`).
* Beside it, ``<name>.meta.json`` keeps derived state, the session's info and a count of its
  messages (see :mod:`~aniki.sessions.file._record`); ``.index/`` in the directory indexes
  the sessions by owner and tag (see :mod:`~aniki.sessions.file._index`), and ``.blobs/``
  holds attachment bytes, once per content (see :mod:`~aniki.sessions.file._attachments`).
* Every later line is one committed write: a message object, or an array for a batch, so
  a batch is a single line and is either wholly there or not at all.
* A line counts only once its ``\\n`` is written: a torn last line (a crash mid-write) is
  not a record. JSON escapes every newline inside strings, so ``\\n`` only ends records.

The name is the id with every character outside ``[a-z0-9_-]`` written as ``%xx`` (its UTF-8
bytes, lowercase hex), so no name can hold a path separator, start with a dot, or differ from
another only by letter case; a long name is cut and completed with a hash (``~`` marks it).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from typing import Any

from ...errors import CorruptStoreError, SchemaVersionError
from ...messages import Message
from .._codec import SCHEMA_VERSION, encode_batch, encode_message

__all__ = [
    "DATA_SUFFIX",
    "HEADER_READ",
    "META_SUFFIX",
    "any_header",
    "file_stem",
    "fresh_generation",
    "header",
    "parse_header",
    "record_line",
]

DATA_SUFFIX = ".jsonl"
META_SUFFIX = ".meta.json"
HEADER_READ = 8192
"""Enough bytes to hold any header (ids have at most 1,024 characters)."""

_SAFE = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_-")
_MAX_STEM = 180
_GENERATION_WIDTH = 20


def file_stem(session_id: str) -> str:
    """The file name (without suffix) for ``session_id``: safe, and distinct for distinct ids."""
    stem = "".join(
        char if char in _SAFE else "".join(f"%{byte:02x}" for byte in char.encode("utf-8"))
        for char in session_id
    )
    if len(stem) > _MAX_STEM:
        digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:40]
        stem = f"{stem[:120]}~{digest}"
    return stem


def header(session_id: str, generation: int) -> bytes:
    """The header line (with its ``\\n``); its length does not depend on ``generation``."""
    ident = json.dumps(session_id, ensure_ascii=False)
    text = (
        f'{{"aniki":"session","version":{SCHEMA_VERSION},"id":{ident},'
        f'"generation":{generation:<{_GENERATION_WIDTH}d}}}\n'
    )
    return text.encode("utf-8")


def fresh_generation() -> int:
    """The generation of a file that a fork or an import writes whole: random (48 bits), so
    that no meta file written for an earlier file of that name (and left behind by a crash)
    can hold for it; a file created empty starts at 0 (at a random one when a meta file is
    there already, left by a prune that died half-way)."""
    return 1 + int.from_bytes(os.urandom(6), "big")


def record_line(messages: Sequence[Message]) -> bytes:
    """One record line (with its ``\\n``): a message, or several as a batch (an array)."""
    text = encode_message(messages[0]) if len(messages) == 1 else encode_batch(messages)
    return (text + "\n").encode("utf-8")


def parse_header(data: bytes, session_id: str | None, *, store: str) -> tuple[int, int] | None:
    """``(generation, header length)`` from the start of a file; ``None`` when it has none yet.

    A file with no complete first line holds no records: it is empty, or its creation was
    cut short (then ``data`` is a prefix of a fresh header). Anything else that is not a
    header for ``session_id`` (any id when ``None``) raises :class:`~aniki.CorruptStoreError`.
    """
    end = data.find(b"\n")
    if end < 0:
        if session_id is None or header(session_id, 0).startswith(data):
            return None
        raise CorruptStoreError("the file does not start with an aniki header", store=store)
    fields = _fields(data[:end], store)
    if session_id is not None and fields.get("id") != session_id:
        raise CorruptStoreError(
            f"the file belongs to session {fields.get('id')!r}, not {session_id!r}", store=store
        )
    return int(fields["generation"]), end + 1


def any_header(data: bytes, *, store: str) -> tuple[str, int, int] | None:
    """The id, generation and length of the header a file starts with, whichever session it
    names (``None`` when it is incomplete); refused as :func:`parse_header` refuses it."""
    end = data.find(b"\n")
    if end < 0:
        return None
    fields = _fields(data[:end], store)
    return str(fields["id"]), int(fields["generation"]), end + 1


def _fields(line: bytes, store: str) -> dict[str, Any]:
    try:
        fields = json.loads(line)
    except (ValueError, RecursionError):
        fields = None
    if (
        not isinstance(fields, dict)
        or fields.get("aniki") != "session"
        or not isinstance(fields.get("version"), int)
        or not isinstance(fields.get("generation"), int)
        or not isinstance(fields.get("id"), str)
    ):
        raise CorruptStoreError(
            "the file is not an aniki session file, or its header is damaged (its first line "
            "is not an aniki header); no write is made to it. Keep other files out of the "
            "session directory; a damaged session file: restore it from a backup or move it "
            "aside",
            store=store,
        )
    if fields["version"] > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"the file has format version {fields['version']}, newer than {SCHEMA_VERSION} "
            "which this aniki understands; upgrade aniki (pip install -U aniki-sdk)",
            store=store,
        )
    return fields
