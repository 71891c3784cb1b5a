"""The conformance suite itself: it passes correct stores (sync and async) and fails broken ones."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from aniki import Message, MessageLike
from aniki.messages import to_message
from aniki.testing.conformance import SessionConformance, SessionFactory

_STORE: dict[str, list[Message]] = {}
_META: dict[str, dict[str, Any]] = {}


class DictSession:
    """A correct store over a dict shared by the whole process."""

    def __init__(self, id: str) -> None:
        self.id = id

    def add_message(self, message: MessageLike) -> None:
        _STORE.setdefault(self.id, []).append(to_message(message))

    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        batch = [to_message(message) for message in messages]
        _STORE.setdefault(self.id, []).extend(batch)

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        items = tuple(_STORE.get(self.id, ()))
        if limit is None:
            return items
        return items[-limit:] if limit > 0 else ()

    def clear(self) -> None:
        _STORE.pop(self.id, None)
        _META.pop(self.id, None)

    def get_meta(self, key: str) -> Any:
        return _META.get(self.id, {}).get(key)

    def set_meta(self, key: str, value: Any) -> None:
        if value is None:
            _META.get(self.id, {}).pop(key, None)
        else:
            _META.setdefault(self.id, {})[key] = value


class AsyncDictSession:
    """The same store, asynchronous."""

    def __init__(self, id: str) -> None:
        self.id = id
        self._inner = DictSession(id)

    async def add_message(self, message: MessageLike) -> None:
        self._inner.add_message(message)

    async def add_messages(self, messages: Iterable[MessageLike]) -> None:
        self._inner.add_messages(messages)

    async def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        return self._inner.get_messages(limit)

    async def clear(self) -> None:
        self._inner.clear()

    async def get_meta(self, key: str) -> Any:
        return self._inner.get_meta(key)

    async def set_meta(self, key: str, value: Any) -> None:
        self._inner.set_meta(key, value)

    async def aclose(self) -> None:
        pass


class TestDictSession(SessionConformance):
    supports_processes = False

    def session_factory(self) -> SessionFactory:
        return DictSession


class TestAsyncDictSession(SessionConformance):
    supports_processes = False

    def session_factory(self) -> SessionFactory:
        return AsyncDictSession


class TestMinimalFourMethodStore(SessionConformance):
    """A store with only the protocol's four members runs the checks that apply."""

    supports_add_messages = supports_limit = supports_meta = supports_processes = False

    def session_factory(self) -> SessionFactory:
        return MinimalSession


class MinimalSession:
    def __init__(self, id: str) -> None:
        self.id = id

    def add_message(self, message: MessageLike) -> None:
        _STORE.setdefault(self.id, []).append(to_message(message))

    def get_messages(self) -> tuple[Message, ...]:
        return tuple(_STORE.get(self.id, ()))

    def clear(self) -> None:
        _STORE.pop(self.id, None)


# --- broken stores, each caught by a check -------------------------------------------------


class HalfBatch(DictSession):
    def add_messages(self, messages: Iterable[MessageLike]) -> None:
        for message in messages:  # stores the good ones before the bad one raises
            self.add_message(message)


class StaleCache(DictSession):
    def __init__(self, id: str) -> None:
        super().__init__(id)
        self._seen: tuple[Message, ...] | None = None

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        if self._seen is None:
            self._seen = super().get_messages()
        return self._seen if limit is None else self._seen[-limit:]


class CountingCache(DictSession):
    """Fetches only 'the items after the ones it has': blind to a clear and refill."""

    def __init__(self, id: str) -> None:
        super().__init__(id)
        self._seen: list[Message] = []

    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        self._seen += _STORE.get(self.id, [])[len(self._seen) :]
        return tuple(self._seen) if limit is None else tuple(self._seen[-limit:])


class NoValidation(DictSession):
    def add_message(self, message: MessageLike) -> None:
        try:
            super().add_message(message)
        except ValueError:
            _STORE.setdefault(self.id, []).append(Message(role="user", content=str(message)))


class LimitFromStart(DictSession):
    def get_messages(self, limit: int | None = None) -> tuple[Message, ...]:
        items = super().get_messages()
        return items if limit is None else items[:limit]


class NothingShared(DictSession):
    instances = 0

    def __init__(self, id: str) -> None:
        NothingShared.instances += 1
        super().__init__(f"{id}-{NothingShared.instances}")


class KeepsMetaAfterClear(DictSession):
    def clear(self) -> None:
        _STORE.pop(self.id, None)


class MangledUnicode(DictSession):
    def add_message(self, message: MessageLike) -> None:
        message = to_message(message)
        text = message.content.encode("utf-8").decode("latin-1") if message.content else ""
        super().add_message(
            Message(
                role=message.role,
                content=text or "x",
                tool_calls=message.tool_calls,
                tool_call_id=message.tool_call_id,
            )
        )


def _failure(store: type, check: str) -> AssertionError | None:
    case_class = type("Case", (SessionConformance,), {"session_factory": lambda self: store})
    case = case_class()
    case.setup_method(None)
    try:
        getattr(case, check)()
    except AssertionError as exc:
        return exc
    finally:
        case.teardown_method(None)
    return None


@pytest.mark.parametrize(
    ("store", "check"),
    [
        (HalfBatch, "test_a_batch_with_one_invalid_message_stores_nothing"),
        (StaleCache, "test_appends_by_another_instance_are_seen_after_reading"),
        (CountingCache, "test_a_clear_by_another_instance_is_seen_after_reading"),
        (NoValidation, "test_invalid_messages_are_refused_and_nothing_is_stored"),
        (LimitFromStart, "test_limit_returns_the_most_recent_messages"),
        (NothingShared, "test_same_id_shares_history_only_on_shared_stores"),
        (NothingShared, "test_a_new_instance_sees_everything_after_a_restart"),
        (KeepsMetaAfterClear, "test_meta_is_per_session_and_cleared_with_it"),
        (MangledUnicode, "test_every_message_shape_round_trips"),
    ],
)
def test_a_broken_store_fails_the_check_that_covers_its_fault(store: type, check: str) -> None:
    assert _failure(DictSession, check) is None  # the check passes a correct store
    assert _failure(store, check) is not None


def test_a_factory_that_cannot_be_pickled_is_reported_clearly() -> None:
    case_class = type(
        "Case", (SessionConformance,), {"session_factory": lambda self: lambda id: DictSession(id)}
    )
    case = case_class()
    case.setup_method(None)
    try:
        with pytest.raises(AssertionError, match="picklable"):
            case.test_processes_appending_at_once_lose_nothing_and_keep_order()
    finally:
        case.teardown_method(None)


def test_a_store_missing_session_factory_says_what_to_override() -> None:
    case = SessionConformance()
    case.setup_method(None)
    try:
        with pytest.raises(NotImplementedError, match="session_factory"):
            case.test_is_a_session_with_its_id()
    finally:
        case.teardown_method(None)
