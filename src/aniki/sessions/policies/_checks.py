"""The arguments every history policy checks when it is made: each error says what to fix."""

from __future__ import annotations

import math
from datetime import timedelta

from ...errors import UserError
from ..base import missing_methods
from ._clearing import ClearToolResults

__all__ = [
    "check_cache_ttl",
    "check_clearing",
    "check_positive",
    "check_session",
    "check_trim_to",
]


def check_positive(name: str, value: object) -> int:
    """``value`` when it is a whole number of at least 1, else a :class:`~aniki.UserError`."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise UserError(f"{name} must be a whole number of at least 1, got {value!r}")
    return value


def check_trim_to(trim_to: object, limit: int, name: str) -> int:
    """``trim_to`` checked against the policy's limit; ``None`` gives half the limit."""
    if trim_to is None:
        return max(limit // 2, 1)
    if not isinstance(trim_to, int) or isinstance(trim_to, bool) or not 1 <= trim_to <= limit:
        raise UserError(
            f"trim_to must be a whole number between 1 and {name} = {limit}, got {trim_to!r} "
            f"(leave it out for half of {name}; trim_to={limit} slides the window one message "
            "at a time)"
        )
    return trim_to


def check_cache_ttl(cache_ttl: object) -> float | None:
    """``cache_ttl`` in seconds (``None`` stays ``None``), else a :class:`~aniki.UserError`."""
    if cache_ttl is None:
        return None
    seconds = cache_ttl.total_seconds() if isinstance(cache_ttl, timedelta) else cache_ttl
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not math.isfinite(seconds)
        or seconds <= 0
    ):
        raise UserError(
            "cache_ttl must be the provider's prompt-cache lifetime, in seconds above 0 or a "
            f"timedelta (300 for Anthropic's default cache), got {cache_ttl!r}"
        )
    return float(seconds)


def check_session(inner: object) -> None:
    """A :class:`~aniki.UserError` unless ``inner`` has the session methods a policy uses."""
    missing = missing_methods(inner)
    if missing:
        raise UserError(
            f"a history policy wraps a Session or AsyncSession; "
            f"{type(inner).__name__} has no {missing[0]}() method"
        )


def check_clearing(value: object) -> ClearToolResults | None:
    """``clear_tool_results=``: ``True`` for the defaults, a :class:`ClearToolResults`, or
    ``None`` / ``False`` for none; anything else is a :class:`~aniki.UserError`."""
    if value is None or value is False:
        return None
    if value is True:
        return ClearToolResults()
    if isinstance(value, ClearToolResults):
        return value
    raise UserError(
        "clear_tool_results must be True, False, None or a ClearToolResults(keep_turns=..., "
        f"every=..., min_chars=...), got {value!r}"
    )
