"""Absurd but well-typed input to every store: huge limits and deeply nested meta values
give an answer or a ``UserError``, never an ``OverflowError`` or a ``RecursionError``."""

from __future__ import annotations

from typing import Any

import pytest

from aniki import Message, UserError
from aniki.sessions._args import MAX_LIMIT, check_limit
from aniki.sessions._codec import MAX_META_DEPTH

from .stores import Store

HISTORY = [Message("user", "one"), Message("assistant", "two"), Message("user", "three")]


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth - 1):
        value = [value]
    return [value] if depth else value


@pytest.mark.parametrize(
    ("limit", "expected"),
    [(None, None), (0, 0), (-1, 0), (-(2**70), 0), (5, 5), (2**63, MAX_LIMIT), (2**70, MAX_LIMIT)],
)
def test_check_limit_clamps_every_int(limit: int | None, expected: int | None) -> None:
    assert check_limit(limit) == expected


@pytest.mark.parametrize("bad", ["2", 2.0, True, [1]])
def test_check_limit_refuses_what_is_not_an_int(bad: object) -> None:
    with pytest.raises(UserError, match="limit must be an int or None"):
        check_limit(bad)


def test_huge_limits_and_deep_meta_on_every_store(store: Store) -> None:
    driver = store.opener.driver
    session = store.opener.open("limits")
    driver.add_messages(session, HISTORY)
    for limit in (2**62, 2**63, 2**64, 2**70, 10**100):
        assert driver.get_messages(session, limit) == HISTORY, limit
    for limit in (-1, -(2**63), -(2**70)):
        assert driver.get_messages(session, limit) == [], limit

    for depth in (MAX_META_DEPTH + 1, 100_000):
        with pytest.raises(UserError, match="nested more than"):
            driver.set_meta(session, "deep", nested(depth))
    assert driver.get_meta(session, "deep") is None  # nothing was stored
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(UserError):
        driver.set_meta(session, "loop", looped)
    deep_enough = {"summary": nested(MAX_META_DEPTH - 1)}
    driver.set_meta(session, "deep", deep_enough)
    assert driver.get_meta(session, "deep") == deep_enough
    shared = [1, 2]
    driver.set_meta(session, "shared", [shared, shared, {"x": shared}])
    assert driver.get_meta(session, "shared") == [[1, 2], [1, 2], {"x": [1, 2]}]
