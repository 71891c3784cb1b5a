"""The conformance checks of conversations as an app keeps them: a session's info
(``info()`` / ``set_info()``), and a store's listing, prune and delete. Part of
:class:`~aniki.testing.conformance.SessionConformance`, switched on by
:attr:`CatalogChecks.supports_info` and :meth:`CatalogChecks.store_factory`."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any, ClassVar

from ..errors import UserError
from ..messages import Message
from ..sessions.base import SessionInfo
from ._conformance_support import AnySession, ConformanceBase, raises

__all__ = ["CatalogChecks"]

_GAP = 0.25  # seconds between writes whose order or age a check tells apart


class CatalogChecks(ConformanceBase):
    """Info, listing, prune and delete (every built-in store has them)."""

    supports_info: ClassVar[bool] = False
    """Whether sessions have ``info()`` and ``set_info(title=..., owner=..., tags=...)``."""

    def store_factory(self) -> Any:
        """An ``open_store(...)`` store (sync or async, not yet opened) over the same data
        as :meth:`session_factory`, for the listing, prune and delete checks; ``None`` (the
        default) skips them."""
        return None

    # --- plumbing -----------------------------------------------------------------------

    def info(self, session: AnySession) -> SessionInfo:
        """The :class:`SessionInfo` of ``session``, sync or async alike."""
        found = self.driver.run(session.info())  # type: ignore[union-attr]
        assert isinstance(found, SessionInfo), f"info() returned {type(found).__name__}"
        return found

    def set_info(self, session: AnySession, **changes: Any) -> None:
        """Set the title, owner or tags of ``session``, sync or async alike."""
        self.driver.run(session.set_info(**changes))  # type: ignore[union-attr]

    def _store(self) -> Any:
        store = self.store_factory()
        self._need(store is not None, "a store object (list_sessions, prune, delete)")
        if hasattr(store, "aclose"):
            self.driver.run(store.open())
        self._stores.append(store)
        return store

    def _from_store(self, store: Any, name: str) -> AnySession:
        session_id = self.new_id(name)
        self._ids.add(session_id)
        session: AnySession = store.session(session_id)
        return session

    def teardown_method(self, method: Any) -> None:
        try:
            for store in getattr(self, "_stores", []):
                self.driver.run(store.aclose() if hasattr(store, "aclose") else store.close())
        finally:
            super().teardown_method(method)

    def setup_method(self, method: Any) -> None:
        super().setup_method(method)
        self._stores: list[Any] = []

    # --- a session's info ---------------------------------------------------------------

    def test_a_new_session_has_empty_info(self) -> None:
        self._need(self.supports_info, "info()")
        session_id = self.new_id()
        info = self.info(self.open(session_id))
        assert info == SessionInfo(session_id, 0, None)

    def test_writes_set_the_times_and_the_count(self) -> None:
        self._need(self.supports_info, "info()")
        session = self.open(self.new_id())
        since = datetime.now(timezone.utc) - timedelta(seconds=1)
        self.add(session, Message("user", "hi"), Message("assistant", "hello"))
        first = self.info(session)
        assert first.message_count == 2
        assert first.created_at is not None and first.updated_at is not None
        assert first.created_at.utcoffset() == timedelta(0)
        assert since <= first.created_at <= first.updated_at
        assert first.updated_at <= datetime.now(timezone.utc) + timedelta(seconds=1)
        time.sleep(_GAP)
        self.add(session, Message("user", "again"))
        second = self.info(session)
        assert second.message_count == 3 and second.created_at == first.created_at
        assert second.updated_at is not None and second.updated_at > first.updated_at

    def test_set_info_changes_only_what_it_names(self) -> None:
        self._need(self.supports_info, "set_info()")
        session_id = self.new_id()
        session = self.open(session_id)
        self.set_info(session, title="Trip to Kyoto", owner="user-7")
        self.set_info(session, tags=["travel", "b", "travel"])
        info = self.info(session)
        assert (info.title, info.owner, info.tags) == ("Trip to Kyoto", "user-7", ("b", "travel"))
        assert info.message_count == 0 and info.created_at is not None
        self.set_info(session, title=None)
        info = self.info(session)
        assert (info.title, info.owner, info.tags) == (None, "user-7", ("b", "travel"))
        self.set_info(session, owner=None, tags=())
        info = self.info(session)
        assert (info.title, info.owner, info.tags) == (None, None, ())
        if self.shares_history_across_instances:
            self.set_info(session, title='Tokyo \U0001f5fc "quoted" <b>x</b>')
            assert self.info(self.open(session_id)).title == 'Tokyo \U0001f5fc "quoted" <b>x</b>'

    def test_bad_info_is_refused_and_nothing_changes(self) -> None:
        self._need(self.supports_info, "set_info()")
        session = self.open(self.new_id())
        self.set_info(session, title="kept", owner="u", tags=["t"])
        before = self.info(session)
        for bad in (
            {"title": "x" * 1001},
            {"title": 5},
            {"owner": ""},
            {"owner": "nul\x00"},
            {"tags": "single-string"},
            {"tags": ["ok", ""]},
            {"tags": [f"t{n}" for n in range(51)]},
        ):
            with raises(UserError):
                self.set_info(session, **bad)
        assert self.info(session) == before

    def test_clear_removes_the_info_with_the_history(self) -> None:
        self._need(self.supports_info, "info()")
        session_id = self.new_id()
        session = self.open(session_id)
        self.add(session, Message("user", "hi"))
        self.set_info(session, title="t", owner="o", tags=["x"])
        self.driver.clear(session)
        assert self.info(session) == SessionInfo(session_id, 0, None)

    def test_undo_and_fork_keep_the_info_in_step(self) -> None:
        forks = getattr(self, "supports_fork_and_undo", False)
        self._need(self.supports_info and forks, "info() with undo and fork")
        session = self.open(self.new_id())
        self.set_info(session, title="t", owner="o", tags=["x"])
        self.add(session, Message("user", "one"), Message("assistant", "1"))
        self.add(session, Message("user", "two"), Message("assistant", "2"))
        before = self.info(session)
        time.sleep(_GAP)
        self.driver.run(session.undo())  # type: ignore[union-attr]
        after = self.info(session)
        assert after.message_count == 2 and after.title == "t"
        assert after.updated_at is not None and before.updated_at is not None
        assert after.updated_at > before.updated_at
        child_id = self.new_id("child")
        self._ids.add(child_id)
        child = self.driver.run(session.fork(child_id))  # type: ignore[union-attr]
        self._opened.append(child)
        copied = self.info(child)
        assert (copied.id, copied.message_count) == (child_id, 2)
        assert (copied.title, copied.owner, copied.tags) == ("t", "o", ("x",))
        assert copied.created_at is not None and copied.created_at >= after.updated_at

    # --- a store's listing --------------------------------------------------------------

    def _three(self, store: Any, owner: str) -> list[AnySession]:
        """Three sessions of ``owner``, written in order ``_GAP`` apart; the second has info
        and no messages, the third the tag ``"pinned"``."""
        made = []
        for index in range(3):
            session = self._from_store(store, f"list-{index}")
            if index == 1:
                self.set_info(session, owner=owner, title="only info")
            else:
                self.set_info(session, owner=owner, tags=["pinned"] if index == 2 else [])
                self.add(session, Message("user", f"question {index}"))
            made.append(session)
            time.sleep(_GAP)
        return made

    def test_list_sessions_by_owner_newest_first(self) -> None:
        self._need(self.supports_info, "info()")
        store = self._store()
        owner = self.new_id("owner")
        made = self._three(store, owner)
        other = self._from_store(store, "other-owner")
        self.set_info(other, owner=self.new_id("someone-else"))
        self.add(other, Message("user", "not listed"))
        listed = self.driver.run(store.list_sessions(owner=owner))
        assert [info.id for info in listed] == [s.id for s in reversed(made)]
        assert [info.message_count for info in listed] == [1, 0, 1]
        assert listed[1].title == "only info" and listed[0].tags == ("pinned",)
        assert all(info.owner == owner for info in listed)
        assert listed == [self.info(session) for session in reversed(made)]

    def test_list_sessions_by_tag_and_time_in_pages(self) -> None:
        self._need(self.supports_info, "info()")
        store = self._store()
        owner = self.new_id("owner")
        made = self._three(store, owner)
        tagged = self.driver.run(store.list_sessions(tag="pinned", owner=owner))
        assert [info.id for info in tagged] == [made[2].id]
        middle = self.info(made[1]).updated_at
        recent = self.driver.run(store.list_sessions(owner=owner, updated_after=middle))
        assert [info.id for info in recent] == [made[2].id]
        pages, cursor = [], None
        while True:
            page = self.driver.run(store.list_sessions(owner=owner, limit=2, cursor=cursor))
            pages.append([info.id for info in page])
            if len(page) < 2:
                break
            cursor = page[-1]
        assert pages == [[made[2].id, made[1].id], [made[0].id]]

    def test_listing_refuses_bad_queries(self) -> None:
        self._need(self.supports_info, "info()")
        store = self._store()
        for bad in (
            {"limit": 0},
            {"owner": ""},
            {"updated_after": datetime(2026, 1, 1)},  # naive: its zone is unknown
            {"cursor": "abc"},
            {"order": "created"},
        ):
            with raises(UserError):
                self.driver.run(store.list_sessions(**bad))

    # --- retention ----------------------------------------------------------------------

    def test_prune_removes_old_sessions_whole_and_keeps_the_rest(self) -> None:
        self._need(self.supports_info, "info()")
        store = self._store()
        owner = self.new_id("owner")
        old = self._from_store(store, "old")
        self.set_info(old, owner=owner, title="old")
        self.add(old, Message("user", "old question"), Message("assistant", "old answer"))
        if self.supports_meta:
            self.driver.set_meta(old, "summary", {"covered": 1})
        time.sleep(2 * _GAP)
        cut = datetime.now(timezone.utc)
        time.sleep(2 * _GAP)
        fresh = self._from_store(store, "fresh")
        self.set_info(fresh, owner=owner)
        self.add(fresh, Message("user", "fresh question"))
        age = datetime.now(timezone.utc) - cut
        removed = self.driver.run(store.prune(older_than=age, owner=owner))
        assert removed == 1
        again = self.open(old.id)
        if self.shares_history_across_instances:
            assert self.read(again) == [] and self.info(again) == SessionInfo(old.id, 0, None)
            if self.supports_meta:
                assert self.driver.get_meta(again, "summary") is None
        assert [m.content for m in self.read(store.session(fresh.id))] == ["fresh question"]
        listed = self.driver.run(store.list_sessions(owner=owner))
        assert [info.id for info in listed] == [fresh.id]
        assert self.driver.run(store.prune(older_than=age, owner=owner)) == 0

    def test_delete_sessions_removes_every_session_of_an_owner(self) -> None:
        self._need(self.supports_info, "info()")
        store = self._store()
        owner, keeper = self.new_id("owner"), self.new_id("keeper")
        for index in range(5):
            session = self._from_store(store, f"gone-{index}")
            self.set_info(session, owner=owner)
            if index % 2:
                self.add(session, Message("user", f"q{index}"))
        kept = self._from_store(store, "kept")
        self.set_info(kept, owner=keeper)
        self.add(kept, Message("user", "still here"))
        assert self.driver.run(store.delete_sessions(owner=owner)) == 5
        assert self.driver.run(store.list_sessions(owner=owner)) == []
        assert [info.id for info in self.driver.run(store.list_sessions(owner=keeper))] == [kept.id]
        with raises(UserError):
            self.driver.run(store.delete_sessions(owner=""))
        with raises(UserError):
            self.driver.run(store.prune(older_than=timedelta(0)))
