"""The metadata of a stored message: ``id`` and ``created_at`` as a store stamps them, and
the checks of them and of ``model``, ``usage`` and ``context`` that :class:`~aniki.Message`
runs.

Below :mod:`aniki.messages` (which calls the checks): the checks take the fields' values, and
a store stamps anything shaped like a message (:class:`Stampable`).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import Protocol, TypeVar

from ._checks import check_text, shown
from ._report_record import check_report
from .errors import ValidationError
from .usage import Usage

__all__ = [
    "Stampable",
    "check_call",
    "check_time",
    "new_run_id",
    "parse_time",
    "stamp",
    "stamp_one",
]


class Stampable(Protocol):
    """A message as a store stamps it (:class:`~aniki.Message` is one)."""

    @property
    def id(self) -> str | None: ...

    @property
    def created_at(self) -> datetime | None: ...

    def _stored(self: M, id: str, created_at: datetime) -> M:
        """A copy carrying the ``id`` and ``created_at`` the store assigned."""
        ...


M = TypeVar("M", bound=Stampable)


def parse_time(text: str) -> datetime:
    """``created_at`` from its ISO 8601 text; ``ValidationError`` when it is not a time with
    a UTC offset."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValidationError(
            f"created_at must be an ISO 8601 time such as '2026-12-04T09:30:00+00:00', "
            f"got {shown(text)}",
            field="created_at",
        ) from None
    if moment.tzinfo is None:
        raise ValidationError(
            f"created_at must carry a UTC offset (+00:00), got {shown(text)}", field="created_at"
        )
    return moment


def check_time(moment: object) -> None:
    """``ValidationError`` unless ``moment`` (a message's ``created_at``) is an aware datetime."""
    if not isinstance(moment, datetime):
        raise ValidationError(
            f"created_at must be a datetime or None, got {type(moment).__name__}",
            field="created_at",
        )
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValidationError(
            "created_at must be an aware datetime (use datetime.now(timezone.utc)), "
            "not a naive one",
            field="created_at",
        )


def check_call(role: str, model: object, usage: object, context: object) -> None:
    """``ValidationError`` unless a message of ``role`` may keep what a model call produced
    (only an assistant message may), and ``model``, ``usage`` and ``context`` are valid."""
    if role != "assistant":
        given = [
            name
            for name, value in (("model", model), ("usage", usage), ("context", context))
            if value is not None
        ]
        raise ValidationError(
            f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} only kept on assistant "
            f"messages (what a model call produced), not on a {role} message",
            field=given[0],
        )
    if model is not None and not check_text(model, "model", field="model"):
        raise ValidationError("model must not be empty (or None)", field="model")
    if usage is not None and not isinstance(usage, Usage):
        raise ValidationError(
            f"usage must be a Usage or None, got {type(usage).__name__}", field="usage"
        )
    if context is not None:
        check_report(context, usage)


def stamp(batch: list[M], *, keep: bool = False) -> list[M]:
    """``batch`` as a store keeps it: copies carrying a new :attr:`Message.id` each (16 hex
    digits, random) and the time now (UTC) as :attr:`Message.created_at`.

    An append always assigns both. With ``keep`` (a history imported or rewritten whole),
    a message that has an id keeps its id and time, and only the others are stamped.
    """
    if not batch:
        return batch
    if len(batch) == 1 and not keep:  # a turn's message: an id drawn ahead, no system call
        return [stamp_one(batch[0])]
    now = datetime.now(timezone.utc)
    digits = os.urandom(8 * len(batch)).hex()
    return [
        message
        if keep and message.id is not None and message.created_at is not None
        else message._stored(
            message.id if keep and message.id is not None else digits[16 * n : 16 * n + 16],
            message.created_at if keep and message.created_at is not None else now,
        )
        for n, message in enumerate(batch)
    ]


def stamp_one(message: M) -> M:
    """One message as a store appends it (see :func:`stamp`)."""
    return message._stored(_new_id(), datetime.now(timezone.utc))


_IDS: list[str] = []
"""Ids drawn ahead (one ``os.urandom`` call per 64): a single append is the hottest path
there is, and the system call cost a tenth of a SQLite append. Emptied in a forked child,
which must not hand out its parent's ids."""


def _new_id() -> str:
    """A new message id: 16 random hex digits."""
    try:
        return _IDS.pop()  # atomic: two threads never take the same one
    except IndexError:
        digits = os.urandom(8 * 64).hex()
        _IDS.extend(digits[start : start + 16] for start in range(16, 16 * 64, 16))
        return digits[:16]


def new_run_id() -> str:
    """A new run id: a random UUID (version 4) as 32 hex digits, as ``uuid.uuid4().hex``
    gives, from the ids drawn ahead (a run starts with one; no system call)."""
    digits = _new_id() + _new_id()
    return f"{digits[:12]}4{digits[13:16]}{'89ab'[int(digits[16], 16) & 3]}{digits[17:]}"


if hasattr(os, "register_at_fork"):  # not on Windows, where there is no fork
    os.register_at_fork(after_in_child=_IDS.clear)
