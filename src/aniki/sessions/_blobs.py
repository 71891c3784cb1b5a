"""Attachments stored apart from the records that name them, once per content. No I/O.

A message with inline attachment bytes is stored as a record whose attachments carry a
reference instead of the bytes: ``{"media_type", "blob": <sha256 hex of the bytes>, "size",
"name"?}``, and the bytes go, keyed by that hash, to the store's blob table (a table, a
folder, keys): so the same image sent ten times is stored once, and a read that does not send
the history (a listing, a page of the inspector) never loads the bytes.

- :func:`split` / :func:`split_batch`: the records to write and the blobs they need.
- :func:`refs`: the hashes a stored record names (fast: a record without any names none).
- :func:`join` / :func:`join_all`: the messages back, their bytes put in from the blobs read.

A record written before blobs existed (bytes inline, as base64) still reads as it is:
:func:`join` hands it to the codec unchanged. Stores count references per hash so that a
blob goes with the last record that names it (undo, clear, prune, delete).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import CorruptStoreError
from ..messages import Message
from ..parts import Attachment
from ._codec import decode_message, encode_message

__all__ = [
    "MARK",
    "digest",
    "join",
    "join_all",
    "named",
    "refs",
    "shown_key",
    "split",
    "split_batch",
    "wanted",
]

MARK = '"blob":"'
"""Text that every record naming a blob holds, and that JSON escaping keeps out of any
other record (a key ``"blob"`` appears only in an attachment reference)."""

_HASH = re.compile(r'"blob":"([0-9a-f]{64})"')
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def digest(data: bytes) -> str:
    """The key of ``data`` in a blob table: its SHA-256, as 64 hex digits."""
    return hashlib.sha256(data).hexdigest()


def split(message: Message) -> tuple[str, dict[str, bytes]]:
    """The record to store for ``message`` (its attachment bytes replaced by references) and
    the blobs it names, by hash. A message without inline bytes: the codec's record, ``{}``."""
    if not any(part.data is not None for part in message.attachments):
        return encode_message(message), {}
    data = message.to_dict()
    blobs: dict[str, bytes] = {}
    references = []
    for part in message.attachments:
        if part.data is None:
            references.append(part.to_dict())
            continue
        key = digest(part.data)
        blobs[key] = part.data
        reference: dict[str, Any] = {"media_type": part.media_type, "blob": key}
        reference["size"] = len(part.data)
        if part.name is not None:
            reference["name"] = part.name
        references.append(reference)
    data["attachments"] = references
    return _ENCODER.encode(data), blobs


def split_batch(messages: Iterable[Message]) -> tuple[list[str], dict[str, bytes]]:
    """:func:`split` of each message: the records in order, and every blob they name."""
    records: list[str] = []
    blobs: dict[str, bytes] = {}
    for message in messages:
        record, found = split(message)
        records.append(record)
        blobs.update(found)
    return records, blobs


def refs(record: str | bytes) -> tuple[str, ...]:
    """The blob hashes ``record`` names, in order, each once (``()`` for most records)."""
    text = record if isinstance(record, str) else record.decode("utf-8", "replace")
    if MARK not in text:
        return ()
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return ()  # a damaged record: reading it says so, with the store's name
    found: dict[str, None] = {}
    for part in _parts(data):
        key = part.get("blob")
        if isinstance(key, str):
            found[key] = None
    return tuple(found)


def _parts(data: Any) -> list[dict[str, Any]]:
    parts = data.get("attachments") if isinstance(data, dict) else None
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def join(record: str | bytes, blobs: Mapping[str, bytes], *, store: str) -> Message:
    """The message stored as ``record``, each referenced attachment's bytes taken from
    ``blobs``; :class:`~aniki.CorruptStoreError` when a blob is missing or not the size the
    record says."""
    text = record if isinstance(record, str) else record.decode("utf-8", "replace")
    if MARK not in text:
        return decode_message(record, store=store)
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return decode_message(record, store=store)  # the codec says what is wrong
    parts = data.get("attachments") if isinstance(data, dict) else None
    if isinstance(parts, list):
        data["attachments"] = [_resolve(part, blobs, store) for part in parts]
    try:
        return Message.from_dict(data)
    except (ValueError, TypeError) as exc:
        raise CorruptStoreError(
            f"a stored message is damaged ({exc}); it cannot be read", store=store
        ) from exc


def _resolve(part: Any, blobs: Mapping[str, bytes], store: str) -> Any:
    if not isinstance(part, dict) or "blob" not in part:
        return part
    key, size = part.get("blob"), part.get("size")
    data = blobs.get(key) if isinstance(key, str) else None
    if data is None:
        raise CorruptStoreError(
            f"the attachment {shown_key(key)} of a stored message is missing from the store; "
            "restore the store from a backup",
            store=store,
        )
    if size != len(data):
        raise CorruptStoreError(
            f"the attachment {shown_key(key)} holds {len(data)} bytes, not the {size} its "
            "message names; restore the store from a backup",
            store=store,
        )
    media_type: Any = part.get("media_type")
    try:
        return Attachment(media_type, data=data, name=part.get("name"))
    except (ValueError, TypeError) as exc:
        raise CorruptStoreError(
            f"the attachment {shown_key(key)} of a stored message is damaged ({exc})",
            store=store,
        ) from exc


def shown_key(key: object) -> str:
    """A blob hash as an error shows it (the first 12 digits)."""
    return f"sha256:{key[:12]}" if isinstance(key, str) else repr(key)[:40]


def join_all(
    records: Sequence[str | bytes], blobs: Mapping[str, bytes], *, store: str
) -> list[Message]:
    """:func:`join` of each record, in order."""
    return [join(record, blobs, store=store) for record in records]


def wanted(records: Iterable[str | bytes]) -> list[str]:
    """Every blob hash ``records`` name, each once: what a read fetches before joining."""
    found: dict[str, None] = {}
    for record in records:
        for key in refs(record):
            found[key] = None
    return list(found)


def named(records: Iterable[object]) -> list[str]:
    """Every blob hash ``records`` name, each once (what :func:`wanted` finds, without
    parsing JSON: JSON escaping keeps ``"blob":"`` out of any text but an attachment's
    reference; a hash that is not 64 hex digits is damage, which joining reports as a
    missing blob). What is not a ``str`` (a ``NULL`` column) names none."""
    found: dict[str, None] = {}
    for record in records:
        if type(record) is str and MARK in record:
            for key in _HASH.findall(record):
                found[key] = None
    return list(found)
