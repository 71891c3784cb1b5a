"""Where a stepped window's cut is kept: every store, new objects, restarts, clears, neighbours.

The cut is derived state in the store's per-session meta. These checks hold that a new policy
object (or a new store object on the same data: another process, a restart) reads the same
view; that clearing or replacing the history starts it afresh; that policies with different
limits over one store keep a cut each; and that a read never fetches more than the window.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from aniki import Message
from aniki.sessions.policies import TokenBudgetSession, WindowedSession
from aniki.tokens import EstimatingCounter

from .histories import assistant, expected_start, result, stepped_views, user
from .stores import Store, resolve

COUNTER = EstimatingCounter()


def ONE(message: Message) -> int:
    return 1


def conversation(turns: int, start: int = 0) -> list[Message]:
    """Turns of a question, sometimes a tool call and its result, and an answer."""
    messages: list[Message] = []
    for t in range(start, start + turns):
        messages.append(user(f"question {t} " + "why " * (t % 4)))
        if t % 3 == 1:
            messages += [assistant("", f"call{t}"), result(f"call{t}", f"found {t}")]
        messages.append(assistant(f"answer {t} " + "because " * (t % 5)))
    return messages


def texts(messages: Any) -> list[str]:
    return [m.content for m in messages]


async def view(policy: Any) -> tuple[Message, ...]:
    return tuple(await resolve(policy.get_messages()))


async def test_a_new_object_and_a_reopened_store_read_the_same_view(store: Store) -> None:
    inner = store.open("cut-shared")
    first = WindowedSession(inner, 6)
    history = conversation(12)
    oracle = stepped_views(history, 6, 3, ONE)
    assert sum(moved for _, moved in oracle) >= 3  # the conversation moves the cut a few times
    for count, message in enumerate(history, start=1):
        await resolve(first.add_message(message))
        seen = await view(first)
        assert seen == tuple(history[oracle[count - 1][0] : count])
        if not store.has_meta:
            continue  # the cut lives in `first` only
        again = WindowedSession(store.open(inner.id) if store.persistent else inner, 6)
        assert await view(again) == seen


async def test_clearing_or_replacing_the_history_starts_the_cut_afresh(store: Store) -> None:
    inner = store.open("cut-clear")
    policy = WindowedSession(inner, 6)
    await resolve(policy.add_messages(conversation(10)))
    assert len(await view(policy)) <= 6
    await resolve(inner.clear())  # behind the policy's back
    fresh = conversation(2, start=50)
    for message in fresh:
        await resolve(inner.add_message(message))
    assert await view(policy) == tuple(fresh)  # the whole new history fits: no old cut
    await resolve(policy.clear())
    assert await view(policy) == ()
    replace = getattr(inner, "_replace", None)
    if replace is None:
        return
    await resolve(policy.add_messages(conversation(10)))
    await view(policy)
    new = conversation(9, start=100)
    await resolve(replace(new))  # what `aniki sessions import --replace` does
    for reader in (policy, WindowedSession(inner, 6)):
        assert await view(reader) == tuple(new[expected_start(new, 3, ONE) :])


async def test_policies_with_different_limits_keep_a_cut_each(store: Store) -> None:
    inner = store.open("cut-neighbours")
    policies = {
        (6, 3): WindowedSession(inner, 6),
        (6, 6): WindowedSession(inner, 6, trim_to=6),
        (9, 3): WindowedSession(inner, 9, trim_to=3),
    }
    budget = TokenBudgetSession(inner, 80, counter=COUNTER)
    history = conversation(14)
    oracles = {limits: stepped_views(history, *limits, ONE) for limits in policies}
    budget_oracle = stepped_views(history, 80, 40, COUNTER.count_message)
    for count, message in enumerate(history, start=1):
        await resolve(inner.add_message(message))
        for limits, policy in policies.items():
            assert await view(policy) == tuple(history[oracles[limits][count - 1][0] : count])
        assert await view(budget) == tuple(history[budget_oracle[count - 1][0] : count])
    keys = {policy.cut_key for policy in policies.values()} | {budget.cut_key}
    assert len(keys) == 4
    if store.has_meta:
        for limits, policy in policies.items():
            record = await resolve(inner.get_meta(policy.cut_key))
            # A one-step slide follows from the history alone: it keeps no cut.
            assert (record is None) == (limits[0] == limits[1])
        assert await resolve(inner.get_meta(budget.cut_key)) is not None


class Recording:
    """A store seen through a proxy that writes down every read's ``limit``."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.limits: list[int | None] = []

    @property
    def id(self) -> str:
        return str(self._inner.id)

    def get_messages(self, limit: int | None = None) -> Any:
        self.limits.append(limit)
        return self._inner.get_messages(limit=limit)

    def __getattr__(self, name: str) -> Any:
        if name == "_add_then_get":
            raise AttributeError(name)  # every read goes through get_messages
        return getattr(self._inner, name)


@pytest.mark.parametrize("make", ["windowed", "budget"])
async def test_a_read_fetches_the_window_not_the_history(store: Store, make: str) -> None:
    if store.kind == "plain":
        pytest.skip("a store without get_messages(limit=) is always read whole")
    inner = Recording(store.open(f"cut-reads-{make}"))

    def policy() -> Any:
        if make == "windowed":
            return WindowedSession(inner, 10)
        return TokenBudgetSession(inner, 150, counter=COUNTER)

    reader = policy()
    longest = 0
    for turn in range(60):
        await resolve(inner.add_messages(conversation(1, start=turn)))  # type: ignore[attr-defined]
        longest = max(longest, len(await view(reader)))
        if turn % 20 == 19:
            assert await view(policy()) == await view(reader)  # new objects: same view
    assert None not in inner.limits
    # The view plus the message before it and room for a turn or two; doubled at most once
    # while a fresh object finds its cut.
    assert max(inner.limits) <= 2 * (longest + 1 + 16)


async def test_an_unreadable_stored_cut_is_ignored(store: Store) -> None:
    if not store.has_meta:
        pytest.skip("no meta")
    inner = store.open("cut-garbage")
    policy = WindowedSession(inner, 4)
    history = conversation(6)
    await resolve(policy.add_messages(history))
    await resolve(inner.set_meta(policy.cut_key, {"version": 1, "first": 5}))
    fresh = history[expected_start(history, 2, ONE) :]
    assert await view(WindowedSession(inner, 4)) == tuple(fresh)


def test_another_process_reads_the_same_view(tmp_path: Path) -> None:
    from aniki.sessions import SQLiteSession

    db = tmp_path / "cut.db"
    session = WindowedSession(SQLiteSession("shared", db), 6)

    # A conversation whose view is not what a fresh start would choose (trim_to from the end).
    def differs(h: list[Message]) -> bool:
        return stepped_views(h, 6, 3, ONE)[-1][0] != expected_start(h, 3, ONE)

    turns = next(n for n in range(6, 30) if differs(conversation(n)))
    for message in conversation(turns):
        session.add_message(message)
        session.get_messages()
    child = (
        "import json, sys\n"
        "from aniki.sessions import SQLiteSession, WindowedSession\n"
        "view = WindowedSession(SQLiteSession('shared', sys.argv[1]), 6).get_messages()\n"
        "print(json.dumps([m.content for m in view]))\n"
    )
    output = subprocess.run(
        [sys.executable, "-c", child, str(db)], capture_output=True, text=True, timeout=60
    )
    assert output.returncode == 0, output.stderr
    mine = texts(session.get_messages())
    assert json.loads(output.stdout) == mine
    # With no record of the cut, a new object would start afresh from trim_to: not this view.
    history = SQLiteSession("shared", db).get_messages()
    assert mine != texts(history[expected_start(history, 3, ONE) :])
