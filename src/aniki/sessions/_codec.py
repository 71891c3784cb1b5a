"""How every persistent store writes its records, without I/O: messages and meta values as
JSON text, and back.

* A message is stored as compact JSON text of :meth:`~aniki.Message.to_dict` (one line:
  JSON escapes every control character, NUL and newlines included, so the text is also
  safe for JSON-lines files and for PostgreSQL ``text``). :func:`decode_message` turns it
  back, raising :class:`~aniki.CorruptStoreError` naming the store when it cannot. It also
  reads the compact record of a text message (:mod:`._codec_compact`), which the SQLite
  store writes.
* Derived-state values (``set_meta``) are stored the same way: any JSON-safe value.
* :data:`SCHEMA_VERSION` is the layout version every store records beside its data.

The stores' argument checks are in :mod:`._args`; passwords are hidden by
:mod:`aniki._secrets`.
"""

from __future__ import annotations

import json
import json.encoder
import sys
from collections.abc import Callable, Iterable
from typing import Any

from .._report_record import report_from_record
from ..errors import CorruptStoreError, UserError
from ..messages import Message
from ..reports import ContextReport
from ..usage import Usage
from ._codec_compact import COMPACT, read_compact
from ._codec_fast import ROLE_NAMES, corrupt, encodes, moment, read_at, read_batch, usage_of
from ._gc import MANY, paused

__all__ = [
    "MAX_META_DEPTH",
    "SCHEMA_VERSION",
    "decode_message",
    "decode_messages",
    "decode_records",
    "decode_meta",
    "encode_batch",
    "encode_message",
    "encode_meta",
]

_DECODER = json.JSONDecoder()
_make = Message._text
_TEXT_ROLES = frozenset({"system", "user", "assistant"})

SCHEMA_VERSION = 2
"""The layout version of stored data. Stores refuse data with a higher one, and stamp an
older store with this one when they first write to it. Version 2: a record may hold
``attachments`` and ``reasoning``, and the metadata ``id``, ``created_at``, ``model``,
``usage`` and ``context`` (all of which version 1 would read as damaged)."""

_quote: Callable[[str], str] = json.encoder.encode_basestring
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def encode_message(message: Message) -> str:
    """``message`` as one line of compact JSON text: ``to_dict()`` with no spaces.

    Written out by hand because appends are hot: this is several times faster than
    ``json.dumps`` and gives the same text (a test holds them equal).
    """
    if message.attachments or message.reasoning:  # rare, and large: the plain encoder
        return _ENCODER.encode(message.to_dict())
    text = f'{{"role":"{message.role}","content":{_quote(message.content)}'
    if message.tool_calls:
        calls = ",".join(
            f'{{"id":{_quote(call.id)},"name":{_quote(call.name)},'
            f'"arguments":{_quote(call.arguments)}}}'
            for call in message.tool_calls
        )
        text += f',"tool_calls":[{calls}]'
    answers, ident, at, model = message.tool_call_id, message.id, message.created_at, message.model
    usage, report = message.usage, message.context
    return "".join(  # the optional keys, in to_dict()'s order
        (
            text,
            "" if answers is None else f',"tool_call_id":{_quote(answers)}',
            "" if ident is None else f',"id":{_quote(ident)}',
            "" if at is None else f',"created_at":"{at.isoformat()}"',
            "" if model is None else f',"model":{_quote(model)}',
            "" if usage is None else f',"usage":{_usage_json(usage)}',
            "" if report is None else f',"context":{_report_json(report)}',
            "}",
        )
    )


def _usage_json(usage: Usage) -> str:
    counts = ",".join(f'"{name}":{count}' for name, count in usage.to_dict().items())
    return f"{{{counts}}}"


_JSON_FLAGS = {None: "null", True: "true", False: "false"}


def _report_json(report: ContextReport) -> str:
    """``report_record(report)`` as compact JSON text (its counts are plain ints, checked
    when the message was made)."""
    tokens = report.tokens
    stored = "null" if report.stored_messages is None else report.stored_messages
    shortened = report.shortened_messages  # written only when not 0, as report_record does
    more = f',"shortened_messages":{shortened}' if shortened else ""
    return (
        f'{{"stored_messages":{stored},"sent_messages":{report.sent_messages},'
        f'"summarized_messages":{report.summarized_messages},"tokens":{{'
        f'"instructions":{tokens.instructions},"tools":{tokens.tools},'
        f'"summary":{tokens.summary},"history":{tokens.history}}},'
        f'"prefix_kept":{_JSON_FLAGS[report.prefix_kept]}{more}}}'
    )


def encode_batch(messages: Iterable[Message]) -> str:
    """Several messages as one line of JSON text (an array); :func:`decode_messages` reads it."""
    return "[" + ",".join(encode_message(message) for message in messages) + "]"


def decode_message(text: str | bytes, *, store: str) -> Message:
    """The message stored as ``text``; :class:`~aniki.CorruptStoreError` when it is not one."""
    try:
        plain = text if isinstance(text, str) else text.decode("utf-8")
    except ValueError:  # bad UTF-8: json.loads below words the error
        plain = ""
    else:
        if plain[:1] == COMPACT:
            return read_compact(plain, store)
        found = read_at(plain, 0)  # a text message, read without the JSON parser
        if found is not None and found[1] == len(plain):
            return found[0]
    try:
        # The record as aniki writes it, parsed without json.loads's wrapping; anything else
        # (leading or trailing space, bad bytes, bad JSON) goes to json.loads to decide.
        data, end = _DECODER.raw_decode(plain)
        if end != len(plain):
            raise ValueError("more after the record")
    except (ValueError, RecursionError):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise corrupt(text, exc, store) from exc
    return _from_data(data, text, store)


def decode_records(texts: list[str], *, store: str) -> list[Message]:
    """The messages stored as ``texts``, one record each, with the garbage collector paused
    when they are many (see :mod:`aniki.sessions._gc`)."""
    with paused(len(texts) >= MANY):
        return [decode_message(text, store=store) for text in texts]


def decode_messages(text: str | bytes, *, store: str) -> list[Message]:
    """The messages stored as ``text``: one JSON object, or a JSON array of them (a batch)."""
    stripped = text.lstrip()
    if stripped[:1] not in ("[", b"["):
        return [decode_message(text, store=store)]
    try:
        plain = text if isinstance(text, str) else text.decode("utf-8")
    except ValueError:  # bad UTF-8: json.loads below words the error
        pass
    else:
        messages = read_batch(plain)  # text messages, read without the JSON parser
        if messages is not None:
            return messages
    try:
        items = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise corrupt(text, exc, store) from exc
    if not isinstance(items, list):
        raise corrupt(text, TypeError("a stored batch must be a JSON array"), store)
    return [_from_data(item, text, store) for item in items]


def _from_data(data: Any, text: str | bytes, store: str) -> Message:
    if type(data) is dict:  # the common case, a text message, is checked here, fast
        role, content = data.get("role"), data.get("content")
        if (
            type(role) is str
            and role in _TEXT_ROLES
            and type(content) is str
            and content
            and (content.isascii() or encodes(content))
        ):
            role = ROLE_NAMES[role]
            if len(data) == 2:  # written before stores assigned ids
                return _make(role, content)
            plain = _plain_text(data, role, content)
            if plain is not None:
                return plain
    try:
        if not isinstance(data, dict):
            raise TypeError(f"a stored message must be a JSON object, not {type(data).__name__}")
        return Message.from_dict(data)
    except (ValueError, TypeError, RecursionError) as exc:  # ValidationError is a ValueError
        raise corrupt(text, exc, store) from exc


def _plain_text(data: dict[str, Any], role: str, content: str) -> Message | None:
    """The text message ``data`` holds (with its id, time, model, usage and context), or
    ``None`` when it holds anything else or anything odd: the full path then decides."""
    get = data.get
    ident, at, model, usage, context = (
        get("id"),
        get("created_at"),
        get("model"),
        get("usage"),
        get("context"),
    )
    known = 2
    if ident is not None:
        if type(ident) is not str or not ident or not (ident.isascii() or encodes(ident)):
            return None
        known += 1
    when = None
    if at is not None:
        if type(at) is not str:
            return None
        when = moment(at)
        if when is None:
            return None
        known += 1
    counted = report = None
    if model is not None or usage is not None or context is not None:
        if role != "assistant":
            return None
        if model is not None:
            if type(model) is not str or not model or not (model.isascii() or encodes(model)):
                return None
            model = sys.intern(model)  # one string per model name, however many replies
            known += 1
        if usage is not None:
            counted = usage_of(usage)
            if counted is None:
                return None
            known += 1
        if context is not None:
            try:
                report = report_from_record(context, counted)
            except ValueError:  # a ValidationError: the full path words it
                return None
            known += 1
    if known != len(data):
        return None
    return _make(role, content, ident, when, model, counted, report)


MAX_META_DEPTH = 200
"""How deeply lists and dicts may nest in a derived-state value (a summary needs two or three)."""


def encode_meta(key: str, value: Any) -> str:
    """A derived-state value as JSON text; :class:`~aniki.UserError` when it is not JSON-safe."""
    _check_depth(key, value)
    try:
        return _ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise UserError(
            f"set_meta({key!r}, ...) needs a JSON-safe value (str, int, float, bool, None, "
            f"and lists or dicts of them): {exc}"
        ) from exc


def _check_depth(key: str, value: Any) -> None:
    # Walked without recursion: the encoder itself would die of RecursionError (or worse, on a
    # small thread stack) long before it could say what is wrong.
    # A container met again is walked again only when met deeper (a shared subtree costs
    # little; a cycle grows deeper each time round and ends as "too deep").
    pending: list[tuple[Any, int]] = [(value, 1)]
    deepest: dict[int, int] = {}
    while pending:
        node, depth = pending.pop()
        if not isinstance(node, (list, tuple, dict)) or deepest.get(id(node), 0) >= depth:
            continue
        if depth > MAX_META_DEPTH:
            raise UserError(
                f"set_meta({key!r}, ...) got a value nested more than {MAX_META_DEPTH} levels "
                "deep (or one that contains itself); store a flatter value"
            )
        deepest[id(node)] = depth
        items = node.values() if isinstance(node, dict) else node
        pending.extend((item, depth + 1) for item in items)


def decode_meta(text: str | bytes, *, store: str) -> Any:
    """The derived-state value stored as ``text``."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CorruptStoreError(
            f"a stored meta value cannot be read: {str(exc)[:200]}", store=store
        ) from exc
