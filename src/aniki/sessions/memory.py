"""``InMemorySession``: history held in this process only."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import Any

from ..memory import Memory
from ..messages import Message, MessageLike
from ._args import check_meta_key, check_session_id
from ._catalog import KEEP, Keep, apply_change, check_info
from ._codec import encode_meta
from ._edits import FORK_SKIPPED_META, fork_target, forked_count
from ._guard import admit
from ._pages import Page, window
from .base import SessionInfo

__all__ = ["InMemorySession", "meta_json"]


def meta_json(key: str, value: Any) -> str | None:
    """``value`` as canonical JSON text (keys sorted), the form ``_swap_meta`` compares;
    ``None`` stays ``None`` (an absent key). Equal texts mean equal JSON values of equal
    types: ``1``, ``1.0`` and ``true`` differ, key order does not matter.
    :class:`~aniki.UserError` when ``value`` is not JSON-safe."""
    if value is None:
        return None
    encode_meta(key, value)  # the error every store gives for a value that is not JSON-safe
    return json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, allow_nan=False
    )


class InMemorySession:
    """A session kept in this process's memory, lost when the process exits.

    Two instances never share state, even with the same id: the id is a label, not a key
    into shared storage. Use :class:`~aniki.SQLiteSession` (or another persistent store)
    when a conversation must survive a restart.

    Example::

        session = InMemorySession("s1")
        session.add_message({"role": "user", "content": "Hi"})
        session.get_messages()  # (Message(role='user', content='Hi', ...),)
        session.clear()
        session.get_messages()  # ()
    """

    blocking = False  # no I/O: called inline, on the event loop

    def __init__(self, id: str | None = None) -> None:
        self._id = check_session_id(id) if id is not None else uuid.uuid4().hex
        self._memory = Memory()
        self._meta: dict[str, Any] = {}
        self._meta_lock = threading.Lock()
        # Removals bump the generation, and each write checks it under the lock (a run's
        # guard, see _guard): an undo from another thread cannot slip in between.
        self._lock = threading.Lock()
        self._generation = 0
        self._info = SessionInfo(self._id, 0, None)

    @property
    def id(self) -> str:
        """The session's label (a fresh unique string when none was given)."""
        return self._id

    def add_message(self, message: MessageLike) -> None:
        """Validate and append one message."""
        with self._lock:
            admit(self, self._generation)
            self._memory.add_message(message)
            self._touch()

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        """Validate all, then append all: a bad message stores none of the batch."""
        with self._lock:
            admit(self, self._generation)
            before = len(self._memory)
            self._memory.add_messages(messages)
            if len(self._memory) != before:
                self._touch()

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        """The history, oldest first; with ``limit``, only the most recent ``limit``."""
        return self._memory.get_messages(limit)

    def _page(self, start: int, limit: int) -> Page:
        """Messages ``start`` to ``start + limit``, as :func:`~aniki.sessions._pages.read_page`."""
        history = self._memory.get_messages()
        first, stop = window(start, limit, len(history))
        return Page(len(history), first, history[first:stop])

    def clear(self) -> None:
        """Delete the history and any derived state (such as a stored summary)."""
        with self._lock:
            self._memory.clear()
            self._generation += 1
            self._info = SessionInfo(self._id, 0, None)
        self._meta.clear()

    def fork(self, new_id: str, *, upto: str | None = None) -> InMemorySession:
        """A new session ``new_id`` holding a copy of this history through the message whose
        id is ``upto`` (all of it when ``None``), ids and times kept, and its derived state
        (except a reader's claim on making the next summary).

        The copy is a separate object: like every ``InMemorySession``, it shares nothing.

        Raises:
            UserError: ``new_id`` is this session's id, or no message has the id ``upto``.
        """
        target = fork_target(self._id, new_id)
        count = forked_count(self._memory.get_messages(), upto, self._id)
        forked = InMemorySession(target)
        forked._memory = self._memory.copy(count)
        now = datetime.now(timezone.utc)
        forked._info = SessionInfo(
            target, 0, now, self._info.title, self._info.owner, self._info.tags, now
        )
        with self._meta_lock:
            forked._meta = {
                key: json.loads(json.dumps(value))
                for key, value in self._meta.items()
                if key not in FORK_SKIPPED_META
            }
        return forked

    def undo(self) -> tuple[Message, ...]:
        """Remove the last turn (the last user message and everything after it) and return
        it, oldest first; ``()``, removing nothing, when no user message is held."""
        with self._lock:
            removed = self._memory.undo()
            if removed:
                self._generation += 1
                self._touch()
        return removed

    def info(self) -> SessionInfo:
        """What this conversation is: its title, owner, tags, message count and times
        (``created_at`` and ``updated_at`` are ``None`` until it is first written)."""
        with self._lock:
            return SessionInfo(
                self._id,
                len(self._memory),
                self._info.updated_at,
                self._info.title,
                self._info.owner,
                self._info.tags,
                self._info.created_at,
            )

    def set_info(
        self,
        *,
        title: str | Keep | None = KEEP,
        owner: str | Keep | None = KEEP,
        tags: Iterable[str] | Keep = KEEP,
    ) -> None:
        """Set the conversation's ``title``, ``owner`` (a user id) or ``tags``; a keyword
        left out is left as it is, ``None`` (``()`` for tags) removes it. Counts as a write:
        ``updated_at`` moves.

        Raises:
            UserError: a title of more than 1000 characters, an empty owner or tag, more
                than 50 tags (see the limits in docs/sessions.md).
        """
        change = check_info(title=title, owner=owner, tags=tags)
        with self._lock:
            self._info = apply_change(self._info, change, datetime.now(timezone.utc))

    def _touch(self) -> None:
        # A write at now (under self._lock): created_at on the first, updated_at on each.
        now = datetime.now(timezone.utc)
        created = self._info.created_at or now
        self._info = SessionInfo(
            self._id, 0, now, self._info.title, self._info.owner, self._info.tags, created
        )

    def get_meta(self, key: str) -> Any:
        """The derived-state value stored under ``key`` (``None`` when absent)."""
        return self._meta.get(check_meta_key(key))

    def set_meta(self, key: str, value: Any) -> None:
        """Store derived state (a JSON-safe value) beside the history; ``None`` deletes.

        The value is kept as the persistent stores keep it: checked to be JSON-safe
        (:class:`~aniki.UserError` if not) and copied, so a later change to the object
        passed in changes nothing stored, and tuples read back as lists.
        """
        check_meta_key(key)
        with self._meta_lock:
            if value is None:
                self._meta.pop(key, None)
            else:
                self._meta[key] = json.loads(encode_meta(key, value))

    def _swap_meta(self, key: str, expected: Any, value: Any) -> bool:
        """Set meta ``key`` to ``value`` only if it now holds ``expected``; whether it did.

        Atomic among threads. Values are compared as JSON (same types and values, any key
        order); ``expected=None`` means the key is absent, and ``value=None`` deletes it.
        """
        check_meta_key(key)
        wanted = meta_json(key, expected)
        stored = None if value is None else json.loads(encode_meta(key, value))
        with self._meta_lock:
            if meta_json(key, self._meta.get(key)) != wanted:
                return False
            if stored is None:
                self._meta.pop(key, None)
            else:
                self._meta[key] = stored
            return True

    def __repr__(self) -> str:
        return f"InMemorySession(id={self._id!r}, messages={len(self._memory)})"
