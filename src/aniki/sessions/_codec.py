"""What every persistent store shares, without I/O: record encoding, id rules, redaction.

* A message is stored as compact JSON text of :meth:`~aniki.Message.to_dict` (one line:
  JSON escapes every control character, NUL and newlines included, so the text is also
  safe for JSON-lines files and for PostgreSQL ``text``). :func:`decode_message` turns it
  back, raising :class:`~aniki.CorruptStoreError` naming the store when it cannot.
* Derived-state values (``set_meta``) are stored the same way: any JSON-safe value.
* :data:`SCHEMA_VERSION` is the layout version every store records beside its data.
* :func:`check_session_id` holds the id rules all built-in stores apply, so an id that
  works with one store works with every other.
* :func:`redact` hides passwords in URLs and DSNs before they reach an error message.
"""

from __future__ import annotations

import json
import json.encoder
import math
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import fields
from datetime import datetime
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from .._report_record import report_from_record
from ..errors import CorruptStoreError, UserError
from ..messages import Message, to_messages
from ..reports import ContextReport
from ..usage import Usage

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_LIMIT",
    "MAX_META_DEPTH",
    "SCHEMA_VERSION",
    "Durability",
    "check_durability",
    "check_limit",
    "check_meta_key",
    "check_path",
    "check_seconds",
    "check_session_id",
    "decode_message",
    "decode_messages",
    "decode_meta",
    "encode_batch",
    "encode_message",
    "encode_meta",
    "redact",
    "to_messages",
    "url_problem",
]

_DECODER = json.JSONDecoder()
_TEXT_ROLES = frozenset({"system", "user", "assistant"})
_USAGE_KEYS = frozenset(spec.name for spec in fields(Usage))

SCHEMA_VERSION = 2
"""The layout version of stored data. Stores refuse data with a higher one, and stamp an
older store with this one when they first write to it. Version 2: a record may hold
``attachments`` and ``reasoning``, and the metadata ``id``, ``created_at``, ``model``,
``usage`` and ``context`` (all of which version 1 would read as damaged)."""

MAX_ID_LENGTH = 1024
"""The longest session id (in characters) any built-in store accepts."""

Durability: TypeAlias = Literal["off", "normal", "full"]
"""How hard a local store works to keep a commit (see each store's docstring)."""

_DURABILITIES = ("off", "normal", "full")
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
    if message.tool_call_id is not None:
        text += f',"tool_call_id":{_quote(message.tool_call_id)}'
    if message.id is not None:
        text += f',"id":{_quote(message.id)}'
    if message.created_at is not None:
        text += f',"created_at":"{message.created_at.isoformat()}"'
    if message.model is not None:
        text += f',"model":{_quote(message.model)}'
    if message.usage is not None:
        counts = ",".join(f'"{name}":{count}' for name, count in message.usage.to_dict().items())
        text += f',"usage":{{{counts}}}'
    if message.context is not None:
        text += f',"context":{_report_json(message.context)}'
    return text + "}"


_JSON_FLAGS = {None: "null", True: "true", False: "false"}


def _report_json(report: ContextReport) -> str:
    """``report_record(report)`` as compact JSON text (its counts are plain ints, checked
    when the message was made)."""
    tokens = report.tokens
    stored = "null" if report.stored_messages is None else report.stored_messages
    return (
        f'{{"stored_messages":{stored},"sent_messages":{report.sent_messages},'
        f'"summarized_messages":{report.summarized_messages},"tokens":{{'
        f'"instructions":{tokens.instructions},"tools":{tokens.tools},'
        f'"summary":{tokens.summary},"history":{tokens.history}}},'
        f'"prefix_kept":{_JSON_FLAGS[report.prefix_kept]}}}'
    )


def encode_batch(messages: Iterable[Message]) -> str:
    """Several messages as one line of JSON text (an array); :func:`decode_messages` reads it."""
    return "[" + ",".join(encode_message(message) for message in messages) + "]"


def decode_message(text: str | bytes, *, store: str) -> Message:
    """The message stored as ``text``; :class:`~aniki.CorruptStoreError` when it is not one."""
    try:
        # The record as aniki writes it, parsed without json.loads's wrapping; anything else
        # (leading or trailing space, bad bytes, bad JSON) goes to json.loads to decide.
        plain = text if isinstance(text, str) else text.decode("utf-8")
        data, end = _DECODER.raw_decode(plain)
        if end != len(plain):
            raise ValueError("more after the record")
    except (ValueError, RecursionError):
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            raise _corrupt(text, exc, store) from exc
    return _from_data(data, text, store)


def decode_messages(text: str | bytes, *, store: str) -> list[Message]:
    """The messages stored as ``text``: one JSON object, or a JSON array of them (a batch)."""
    stripped = text.lstrip()
    if stripped[:1] not in ("[", b"["):
        return [decode_message(text, store=store)]
    try:
        items = json.loads(text)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise _corrupt(text, exc, store) from exc
    if not isinstance(items, list):
        raise _corrupt(text, TypeError("a stored batch must be a JSON array"), store)
    return [_from_data(item, text, store) for item in items]


def _from_data(data: Any, text: str | bytes, store: str) -> Message:
    if type(data) is dict:  # the common case, a text message, is checked here, fast
        role, content = data.get("role"), data.get("content")
        if (
            type(role) is str
            and role in _TEXT_ROLES
            and type(content) is str
            and content
            and (content.isascii() or _encodes(content))
        ):
            if len(data) == 2:  # written before stores assigned ids
                return Message._text(role, content)
            plain = _plain_text(data, role, content)
            if plain is not None:
                return plain
    try:
        if not isinstance(data, dict):
            raise TypeError(f"a stored message must be a JSON object, not {type(data).__name__}")
        return Message.from_dict(data)
    except (ValueError, TypeError, RecursionError) as exc:  # ValidationError is a ValueError
        raise _corrupt(text, exc, store) from exc


def _plain_text(data: dict[str, Any], role: str, content: str) -> Message | None:
    """The text message ``data`` holds (with its id, time, model, usage and context), or
    ``None`` when it holds anything else or anything odd: the full path then decides."""
    known = 2
    ident, at, model, usage, context = (
        data.get(key) for key in ("id", "created_at", "model", "usage", "context")
    )
    if ident is not None:
        if type(ident) is not str or not ident or not (ident.isascii() or _encodes(ident)):
            return None
        known += 1
    moment = None
    if at is not None:
        if type(at) is not str:
            return None
        try:
            moment = datetime.fromisoformat(at)
        except ValueError:
            return None
        if moment.tzinfo is None:
            return None
        known += 1
    counted = report = None
    if model is not None or usage is not None or context is not None:
        if role != "assistant":
            return None
        if model is not None:
            if type(model) is not str or not model or not (model.isascii() or _encodes(model)):
                return None
            known += 1
        if usage is not None:
            if type(usage) is not dict or not usage.keys() <= _USAGE_KEYS:
                return None
            if any(type(count) is not int or count < 0 for count in usage.values()):
                return None
            counted = Usage(**usage)
            known += 1
        if context is not None:
            try:
                report = report_from_record(context, counted)
            except ValueError:  # a ValidationError: the full path words it
                return None
            known += 1
    if known != len(data):
        return None
    return Message._text(role, content, ident, moment, model, counted, report)


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: Message's own check words the error
        return False
    return True


def _corrupt(text: str | bytes, exc: Exception, store: str) -> CorruptStoreError:
    shown = text[:80] if isinstance(text, str) else text[:80].decode("utf-8", "replace")
    said = "it is nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:300]
    return CorruptStoreError(
        f"a stored message cannot be read ({said}); the record starts {shown!r}. "
        "The store was changed by something other than aniki; restore it from a backup",
        store=store,
    )


MAX_META_DEPTH = 200
"""How deeply lists and dicts may nest in a derived-state value (a summary needs two or three)."""

MAX_LIMIT = 2**62
"""The largest ``limit`` handed to a store: every store's integers hold it, with room to add."""


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


MAX_WAIT = 2_147_483.0
"""The longest wait any timeout may ask for, in seconds (about 24.8 days): what every clock
below aniki (sockets, locks, the drivers' own timers, in milliseconds as a 32-bit int) can
take. A larger value overflows somewhere underneath, or stops a shared timer thread."""


def check_seconds(
    value: object, *, name: str, waits_for: str, most: float = MAX_WAIT, zero: bool = False
) -> float:
    """``value`` as seconds; a :class:`~aniki.UserError` saying what to pass unless it is a
    finite number above 0 (or 0 itself when ``zero``) and at most ``most`` (by default
    :data:`MAX_WAIT`).

    ``name`` is the argument (``timeout``) and ``waits_for`` what its seconds are spent on,
    both for the error.
    """
    seconds = math.nan
    if not isinstance(value, bool) and isinstance(value, (int, float)):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond any float
            seconds = math.inf
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not zero) or seconds > most:
        low = "from 0" if zero else "greater than 0"
        high = f" to {most:,.0f}" if math.isfinite(most) else ""
        raise UserError(
            f"{name} must be the seconds to wait for {waits_for}, a finite number {low}{high} "
            f"such as {name}=10.0; got {_shown(value)}"
        )
    return seconds


def _shown(value: object) -> str:
    """``repr(value)``, but a huge int by its size (its digits can be too many to print)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**30:
        return f"an int of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_session_id(session_id: object) -> str:
    """``session_id`` when every built-in store can keep it; :class:`~aniki.UserError` if not.

    The rules: a non-empty string of at most :data:`MAX_ID_LENGTH` characters, without NUL
    characters or lone surrogates. Anything else (slashes, dots, quotes, SQL, emoji) is fine:
    stores never build paths or queries from an id.
    """
    if not isinstance(session_id, str):
        raise UserError(f"a session id must be a string, got {type(session_id).__name__}")
    if not session_id:
        raise UserError("a session id must not be empty")
    if len(session_id) > MAX_ID_LENGTH:
        raise UserError(
            f"a session id may have at most {MAX_ID_LENGTH} characters, got "
            f"{len(session_id)}; use a hash of the long key as the id"
        )
    if "\x00" in session_id:
        raise UserError("a session id must not contain NUL characters")
    try:
        session_id.encode("utf-8")
    except UnicodeEncodeError:
        raise UserError(
            "a session id must be valid Unicode text (it has a lone surrogate)"
        ) from None
    return session_id


def check_path(path: object, what: str) -> str:
    """``path`` as text when the OS can name it; :class:`~aniki.UserError` if not.

    The OS refuses a NUL byte in a path, and text that does not encode (a lone surrogate
    that is not an undecodable byte) cannot be a path at all: say so before any I/O.
    """
    try:
        encoded = os.fsencode(path)  # type: ignore[arg-type]
    except TypeError:
        raise UserError(
            f"{what} must be a path (str or os.PathLike), got {type(path).__name__}"
        ) from None
    except UnicodeEncodeError:
        raise UserError(f"{what} {path!r} is not valid text for a file name") from None
    if b"\x00" in encoded:
        raise UserError(f"{what} {path!r} contains a NUL character")
    return os.fsdecode(encoded)


def check_limit(limit: object) -> int | None:
    """``limit`` for ``get_messages(limit=...)``: ``None`` (everything) or an ``int``.

    Any ``int`` is accepted, as "at most this many": a negative one reads nothing (as ``0``)
    and one above :data:`MAX_LIMIT` (more messages than any store can hold) reads everything,
    so no store ever sees an integer its driver or SQL cannot represent.
    """
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise UserError(f"limit must be an int or None, got {type(limit).__name__}")
    return min(max(int(limit), 0), MAX_LIMIT)


def check_durability(durability: object) -> Durability:
    """``durability`` when it names a level; :class:`~aniki.UserError` listing them if not."""
    if durability not in _DURABILITIES:
        raise UserError(f"durability must be one of {list(_DURABILITIES)}, got {durability!r}")
    return durability  # type: ignore[return-value]


def check_meta_key(key: object) -> str:
    """``key`` when it is a usable meta key (a non-empty string)."""
    if not isinstance(key, str) or not key:
        raise UserError(f"a meta key must be a non-empty string, got {key!r}")
    return key


_DSN_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def redact(location: str) -> str:
    """``location`` (a URL or a ``key=value`` DSN) with any password replaced by ``***``.

    Never raises, whatever ``location`` looks like: it runs while an error about that very
    text is being built, and a parser's exception there would carry the password out. It
    does not rely on a URL parser either: everything between the user name and the *last*
    ``@`` is hidden, so a password holding ``/``, ``#``, ``[`` or ``@`` is hidden whole
    (at worst a little more than the password is hidden).
    """
    text = location if isinstance(location, str) else repr(location)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    userinfo, at, hostpart = rest.rpartition("@")
    # With a scheme, whatever precedes the last "@" is user info, whatever the user name
    # holds (even "="); without one it may be a keyword DSN, whose "=" marks a keyword.
    if at and ":" in userinfo and (sep or "=" not in userinfo.split(":", 1)[0]):
        user = userinfo.split(":", 1)[0]
        text = f"{scheme}{sep}{user}:***@{hostpart}"
    return _DSN_PASSWORD.sub(r"\1***", text)


def url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as a server URL, or ``None``.

    Never raises, and says it in its own words: a parser's message can quote part of the
    password (``user:pa/ss@host`` reads as host ``user``, port ``pa``).
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        said = str(exc)
        if "IPv6" in said or "IPv4" in said:
            problem = "its host in [brackets] is not an IP address"
        elif "port" in said.lower():
            problem = "its port is not a number from 0 to 65535"
        else:
            problem = "it cannot be parsed"
        return f"{problem} (characters such as / ? # @ [ ] in a password must be percent-encoded)"
    del port
    return None
