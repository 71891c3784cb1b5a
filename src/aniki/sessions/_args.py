"""The argument checks every built-in store applies, so that an argument one store accepts
works with every other: session ids, meta keys, ``limit``, timeouts, paths, durability.

Each returns the value to use, or raises :class:`~aniki.UserError` saying what to pass.
"""

from __future__ import annotations

import math
import os
from typing import Literal, TypeAlias

from ..errors import UserError

__all__ = [
    "MAX_ID_LENGTH",
    "MAX_LIMIT",
    "MAX_WAIT",
    "Durability",
    "check_durability",
    "check_limit",
    "check_meta_key",
    "check_path",
    "check_seconds",
    "check_session_id",
]

MAX_ID_LENGTH = 1024
"""The longest session id (in characters) any built-in store accepts."""

MAX_LIMIT = 2**62
"""The largest ``limit`` handed to a store: every store's integers hold it, with room to add."""

Durability: TypeAlias = Literal["off", "normal", "full"]
"""How hard a local store works to keep a commit (see each store's docstring)."""

_DURABILITIES = ("off", "normal", "full")


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
