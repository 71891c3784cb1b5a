"""Attachments on the Redis store, stored apart from their records once per content (see
:mod:`aniki.sessions._blobs` and ``_blob_lua``): what an append sends, and how a read puts
the bytes back. No I/O.

An append sends each blob with the records that name it, and its script stores the blob
unless the prefix holds it already: the bytes cross the wire with every send, but are kept
once. A read fetches only the blobs the records it returns name, in one pipeline after its
script, and only when some record names one; the bytes are then held by the instance's
history cache like the rest of the message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ...messages import Message
from .._blobs import MARK, join, split, wanted
from .._codec import decode_message, encode_message
from ._steps import Flow, Pipeline

__all__ = ["blob_key", "decoded", "fetch", "names_blobs", "records_and_blobs"]

_MARK = MARK.encode()


def records_and_blobs(messages: Iterable[Message], *, apart: bool) -> list[str | int | bytes]:
    """An append's blob block and records, as its script takes them (see ``_scripts``): the
    number of blobs, a (hash, how many records name it, bytes) triple per blob, the records.
    Without ``apart`` (a Redis Cluster), no blob: the records hold the bytes inline."""
    if not apart:
        return [0, *(encode_message(message) for message in messages)]
    records: list[str | int | bytes] = []
    counts: dict[str, int] = {}
    data: dict[str, bytes] = {}
    for message in messages:
        record, found = split(message)
        records.append(record)
        for key, value in found.items():
            counts[key] = counts.get(key, 0) + 1
            data[key] = value
    block: list[str | int | bytes] = [len(counts)]
    for key, count in counts.items():
        block += [key, count, data[key]]
    return block + records


def blob_key(prefix: bytes, key: str) -> bytes:
    """The Redis key of the blob ``key`` (a SHA-256 in hex) under ``prefix``."""
    return prefix + b"blob:" + key.encode("ascii")


def names_blobs(record: Any) -> bool:
    """Whether a stored record (bytes or text) names a blob (fast: no JSON parse)."""
    return (_MARK if isinstance(record, bytes) else MARK) in record


def fetch(prefix: bytes, records: Sequence[Any]) -> Flow[dict[str, bytes]]:
    """The blobs ``records`` name, read in one round trip (none when they name none)."""
    keys = wanted(record for record in records if names_blobs(record))
    if not keys:
        return {}
    replies = yield Pipeline(tuple(("HGET", blob_key(prefix, key), "data") for key in keys))
    return {key: data for key, data in zip(keys, replies, strict=True) if data is not None}


def decoded(records: Sequence[Any], blobs: Mapping[str, bytes], *, store: str) -> list[Message]:
    """The messages ``records`` hold, each attachment's bytes taken from ``blobs``;
    :class:`~aniki.CorruptStoreError` when a record names a blob that is missing."""
    return [
        join(record, blobs, store=store)
        if names_blobs(record)
        else decode_message(record, store=store)
        for record in records
    ]
