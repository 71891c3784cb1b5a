"""A flow, and the steps it yields: how an operation on the tables is written without I/O.

An operation is a generator (a *flow*) that yields :class:`Query` steps and receives their
rows; ``_drive`` runs it on a connection, in one transaction (or, for a long one such as a
prune, in several: a step marked ``commits`` ends one). The flows are in ``_core`` and, for
fork and undo, ``_edits``; for info, listing and retention, ``_catalog``.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

__all__ = ["Flow", "Query"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Query:
    """A step: run ``statement`` with ``params``; the reply is the rows (``[]`` when none)."""

    statement: bytes
    """The SQL, with the table names already quoted in."""
    params: dict[str, Any] | None = None
    """Values for its ``%(name)s`` placeholders; never spliced into the text."""
    alone: bool = False
    """The statement needs no transaction shared with the flow's others: on an autocommit
    connection it runs as its own (one round trip instead of three). A flow whose first
    statement is alone yields only such statements."""
    binary: bool = False
    """Its rows come back in PostgreSQL's binary format: ``bytea`` as its bytes, not twice as
    many hex digits to decode (how blobs are read)."""
    commits: bool = False
    """The flow's transaction commits once this statement has run, and its next statements
    run in a new one (whose deadline starts afresh): how a prune works in short
    transactions. Meaningless for a step that is ``alone``."""
    prepare: bool = False
    """A statement of every turn (an append, a read): prepared on the server at its first
    use on a connection, not at psycopg's default sixth. Until then each use is parsed and
    planned afresh, which for an append costs the server more than the rest of the
    statement; the Parse goes out with the first use (one round trip, see ``_drive``). A
    connection whose ``prepare_threshold`` is ``None`` (prepared statements off, as behind a
    transaction pooler) still prepares nothing."""


Flow = Generator[Query, list[tuple[Any, ...]], T]
"""An operation: yields queries, receives each one's rows, returns the result."""
