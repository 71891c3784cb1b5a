"""The steps a Redis flow yields (:class:`Eval`, :class:`Pipeline`) and what every flow does
with a script's reply: read its texts, and raise the error a refusal stands for (see
``_scripts``). No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ...errors import CorruptStoreError, SchemaVersionError
from .. import _driver
from .._codec import SCHEMA_VERSION
from ._scripts import Script

__all__ = ["RAW", "Eval", "Flow", "Pipeline", "refusal", "text"]

T = TypeVar("T")

RAW: dict[str, Any] = {"NEVER_DECODE": True}
"""The options with which every step is sent: replies as bytes, whatever the client decodes
(a client made with ``decode_responses=True`` would try to read a blob's bytes as text)."""


@dataclass(frozen=True, slots=True)
class Eval:
    """A step: run ``script`` over ``keys`` with ``args``."""

    script: Script
    """The script."""
    keys: tuple[bytes, ...]
    """KEYS: the session's msgs, info, meta and batches keys (a fork: two sessions'), and,
    for a write that keeps the catalog, the prefix's set of all sessions last."""
    args: tuple[bytes | str | int, ...]
    """ARGV; the first is always the schema version."""


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A step: send plain commands in one round trip (not a transaction)."""

    commands: tuple[tuple[Any, ...], ...]
    """Each command with its arguments."""


Flow = _driver.Flow[Eval | Pipeline, T]
"""An operation: yields steps, receives each step's reply, returns the result."""


def text(value: bytes | str) -> str:
    """A reply's bytes as text (a client made with ``decode_responses`` gives str)."""
    return value.decode("utf-8") if isinstance(value, bytes) else value


def refusal(reply: Sequence[Any], session_id: str, store: str) -> None:
    """Raise the error a script's refusal stands for; else nothing."""
    status = int(reply[0])
    if status == -1:
        raise SchemaVersionError(
            f"session {session_id!r} was written with schema version {text(reply[1])}, newer "
            f"than this aniki's {SCHEMA_VERSION}; upgrade aniki to read it",
            store=store,
        )
    if status == -2:
        raise CorruptStoreError(
            f"the Redis key {text(reply[1])!r} holds a {text(reply[2])} that aniki did not "
            "write; another program uses this key: choose another prefix= for aniki",
            store=store,
        )
    if status == -3:
        raise CorruptStoreError(
            f"a stored message cannot be read (record {int(reply[2])} of the Redis key "
            f"{text(reply[1])!r} is not JSON); the store was changed by something other "
            "than aniki; restore it from a backup",
            store=store,
        )
