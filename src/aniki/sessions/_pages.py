"""Paged reads of a stored session: :func:`read_page` and the :class:`Page` it returns.

A built-in store reads a page through its sessions' ``_page`` method (the
:class:`~aniki.sessions._capabilities.Pages` capability): only the rows asked for (plus
whatever index work the store needs), all in one consistent snapshot, so the total and the
messages agree even while another process appends. Any other session is read whole with
``get_messages()`` and sliced.
"""

from __future__ import annotations

from typing import Any

from ._capabilities import Page, capabilities_of

__all__ = ["REACH", "Page", "read_page", "span", "window"]

REACH = 2**52
"""How far :func:`span` lets a bound reach: past any store's largest history, yet exact in
every store's arithmetic (a Lua number is a double, exact to 2**53)."""


def read_page(session: Any, start: int, limit: int) -> Page:
    """Messages ``start`` to ``start + limit`` of a sync session, in one consistent read.

    A negative ``start`` counts from the end: ``read_page(session, -50, 50)`` is the last
    50. The page is clipped to the history: a ``start`` past the end gives no messages (and
    the right total); ``start=-50`` on a session of 30 gives all 30.

    Built-in stores read only the page (see each store's ``_page``); any other session is
    read whole with ``get_messages()`` and sliced.

    Raises:
        TypeError: ``start`` or ``limit`` is not an int.
        ValueError: ``limit`` is negative.
    """
    for name, value in (("start", start), ("limit", limit)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if limit < 0:
        raise ValueError(
            f"limit must be 0 or more (the number of messages to read), got {limit}; "
            "to read backwards from the end, pass a negative start instead"
        )
    start, limit = int(start), int(limit)
    page = capabilities_of(session).page
    if page is not None:
        return page(start, limit)
    history = tuple(session.get_messages())
    first, stop = window(start, limit, len(history))
    return Page(len(history), first, history[first:stop])


def span(start: int, limit: int) -> tuple[int, int]:
    """``start`` and ``start + limit`` (``limit`` 0 or more), each held within
    ``±REACH``: what a store whose numbers are bounded is sent. Read against a history,
    they mean the same as the originals (no history holds ``REACH`` messages)."""
    return _clamp(start, -REACH, REACH), _clamp(start + limit, -REACH, REACH)


def window(start: int, limit: int, total: int) -> tuple[int, int]:
    """``(first, stop)``: the indexes of a history of ``total`` messages that
    ``read_page(start, limit)`` returns, ``history[first:stop]``.

    The window ``start ... start + limit`` (a negative ``start`` counted from ``total``)
    clipped to ``0 ... total``.
    """
    low, high = span(start, limit)
    base = total if start < 0 else 0
    return _clamp(base + low, 0, total), _clamp(base + high, 0, total)


def _clamp(value: int, low: int, high: int) -> int:
    return min(max(value, low), high)
