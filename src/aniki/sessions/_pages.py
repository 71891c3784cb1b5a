"""Paged reads of a stored session: :func:`read_page` and the :class:`Page` it returns, and
:func:`read_named_page`, whose :class:`NamedPage` names the attachments without their bytes.

A built-in store reads a page through its sessions' ``_page`` method (the
:class:`~aniki.sessions._capabilities.Pages` capability): only the rows asked for (plus
whatever index work the store needs), all in one consistent snapshot, so the total and the
messages agree even while another process appends. Any other session is read whole with
``get_messages()`` and sliced.

A store keeps attachment bytes apart from the records that name them (see ``_blobs``). A
page read to be shown (the inspector, ``aniki sessions show``) names them instead of loading
them: ``_page(start, limit)`` takes no option, so :func:`read_named_page` says so for the
length of its one call (:func:`naming`), and each store's page reader asks. A session whose
``_page`` does not ask (or that has none) is read as usual, and its attachments described
from the bytes read.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ._blobs import AttachmentRef, Described, described_message
from ._capabilities import capabilities_of
from ._reads import Page

__all__ = [
    "REACH",
    "NamedPage",
    "Page",
    "named_page",
    "naming",
    "read_named_page",
    "read_page",
    "span",
    "window",
]

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


@dataclass(frozen=True, slots=True)
class NamedPage(Page):
    """A :class:`Page` whose attachments are named, not loaded.

    Its messages carry no attachments (a user message of an image alone then has neither
    content nor attachments: it is for showing, never for sending or storing);
    ``attachments[i]`` names each attachment of ``messages[i]``, in order.
    """

    attachments: tuple[tuple[AttachmentRef, ...], ...]


_NAMING: ContextVar[bool] = ContextVar("aniki_naming_attachments", default=False)


def naming() -> bool:
    """Whether the page being read names its attachments (a store's page reader then reads
    no blob, and returns a :class:`NamedPage`): inside :func:`read_named_page` only."""
    return _NAMING.get()


def named_page(total: int, start: int, found: Iterable[Described]) -> NamedPage:
    """The :class:`NamedPage` of these messages, each with what names its attachments."""
    pairs = tuple(found)
    return NamedPage(
        total,
        start,
        tuple(message for message, _ in pairs),
        tuple(refs for _, refs in pairs),
    )


def read_named_page(session: Any, start: int, limit: int) -> NamedPage:
    """:func:`read_page`, the attachments named (media type, size, hash, name or URL) rather
    than loaded: a built-in store reads no attachment bytes, so a page of a history full of
    images costs what its text costs.

    Raises what :func:`read_page` raises.
    """
    token = _NAMING.set(True)
    try:
        page = read_page(session, start, limit)
    finally:
        _NAMING.reset(token)
    if isinstance(page, NamedPage):
        return page
    return named_page(page.total, page.start, map(described_message, page.messages))


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
