"""What a session's reads saw, as a run's context reports need it: decided by what the
session can do, never by its class.

A history policy's ``get_messages()`` is a view of its store, so only the policy can say how
many messages the store holds and whether its view moved: it keeps that in ``_last_read``
(:class:`ReadsReported`). A store returns its whole history; one that also offers
``get_messages(limit=...)`` (every built-in store and its async twin, and
``EncryptedSession``) is known to be a store. Any other session may be a view of its own,
and its reads are not reported.

Pure, no I/O, and no message or token code: :mod:`aniki.reports` imports it when loaded.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["ReadInfo", "ReadsReported", "accepts_limit", "reads_of"]


@dataclass(frozen=True, slots=True)
class ReadInfo:
    """What a session's last read saw, for the run's context reports."""

    stored: int | None
    """How many messages the store held at that read (``None``: unknown)."""
    summarized: int = 0
    """How many of the oldest stored messages a summary stands for."""
    prefix_kept: bool = True
    """Whether the view starts where the previous read's did (the cut did not move)."""


@runtime_checkable
class ReadsReported(Protocol):
    """A session whose ``get_messages()`` is a view of a store (a history policy): it says
    what its last read saw (``None`` before the first)."""

    @property
    def _last_read(self) -> ReadInfo | None: ...


def accepts_limit(get_messages: Callable[..., Any] | None) -> bool:
    """Whether a store's ``get_messages`` takes ``limit=`` (the built-in stores all do)."""
    if get_messages is None:
        return False
    try:
        parameters = inspect.signature(get_messages).parameters
    except (TypeError, ValueError):
        return False
    return "limit" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )


def reads_of(session: object) -> Callable[[int], ReadInfo | None]:
    """How to learn what each read of ``session`` saw: called with how many stored messages
    the read returned, it gives the :class:`ReadInfo` (``None``: the session cannot tell)."""
    if isinstance(session, ReadsReported):
        return lambda returned: session._last_read
    if accepts_limit(getattr(session, "get_messages", None)):
        return lambda returned: ReadInfo(stored=returned)
    return lambda returned: None
