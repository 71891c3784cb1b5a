"""The conformance suite every session store must pass, for built-in and third-party stores.

Subclass :class:`SessionConformance` in a test module and override one method,
:meth:`~SessionConformance.session_factory`: it returns a *picklable* callable that builds
the session for an id, bound to one store, so that two calls with the same id share
history (on a persistent store). The suite drives sync :class:`~aniki.sessions.Session`
and async :class:`~aniki.sessions.AsyncSession` stores alike, and needs nothing but pytest.

Runnable example (save as ``test_my_store.py`` and run ``pytest``)::

    import functools

    from aniki.sessions import SQLiteSession
    from aniki.testing.conformance import SessionConformance


    class TestMyStore(SessionConformance):
        def session_factory(self):
            # self.tmp_path is a fresh directory for every test, removed afterwards.
            return functools.partial(SQLiteSession, path=self.tmp_path / "store.db")

Why picklable: the concurrency check starts 4 fresh Python processes (the ``spawn`` start
method, so it behaves the same on every platform) and sends each the factory. A class, a
``functools.partial`` of a class with picklable arguments, or a module-level function all
qualify; a lambda or a class defined inside a test function does not. Each child imports
the factory's module by name, so it must be importable in a fresh interpreter.

Switches (class attributes) for stores that do less than the built-in ones:

* ``shares_history_across_instances`` -- ``False`` for a store like ``InMemorySession``
  whose instances never share state: the sharing, restart and multi-process checks then
  assert that nothing is shared, or are skipped.
* ``supports_add_messages`` / ``supports_limit`` / ``supports_meta`` -- ``False`` when the
  store lacks ``add_messages(batch)``, ``get_messages(limit=...)`` or
  ``get_meta``/``set_meta``; the checks of that feature are skipped.
* ``supports_processes`` -- ``False`` when the store is not meant to be shared between
  processes.
* ``assigns_ids`` / ``supports_fork_and_undo`` -- ``True`` when the store gives each message
  an ``id`` and a ``created_at`` on write, and has ``fork(new_id, *, upto=None)`` and
  ``undo()``, as every built-in store does (both ``False`` by default, so a store written
  before these existed still passes).
* ``supports_info`` -- ``True`` when sessions have ``info()`` and ``set_info(title=...,
  owner=..., tags=...)``; override ``store_factory()`` to return the ``open_store(...)``
  store over the same data, and the listing, prune and delete checks run too.

What is checked: round trips of every message shape (unicode, emoji, NUL, 1 MB content,
tool calls with arguments that are not JSON, tool messages); snapshots; invalid messages
refused with :class:`~aniki.ValidationError` storing nothing; atomic batches; ``limit``;
``clear``; isolation between ids; sharing between instances of one id, including appends
and clears by another instance after this one has read; a restart; derived-state records;
awkward ids (stored safely or refused with an :class:`~aniki.AnikiError`); 4 processes
appending to one session at once (nothing lost or duplicated, each writer's order kept,
each batch contiguous, every reader's view only growing). With the switches on: ids and
times, kept through another instance; ``fork`` and ``undo``; info kept by writes, undo
and fork, bounds refused; ``list_sessions`` filters and pages; ``prune`` and
``delete_sessions`` removing whole sessions. Every id a check uses is unique to the run
and cleared afterwards, so the suite can run against a shared server.
"""

from __future__ import annotations

import pickle
from typing import Any

from ..errors import AnikiError, ValidationError
from ..messages import Message
from ..sessions.base import AsyncSession, Session
from ._conformance_catalog import CatalogChecks
from ._conformance_history import HistoryChecks
from ._conformance_support import (
    AnySession,
    ConformanceBase,
    SessionFactory,
    assert_batches_contiguous,
    large_messages,
    raises,
    run_writers,
    sample_messages,
    writer_message,
)

__all__ = ["AnySession", "SessionConformance", "SessionFactory"]

_INVALID: list[Any] = [
    {"role": "robot", "content": "hi"},
    {"role": "user", "content": ""},
    {"role": "user"},
    {"role": "user", "content": 5},
    {"role": "user", "content": "lone \ud800 surrogate"},
    {"role": "tool", "content": "no call id"},
    {"role": "user", "content": "x", "tool_call_id": "c1"},
    {"role": "user", "content": "x", "extra": 1},
    {"role": "assistant", "tool_calls": [{"id": "c", "name": "f", "arguments": 3}]},
    "just a string",
    None,
]

_AWKWARD_IDS = [
    "user@example.com",
    "a/b",
    "../../x",
    "..",
    "with space",
    "\u00fcn\u00ef\u00e7\u00f8d\u00e9 \U0001f600",
    "'; DROP TABLE messages; --",
    'quote"d',
    "a:b*?[]{}%_\\",
    "x" * 200,
]

_HOSTILE_IDS = ["", "nul\x00id", "x" * 10_000, "\n", "con", "A" * 300 + "/" + "b" * 300]


class SessionConformance(CatalogChecks, HistoryChecks, ConformanceBase):
    """Base class of the session-store conformance suite; see the module docstring.

    Example::

        class TestInMemory(SessionConformance):
            shares_history_across_instances = False

            def session_factory(self):
                return InMemorySession
    """

    # --- basics -----------------------------------------------------------------------

    def test_is_a_session_with_its_id(self) -> None:
        session_id = self.new_id()
        session = self.open(session_id)
        assert isinstance(session, (Session, AsyncSession))
        assert session.id == session_id
        assert self.read(session) == []

    def test_every_message_shape_round_trips(self) -> None:
        samples = sample_messages()
        session_id = self.new_id()
        session = self.open(session_id)
        self.add(session, *samples)
        assert self.read(session) == samples
        if self.shares_history_across_instances:
            assert self.read(self.open(session_id)) == samples

    def test_large_content_round_trips(self) -> None:
        big = large_messages()
        session_id = self.new_id()
        session = self.open(session_id)
        self.add(session, *big)
        assert self.read(session) == big
        if self.shares_history_across_instances:
            assert self.read(self.open(session_id)) == big

    def test_mappings_are_stored_as_messages(self) -> None:
        session = self.open(self.new_id())
        self.add(session, {"role": "user", "content": "Hi"})
        self.add(session, {"role": "assistant", "tool_calls": [{"id": "c1", "name": "f"}]})
        assert self.read(session) == [
            Message(role="user", content="Hi"),
            Message.from_dict({"role": "assistant", "tool_calls": [{"id": "c1", "name": "f"}]}),
        ]

    def test_get_messages_returns_a_snapshot(self) -> None:
        session = self.open(self.new_id())
        self.add(session, Message(role="user", content="one"))
        first = self.driver.run(session.get_messages())
        before = list(first)
        self.add(session, Message(role="user", content="two"))
        assert list(first) == before
        assert len(self.read(session)) == 2

    def test_invalid_messages_are_refused_and_nothing_is_stored(self) -> None:
        session_id = self.new_id()
        session = self.open(session_id)
        self.add(session, Message(role="user", content="kept"))
        for bad in _INVALID:
            with raises(ValidationError):
                self.driver.add_message(session, bad)
        assert self.read(session) == [Message(role="user", content="kept")]
        if self.shares_history_across_instances:
            assert self.read(self.open(session_id)) == [Message(role="user", content="kept")]

    # --- batches and limits -------------------------------------------------------------

    def test_add_messages_appends_in_order(self) -> None:
        self._need(self.supports_add_messages, "add_messages")
        session = self.open(self.new_id())
        samples = sample_messages()
        self.driver.add_messages(session, samples[:3])
        self.driver.add_messages(session, iter(samples[3:]))
        self.driver.add_messages(session, [])
        assert self.read(session) == samples

    def test_a_batch_with_one_invalid_message_stores_nothing(self) -> None:
        self._need(self.supports_add_messages, "add_messages")
        session_id = self.new_id()
        session = self.open(session_id)
        self.add(session, Message(role="user", content="before"))
        good = Message(role="user", content="good")
        for bad in (_INVALID[0], _INVALID[4], None):
            batch: list[Any] = [good, bad, good]
            with raises(ValidationError):
                self.driver.add_messages(session, batch)
        expected = [Message(role="user", content="before")]
        assert self.read(session) == expected
        if self.shares_history_across_instances:
            assert self.read(self.open(session_id)) == expected

    def test_limit_returns_the_most_recent_messages(self) -> None:
        self._need(self.supports_limit, "get_messages(limit=...)")
        session = self.open(self.new_id())
        assert self.read(session, limit=3) == []
        messages = [Message(role="user", content=f"m{i}") for i in range(5)]
        self.add(session, *messages)
        assert self.read(session, limit=2) == messages[-2:]
        assert self.read(session, limit=1) == messages[-1:]
        assert self.read(session, limit=5) == messages
        assert self.read(session, limit=50) == messages
        assert self.read(session, limit=0) == []
        assert self.read(session) == messages

    # --- clear and isolation ------------------------------------------------------------

    def test_clear_empties_the_session_and_it_stays_usable(self) -> None:
        session = self.open(self.new_id())
        self.driver.clear(session)
        self.add(session, Message(role="user", content="a"), Message(role="user", content="b"))
        self.driver.clear(session)
        assert self.read(session) == []
        self.add(session, Message(role="user", content="c"))
        assert self.read(session) == [Message(role="user", content="c")]

    def test_ids_are_isolated(self) -> None:
        names = ["a", "A", "a ", "ab", "a/b", "a%", "a_"]
        sessions = {name: self.open(self.new_id(name)) for name in names}
        for name, session in sessions.items():
            self.add(session, Message(role="user", content=f"for {name}"))
        self.driver.clear(sessions["a"])
        for name, session in sessions.items():
            expected = [] if name == "a" else [Message(role="user", content=f"for {name}")]
            assert self.read(session) == expected, name

    # --- sharing between instances ------------------------------------------------------

    def test_same_id_shares_history_only_on_shared_stores(self) -> None:
        session_id = self.new_id()
        first, second = self.open(session_id), self.open(session_id)
        self.add(first, Message(role="user", content="from first"))
        self.add(second, Message(role="user", content="from second"))
        if not self.shares_history_across_instances:
            assert self.read(first) == [Message(role="user", content="from first")]
            assert self.read(second) == [Message(role="user", content="from second")]
            return
        both = [
            Message(role="user", content="from first"),
            Message(role="user", content="from second"),
        ]
        assert self.read(first) == both
        assert self.read(second) == both

    def test_appends_by_another_instance_are_seen_after_reading(self) -> None:
        self._need(self.shares_history_across_instances, "sharing between instances")
        session_id = self.new_id()
        reader, writer = self.open(session_id), self.open(session_id)
        expected: list[Message] = []
        for step in range(3):
            assert self.read(reader) == expected
            batch = [Message(role="user", content=f"{step}.{i}") for i in range(step + 1)]
            self.add(writer, *batch)
            expected += batch
        assert self.read(reader) == expected
        if self.supports_limit:
            self.add(writer, Message(role="assistant", content="last"))
            assert self.read(reader, limit=1) == [Message(role="assistant", content="last")]

    def test_a_clear_by_another_instance_is_seen_after_reading(self) -> None:
        self._need(self.shares_history_across_instances, "sharing between instances")
        session_id = self.new_id()
        reader, writer = self.open(session_id), self.open(session_id)
        old = [Message(role="user", content=f"old {i}") for i in range(3)]
        self.add(writer, *old)
        assert self.read(reader) == old
        self.driver.clear(writer)
        assert self.read(reader) == []
        self.add(writer, *old)
        assert self.read(reader) == old
        # Cleared and refilled between two reads, with as many messages as before and more.
        for count in (3, 5):
            new = [Message(role="user", content=f"new {count}.{i}") for i in range(count)]
            self.driver.clear(writer)
            self.add(writer, *new)
            assert self.read(reader) == new

    def test_a_new_instance_sees_everything_after_a_restart(self) -> None:
        self._need(self.shares_history_across_instances, "sharing between instances")
        session_id = self.new_id()
        samples = sample_messages()
        session = self.open(session_id, remember=True)
        self.add(session, *samples)
        if self.supports_meta:
            self.driver.set_meta(session, "summary", {"text": "so far", "upto": 3})
        self.driver.release(session)
        self._opened.remove(session)
        del session
        fresh = self.open(session_id)
        assert self.read(fresh) == samples
        if self.supports_meta:
            assert self.driver.get_meta(fresh, "summary") == {"text": "so far", "upto": 3}

    # --- derived state ------------------------------------------------------------------

    def test_meta_round_trips_and_none_deletes(self) -> None:
        self._need(self.supports_meta, "get_meta/set_meta")
        session_id = self.new_id()
        session = self.open(session_id)
        assert self.driver.get_meta(session, "missing") is None
        values: dict[str, Any] = {
            "summary": {"text": "\u00e9\U0001f600 nul\x00", "upto": 12, "ok": True},
            "list": [1, 2.5, "x", None, [], {}],
            "number": 7,
            "text": "plain",
            "key with spaces/\u00fc": False,
        }
        for key, value in values.items():
            self.driver.set_meta(session, key, value)
        self.driver.set_meta(session, "number", 8)
        values["number"] = 8
        for key, value in values.items():
            assert self.driver.get_meta(session, key) == value, key
        self.driver.set_meta(session, "text", None)
        assert self.driver.get_meta(session, "text") is None
        if self.shares_history_across_instances:
            other = self.open(session_id)
            assert self.driver.get_meta(other, "summary") == values["summary"]
            assert self.driver.get_meta(other, "text") is None

    def test_meta_is_per_session_and_cleared_with_it(self) -> None:
        self._need(self.supports_meta, "get_meta/set_meta")
        one, two = self.open(self.new_id("one")), self.open(self.new_id("two"))
        self.driver.set_meta(one, "summary", "of one")
        self.driver.set_meta(two, "summary", "of two")
        self.add(one, Message(role="user", content="hi"))
        self.driver.clear(one)
        assert self.driver.get_meta(one, "summary") is None
        assert self.driver.get_meta(two, "summary") == "of two"

    # --- ids ----------------------------------------------------------------------------

    def test_awkward_ids_work_and_stay_apart(self) -> None:
        sessions = [self.open(self.new_id(name)) for name in _AWKWARD_IDS]
        for index, session in enumerate(sessions):
            self.add(session, Message(role="user", content=f"#{index}"))
        for index, session in enumerate(sessions):
            assert self.read(session) == [Message(role="user", content=f"#{index}")]

    def test_hostile_ids_are_stored_safely_or_refused_clearly(self) -> None:
        plain = self.open(self.new_id("plain"))
        self.add(plain, Message(role="user", content="plain"))
        for name in _HOSTILE_IDS:
            session_id = f"conformance-{self._run_tag}-{name}" if name else ""
            try:
                session: AnySession = self.session_factory()(session_id)
                self._opened.append(session)
                self.add(session, Message(role="user", content="hostile"))
            except AnikiError:
                continue  # refused clearly
            assert self.read(session) == [Message(role="user", content="hostile")]
            self.driver.clear(session)
        assert self.read(plain) == [Message(role="user", content="plain")]

    # --- processes ----------------------------------------------------------------------

    def test_processes_appending_at_once_lose_nothing_and_keep_order(self) -> None:
        self._need(self.shares_history_across_instances, "sharing between instances")
        self._need(self.supports_processes, "several processes")
        factory = self.session_factory()
        try:
            pickle.dumps(factory)
        except Exception as exc:
            raise AssertionError(
                f"session_factory() must return a picklable callable for the multi-process "
                f"check (a class or functools.partial, not a lambda): {exc}"
            ) from exc
        session_id = self.new_id("shared")
        errors = run_writers(
            factory,
            session_id,
            self.processes,
            self.messages_per_process,
            self.supports_add_messages,
        )
        assert not errors, "\n".join(errors)
        history = self.read(self.open(session_id))
        assert len(history) == self.processes * self.messages_per_process
        for writer in range(self.processes):
            mine = [m for m in history if m.content.startswith(f"w{writer}:")]
            expected = [writer_message(writer, i) for i in range(self.messages_per_process)]
            assert mine == expected, f"writer {writer}: lost, duplicated or reordered"
        if self.supports_add_messages:
            assert_batches_contiguous(history, self.messages_per_process)
