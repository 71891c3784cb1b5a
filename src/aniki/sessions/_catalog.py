"""A conversation as an app keeps it: its info (title, owner, tags, times), the listing of a
store's conversations, and retention. The checks and the rules every store shares, no I/O.

- :func:`check_info` reads the keywords of ``set_info(title=..., owner=..., tags=...)`` into
  an :class:`InfoChange` (a keyword left out is :data:`KEEP`: left as it is).
- :func:`check_listing` reads those of ``list_sessions(owner=..., tag=..., updated_after=...,
  limit=..., cursor=...)`` into a :class:`Listing`.
- :func:`check_prune` and :func:`check_owner` those of ``prune`` and ``delete_sessions``.
- :func:`select` is the listing's rule, written once over a list of infos: the in-memory
  store uses it, and the other stores' queries are tested against it.

The rules: a session is listed when it holds messages or has info set; newest ``updated_at``
first, ties by id; ``updated_after`` is strict; a page continues after ``cursor``, the last
info of the page before. ``clear()`` removes a session's info with its history (the session
is then as if never written). A prune or a delete removes whole sessions, each atomically,
in batches of at most :data:`PRUNE_BATCH` so no lock is held long.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Final, Literal, Protocol

from .._checks import shown
from ..errors import UserError
from .base import AsyncSession, Session, SessionInfo

__all__ = [
    "KEEP",
    "AsyncStoredSession",
    "StoredSession",
    "MAX_OWNER",
    "MAX_TAG",
    "MAX_TAGS",
    "MAX_TITLE",
    "PRUNE_BATCH",
    "InfoChange",
    "Keep",
    "Listing",
    "apply_change",
    "check_info",
    "check_listing",
    "check_owner",
    "check_prune",
    "check_tag",
    "check_tags",
    "from_timestamp",
    "pruned",
    "select",
    "timestamp",
    "utc",
]

MAX_TITLE = 1000
"""Characters a title may have."""
MAX_OWNER = 200
"""Characters an owner may have."""
MAX_TAG = 100
"""Characters a tag may have."""
MAX_TAGS = 50
"""Tags a session may have."""
PRUNE_BATCH = 100
"""Sessions a prune or a delete removes per transaction (per script, on Redis)."""


class Keep(enum.Enum):
    """The type of :data:`KEEP`."""

    KEEP = "KEEP"

    def __repr__(self) -> str:
        return "KEEP"


KEEP: Final = Keep.KEEP
"""A ``set_info`` keyword left out: that field is left as it is."""


class StoredSession(Session, Protocol):
    """What ``open_store(url).session(id)`` hands out: a :class:`~aniki.sessions.Session`
    that also has the conversation's info (every built-in store's sessions have it)."""

    def info(self) -> SessionInfo:
        """Its title, owner, tags, message count and times."""
        ...

    def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """Set its title, owner or tags; a keyword left out is left as it is."""
        ...


class AsyncStoredSession(AsyncSession, Protocol):
    """:class:`StoredSession` with awaited methods (``open_store(url, asynchronous=True)``)."""

    async def info(self) -> SessionInfo:
        """Its title, owner, tags, message count and times."""
        ...

    async def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """Set its title, owner or tags; a keyword left out is left as it is."""
        ...


@dataclass(frozen=True, slots=True)
class InfoChange:
    """What a ``set_info`` call changes; a field holding :data:`KEEP` is left as it is."""

    title: str | Keep | None = KEEP
    owner: str | Keep | None = KEEP
    tags: tuple[str, ...] | Keep = KEEP

    @property
    def empty(self) -> bool:
        """Whether it changes nothing."""
        return self.title is KEEP and self.owner is KEEP and self.tags is KEEP


@dataclass(frozen=True, slots=True)
class Listing:
    """A checked ``list_sessions`` query."""

    owner: str | None = None
    tag: str | None = None
    updated_after: datetime | None = None
    """UTC, or ``None``."""
    limit: int | None = None
    cursor: tuple[datetime, str] | None = None
    """``(updated_at, id)`` of the last info of the page before: list what sorts after."""
    order: Literal["updated"] = "updated"


def _text(value: object, name: str, longest: int) -> str:
    if not isinstance(value, str):
        raise UserError(f"{name} must be a str, got {type(value).__name__} {shown(value)}")
    if not value or len(value) > longest:
        raise UserError(f"{name} must have 1 to {longest} characters; got {len(value)}")
    if "\x00" in value:
        raise UserError(f"{name} must not contain NUL characters; got {shown(value)}")
    return value


def check_owner(owner: object, name: str = "owner") -> str:
    """``owner`` when it is a valid owner (1 to :data:`MAX_OWNER` characters, no NUL)."""
    return _text(owner, name, MAX_OWNER)


def check_tag(tag: object, name: str = "tag") -> str:
    """``tag`` when it is a valid tag (1 to :data:`MAX_TAG` characters, no NUL)."""
    return _text(tag, name, MAX_TAG)


def check_tags(tags: object) -> tuple[str, ...]:
    """``tags`` (any iterable of str but a str itself) as a sorted tuple, each once."""
    if isinstance(tags, (str, bytes)) or not isinstance(tags, Iterable):
        raise UserError(
            f"tags must be a list or tuple of str, got {type(tags).__name__} {shown(tags)}"
        )
    found = sorted({check_tag(tag, "each tag") for tag in tags})
    if len(found) > MAX_TAGS:
        raise UserError(f"a session may have at most {MAX_TAGS} tags; got {len(found)}")
    return tuple(found)


def check_info(
    *,
    title: object = KEEP,
    owner: object = KEEP,
    tags: object = KEEP,
) -> InfoChange:
    """The change ``set_info`` was asked for, checked: ``None`` removes a title or an owner,
    ``()`` the tags. :class:`~aniki.UserError` saying what to fix otherwise."""
    return InfoChange(
        title=title if title is KEEP or title is None else _text(title, "title", MAX_TITLE),
        owner=owner if owner is KEEP or owner is None else check_owner(owner),
        tags=KEEP if tags is KEEP else check_tags(tags),
    )


def utc(value: object, name: str) -> datetime:
    """``value`` as an aware UTC datetime; a naive one is refused (its zone is unknown)."""
    if not isinstance(value, datetime):
        raise UserError(f"{name} must be a datetime, got {type(value).__name__} {shown(value)}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise UserError(
            f"{name} must be timezone-aware (a naive datetime's zone is unknown); pass e.g. "
            "datetime.now(timezone.utc) - timedelta(days=7)"
        )
    return value.astimezone(timezone.utc)


def check_listing(
    *,
    owner: object = None,
    tag: object = None,
    updated_after: object = None,
    limit: object = None,
    cursor: object = None,
    order: object = "updated",
) -> Listing:
    """The ``list_sessions`` query, checked (see the module docstring)."""
    if order != "updated":
        raise UserError(f'order must be "updated" (newest first); got {shown(order)}')
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise UserError(f"limit must be a whole number, 1 or more, or None; got {shown(limit)}")
    mark = None
    if cursor is not None:
        if not isinstance(cursor, SessionInfo) or cursor.updated_at is None:
            raise UserError(
                "cursor takes the last SessionInfo of the page before (one list_sessions "
                f"returned); got {type(cursor).__name__}"
            )
        mark = (utc(cursor.updated_at, "cursor.updated_at"), cursor.id)
    return Listing(
        owner=None if owner is None else check_owner(owner),
        tag=None if tag is None else check_tag(tag),
        updated_after=None if updated_after is None else utc(updated_after, "updated_after"),
        limit=limit,
        cursor=mark,
    )


def check_prune(
    older_than: object, owner: object = None, *, now: datetime | None = None
) -> datetime:
    """The cut-off of ``prune(older_than=..., owner=...)``: sessions last written before it
    go. ``older_than`` is a positive :class:`~datetime.timedelta`."""
    if not isinstance(older_than, timedelta):
        raise UserError(
            "older_than must be a datetime.timedelta, e.g. timedelta(days=30); got "
            f"{type(older_than).__name__} {shown(older_than)}"
        )
    if older_than <= timedelta(0):
        raise UserError(f"older_than must be positive; got {older_than!r}")
    if owner is not None:
        check_owner(owner)
    return (now or datetime.now(timezone.utc)) - older_than


def timestamp(when: datetime) -> float:
    """``when`` (aware) as seconds since the epoch, as stores keep times."""
    return when.timestamp()


def from_timestamp(seconds: float) -> datetime:
    """Seconds since the epoch as a UTC datetime (:class:`ValueError` when impossible)."""
    if not math.isfinite(seconds):
        raise ValueError(f"not a time: {seconds!r}")
    try:
        return datetime.fromtimestamp(seconds, tz=timezone.utc)
    except (OverflowError, OSError) as exc:
        raise ValueError(f"not a time: {seconds!r}") from exc


def apply_change(info: SessionInfo, change: InfoChange, now: datetime) -> SessionInfo:
    """``info`` with ``change`` applied at ``now`` (the in-memory store's ``set_info``)."""
    return replace(
        info,
        title=info.title if change.title is KEEP else change.title,
        owner=info.owner if change.owner is KEEP else change.owner,
        tags=info.tags if change.tags is KEEP else change.tags,
        created_at=info.created_at or now,
        updated_at=now,
    )


def _sort_key(info: SessionInfo) -> tuple[float, str]:
    # Newest first, then by id: the order every store lists in.
    when = info.updated_at.timestamp() if info.updated_at is not None else -math.inf
    return (-when, info.id)


def select(infos: Iterable[SessionInfo], listing: Listing) -> list[SessionInfo]:
    """The page of ``infos`` that ``listing`` asks for, in the listing's order."""
    found = []
    for info in infos:
        if listing.owner is not None and info.owner != listing.owner:
            continue
        if listing.tag is not None and listing.tag not in info.tags:
            continue
        if listing.updated_after is not None and (
            info.updated_at is None or info.updated_at <= listing.updated_after
        ):
            continue
        if listing.cursor is not None:
            when, ident = listing.cursor
            if _sort_key(info) <= (-when.timestamp(), ident):
                continue
        found.append(info)
    found.sort(key=_sort_key)
    return found if listing.limit is None else found[: listing.limit]


def pruned(infos: Sequence[SessionInfo], cutoff: datetime, owner: str | None) -> list[str]:
    """The ids of ``infos`` a prune at ``cutoff`` (for ``owner``) removes."""
    return [
        info.id
        for info in infos
        if info.updated_at is not None
        and info.updated_at < cutoff
        and (owner is None or info.owner == owner)
    ]
