"""The compact record of a text message (pure, no I/O): its fields joined by a separator,
the content last and as it is, so that reading it back is one ``split`` and no scan of the
content (no JSON string to unescape). The SQLite store writes it; every store reads it.

A compact record is::

    "\\x01" role "\\x1f" id "\\x1f" created_at "\\x1f" model "\\x1f" tool_call_id "\\x1f" content

with ``""`` for a field that is ``None`` (none of them may be empty when set) and
``created_at`` in ISO 8601 with its offset. Only a message with nothing else (no tool calls,
attachments, reasoning, usage or context report) whose id, model and ``tool_call_id`` hold
no separator is written so; any other keeps its JSON record. No compact record holds
:data:`BLOB_MARK`, so a store still finds the records that name blobs by looking for it.

Measured on 100,000 text messages of 300 characters with ids and times (one run, 2 cores):
1.33 µs a record to read against 2.72 µs for its JSON record (2.55 µs for a bare
``json.loads`` giving only a dict); 1.62 µs to write one against 2.40 µs.
"""

from __future__ import annotations

import sys

from ..messages import Message
from ._codec_fast import ROLE_NAMES, TIMES, corrupt, encodes, moment

__all__ = ["BLOB_MARK", "COMPACT", "compact_record", "read_compact"]

COMPACT = "\x01"
"""The first character of a compact record (a JSON record starts with ``{`` or ``[``)."""
_SEP = "\x1f"
BLOB_MARK = '"blob":"'
"""What a record naming a blob holds (:data:`aniki.sessions._blobs.MARK`); a compact record
never does."""
_make = Message._text


def compact_record(message: Message) -> str | None:
    """``message``'s compact record, or ``None`` when it keeps its JSON record."""
    if (
        message.tool_calls
        or message.attachments
        or message.reasoning
        or message.usage is not None
        or message.context is not None
    ):
        return None
    ident, model, answers, at = message.id, message.model, message.tool_call_id, message.created_at
    if (
        (ident is not None and _SEP in ident)
        or (model is not None and _SEP in model)
        or (answers is not None and _SEP in answers)
    ):
        return None  # a separator inside a field: the JSON record says it right
    # None as "": no field may be empty when set (Message refuses an empty id, model or
    # tool_call_id), so "" reads back as None.
    record = (
        f"{COMPACT}{message.role}\x1f{ident or ''}\x1f{'' if at is None else at.isoformat()}"
        f"\x1f{model or ''}\x1f{answers or ''}\x1f{message.content}"
    )
    return None if BLOB_MARK in record else record


def read_compact(text: str, store: str) -> Message:
    """The message a compact record holds; :class:`~aniki.CorruptStoreError` naming
    ``store`` for a record that :func:`compact_record` did not write."""
    fields = text.split(_SEP, 5)
    if len(fields) == 6:
        name, ident, at, model, answers, content = fields
        role = _ROLES.get(name)
        when = (TIMES.get(at) or moment(at)) if at else None  # the cache asked first
        if (
            role is not None
            and content
            and (when is not None or not at)
            and (role == "tool") == (answers != "")
            and (not model or role == "assistant")
            and (text.isascii() or encodes(text))  # isascii() reads a flag: no scan
        ):
            # One string per model name, however many replies.
            named = sys.intern(model) if model else None
            return _make(role, content, ident or None, when, named, None, None, answers or None)
    raise corrupt(text, ValueError(_problem(fields)), store)


_ROLES = {COMPACT + role: role for role in ROLE_NAMES.values()}


def _problem(fields: list[str]) -> str:
    """What is wrong with a compact record split into ``fields`` (one that did not read)."""
    if len(fields) != 6:
        return "a compact record has six fields"
    name, _, at, model, answers, content = fields
    if name not in _ROLES:
        return f"unknown role {name[1:40]!r}"
    if not content:
        return "its content is empty"
    if not all(value.isascii() or encodes(value) for value in fields):
        return "it holds text that is not valid Unicode"
    if (name == COMPACT + "tool") != (answers != ""):
        return "a tool message needs a tool_call_id, and no other message has one"
    if model and name != COMPACT + "assistant":
        return "only an assistant message names a model"
    return f"created_at {at[:40]!r} is not a time with an offset"
