"""The metadata of a stored message: ``id`` and ``created_at`` as a store stamps them, and
the checks of them and of ``model``, ``usage`` and ``context`` that :class:`~aniki.Message`
runs."""

from __future__ import annotations

import os
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ._checks import check_text, shown
from ._report_record import check_report
from .errors import ValidationError
from .usage import Usage

if TYPE_CHECKING:
    from .messages import Message

__all__ = ["check_call", "check_time", "parse_time", "stamp", "stamp_one"]


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


def check_time(message: Message) -> None:
    moment = message.created_at
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


def check_call(message: Message) -> None:
    if message.role != "assistant":
        given = [
            name for name in ("model", "usage", "context") if getattr(message, name) is not None
        ]
        raise ValidationError(
            f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} only kept on assistant "
            f"messages (what a model call produced), not on a {message.role} message",
            field=given[0],
        )
    if message.model is not None and not check_text(message.model, "model", field="model"):
        raise ValidationError("model must not be empty (or None)", field="model")
    if message.usage is not None and not isinstance(message.usage, Usage):
        raise ValidationError(
            f"usage must be a Usage or None, got {type(message.usage).__name__}", field="usage"
        )
    if message.context is not None:
        check_report(message.context, message.usage)


def stamp(batch: list[Message], *, keep: bool = False) -> list[Message]:
    """``batch`` as a store keeps it: copies carrying a new :attr:`Message.id` each (16 hex
    digits, random) and the time now (UTC) as :attr:`Message.created_at`.

    An append always assigns both. With ``keep`` (a history imported or rewritten whole),
    a message that has an id keeps its id and time, and only the others are stamped.
    """
    if not batch:
        return batch
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


def stamp_one(message: Message) -> Message:
    """One message as a store appends it (see :func:`stamp`)."""
    return message._stored(os.urandom(8).hex(), datetime.now(timezone.utc))
