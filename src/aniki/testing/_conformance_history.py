"""The conformance checks of message identity and history edits: ids and times assigned
on write, ``fork`` and ``undo``. Part of :class:`~aniki.testing.conformance.SessionConformance`."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

from ..errors import UserError
from ..messages import Message, ToolCall
from ..reports import ContextReport, ContextTokens
from ..usage import Usage
from ._conformance_support import ConformanceBase, raises

__all__ = ["HistoryChecks"]

_CLAIM_KEY = "aniki.summary.claim"  # a reader's claim on making a summary: never forked


def _turns() -> list[Message]:
    call = ToolCall(id="call_1", name="add", arguments='{"a": 1, "b": 2}')
    cached = Usage(input_tokens=40, output_tokens=5, requests=1, cache_read_tokens=32)
    return [
        Message("user", "first question"),
        Message("assistant", "first answer", model="m-1", usage=Usage(input_tokens=9, requests=1)),
        Message("user", "second question"),
        Message("assistant", tool_calls=(call,), model="m-1", usage=Usage(requests=1)),
        Message("tool", "3", tool_call_id="call_1"),
        Message(
            "assistant",
            "second answer",
            model="m-2",
            usage=cached,
            context=ContextReport(
                stored_messages=5,
                sent_messages=5,
                summarized_messages=0,
                tokens=ContextTokens(instructions=12, tools=30, history=80),
                prefix_kept=True,
                usage=cached,
            ),
        ),
    ]


def _metadata(messages: list[Message]) -> list[tuple[Any, ...]]:
    return [(m.id, m.created_at, m.model, m.usage, m.context) for m in messages]


class HistoryChecks(ConformanceBase):
    """Ids, times, fork and undo; switched on by :attr:`assigns_ids` and
    :attr:`supports_fork_and_undo` (every built-in store sets both)."""

    assigns_ids: ClassVar[bool] = False
    """Whether the store gives every message it stores an ``id`` and a ``created_at``."""
    supports_fork_and_undo: ClassVar[bool] = False
    """Whether the store has ``fork(new_id, *, upto=None)`` and ``undo()``."""

    # --- ids and times ------------------------------------------------------------------

    def test_the_store_assigns_ids_and_times_and_keeps_model_and_usage(self) -> None:
        """The store also keeps the ``context`` report an assistant message carries."""
        self._need(self.assigns_ids, "message ids")
        session_id = self.new_id()
        session = self.open(session_id)
        turns = _turns()
        since = datetime.now(timezone.utc) - timedelta(seconds=1)
        self.add(session, *turns)
        stored = self.read(session)
        until = datetime.now(timezone.utc) + timedelta(seconds=1)
        assert stored == turns  # equality ignores the metadata
        assert all(message.id is None for message in turns)  # the caller's objects unchanged
        ids = [message.id for message in stored]
        assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids)
        for message in stored:
            assert message.created_at is not None and message.created_at.utcoffset() is not None
            assert since <= message.created_at <= until
        kept = [(m.model, m.usage, m.context) for m in stored]
        assert kept == [(m.model, m.usage, m.context) for m in turns]
        if self.shares_history_across_instances:
            assert _metadata(self.read(self.open(session_id))) == _metadata(stored)
        # A message read back and added again is a new message, with an id of its own.
        self.add(session, stored[0])
        again = self.read(session)
        assert again[-1] == stored[0] and again[-1].id not in ids
        assert _metadata(again[:-1]) == _metadata(stored)

    # --- fork ---------------------------------------------------------------------------

    def test_fork_copies_the_history_and_then_goes_its_own_way(self) -> None:
        self._need(self.supports_fork_and_undo, "fork()")
        session = self.open(self.new_id())
        self.add(session, *_turns())
        if self.supports_meta:
            self.driver.set_meta(session, "summary", {"covered": 2})
            self.driver.set_meta(session, _CLAIM_KEY, {"owner": "x"})
        original = self.read(session)
        child_id = self.new_id("child")
        self._ids.add(child_id)
        child = self.driver.run(session.fork(child_id))  # type: ignore[union-attr]
        self._opened.append(child)
        assert type(child) is type(session) and child.id == child_id
        copied = self.read(child)
        assert copied == original and _metadata(copied) == _metadata(original)
        if self.supports_meta:
            assert self.driver.get_meta(child, "summary") == {"covered": 2}
            assert self.driver.get_meta(child, _CLAIM_KEY) is None
        self.add(child, Message("user", "only in the fork"))
        self.add(session, Message("user", "only in the original"))
        assert [m.content for m in self.read(child)][-1] == "only in the fork"
        assert [m.content for m in self.read(session)][-1] == "only in the original"
        assert len(self.read(session)) == len(self.read(child)) == len(original) + 1
        if self.shares_history_across_instances:
            assert self.read(self.open(child_id)) == self.read(child)

    def test_fork_upto_keeps_the_history_through_that_message(self) -> None:
        self._need(self.supports_fork_and_undo and self.assigns_ids, "fork(upto=...)")
        session = self.open(self.new_id())
        self.add(session, *_turns())
        stored = self.read(session)
        for upto in (0, 1, 4):
            child_id = self.new_id(f"upto-{upto}")
            self._ids.add(child_id)
            child = self.driver.run(session.fork(child_id, upto=stored[upto].id))  # type: ignore[union-attr]
            self._opened.append(child)
            copied = self.read(child)
            assert copied == stored[: upto + 1]
            assert _metadata(copied) == _metadata(stored[: upto + 1])
        assert self.read(session) == stored

    def test_fork_refuses_a_bad_target_and_changes_nothing(self) -> None:
        self._need(self.supports_fork_and_undo, "fork()")
        session_id = self.new_id()
        session = self.open(session_id)
        self.add(session, Message("user", "mine"))
        with raises(UserError):
            self.driver.run(session.fork(session_id))  # type: ignore[union-attr]
        missing_id = self.new_id("never")
        self._ids.add(missing_id)
        with raises(UserError):
            self.driver.run(session.fork(missing_id, upto="no-such-message"))  # type: ignore[union-attr]
        assert self.read(self.open(missing_id)) == []
        if self.shares_history_across_instances:
            taken_id = self.new_id("taken")
            taken = self.open(taken_id)
            self.add(taken, Message("user", "already here"))
            with raises(UserError):
                self.driver.run(session.fork(taken_id))  # type: ignore[union-attr]
            assert self.read(self.open(taken_id)) == [Message("user", "already here")]
            # A session that was cleared holds nothing: it may be forked into.
            self.driver.clear(taken)
            forked = self.driver.run(session.fork(taken_id))  # type: ignore[union-attr]
            self._opened.append(forked)
            assert self.read(taken) == [Message("user", "mine")]
        assert self.read(session) == [Message("user", "mine")]

    # --- undo ---------------------------------------------------------------------------

    def test_undo_removes_the_last_turn_and_returns_it(self) -> None:
        self._need(self.supports_fork_and_undo, "undo()")
        session_id = self.new_id()
        session = self.open(session_id)
        turns = _turns()
        self.add(session, *turns)
        stored = self.read(session)
        other = self.open(session_id)
        if self.shares_history_across_instances:
            assert self.read(other) == stored  # its cache now holds the whole history
        removed = list(self.driver.run(session.undo()))  # type: ignore[union-attr]
        assert removed == turns[2:] and _metadata(removed) == _metadata(stored[2:])
        assert self.read(session) == turns[:2]
        if self.shares_history_across_instances:
            assert self.read(other) == turns[:2]
            assert self.read(self.open(session_id)) == turns[:2]
        self.add(session, Message("user", "asked again"))
        assert self.read(session) == [*turns[:2], Message("user", "asked again")]
        assert list(self.driver.run(session.undo())) == [Message("user", "asked again")]  # type: ignore[union-attr]
        assert list(self.driver.run(session.undo())) == turns[:2]  # type: ignore[union-attr]
        assert self.read(session) == []
        assert list(self.driver.run(session.undo())) == []  # type: ignore[union-attr]

    def test_undo_of_a_history_without_a_user_message_removes_nothing(self) -> None:
        self._need(self.supports_fork_and_undo, "undo()")
        session = self.open(self.new_id())
        kept = [Message("system", "rules"), Message("assistant", "hello")]
        self.add(session, *kept)
        assert list(self.driver.run(session.undo())) == []  # type: ignore[union-attr]
        assert self.read(session) == kept

    def test_undo_splits_a_batch_that_holds_the_last_user_message(self) -> None:
        self._need(self.supports_fork_and_undo and self.supports_add_messages, "undo()")
        session_id = self.new_id()
        session = self.open(session_id)
        batch = [Message("user", "a"), Message("assistant", "b"), Message("user", "c")]
        self.driver.add_messages(session, [*batch, Message("assistant", "d")])
        assert [m.content for m in self.driver.run(session.undo())] == ["c", "d"]  # type: ignore[union-attr]
        assert self.read(session) == batch[:2]
        if self.shares_history_across_instances:
            assert self.read(self.open(session_id)) == batch[:2]
        self.add(session, Message("user", "e"))
        assert [m.content for m in self.read(session)] == ["a", "b", "e"]
