"""The run journal: what a run with side effects has done, kept in its session's store so
that each tool call happens once across crashes, restarts, workers and resumes.

A run writes its journal entry when its model first asks for tools (a run that only talks
writes nothing). The entry lives in the session's derived state under :data:`KEY`, one JSON
value for all of the session's runs, changed only by compare-and-swap (``_swap_meta``, which
every built-in store has), so of two workers only one can take a run or a call:

* before tools run, the model's response and a claim on each call are recorded in one step;
* each tool's result is recorded as soon as it returns, before the turn is stored;
* a turn stopped for approval keeps its entry as *held*, bound to the session and to the
  last stored message (an undo, a clear, a later turn or a fork makes it unresumable);
* the run's end marks the entry done (kept among the session's last :data:`KEEP_DONE`, so a
  second resume of the same turn is refused rather than run again).

An entry names its holder (host, process id and start time, a random token) and a lease.
A holder that died is seen at once on its own machine (its process is gone) and, from
another machine, once its lease ran out: ``Runner.recover`` then finishes the run. A call
recorded with a result is never run again; one claimed without a result may have run: it
runs again only if its tool is ``idempotent``, else the model is told the outcome is
unknown. (:mod:`aniki._run.recovery` does that.)
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import random
import socket
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import CorruptStoreError, RunInProgressError, StoreUnavailableError
from ..messages import Message
from ..sessions import _session_io as session_io
from ..sessions._capabilities import capabilities_of
from . import steps

__all__ = [
    "KEEP_DONE",
    "KEY",
    "LEASE",
    "Journal",
    "RunInfo",
    "holder_alive",
    "journal_of",
    "release",
    "runs_in",
    "runs_of",
]

KEY = "aniki.runs"
"""The meta key of a session's run journal."""

LEASE = 60.0
"""Seconds a holder's claim stands after its last write, seen from another machine."""

KEEP_DONE = 16
"""Ended runs a session's journal remembers (so that they are not run again)."""

_VERSION = 1
_TRIES = 64


def _process_start() -> str:
    """This process's start time as the kernel counts it ('' where unknown)."""
    try:
        with open(f"/proc/{os.getpid()}/stat", encoding="ascii") as stat:
            return stat.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


_HOST = socket.gethostname()
_STARTS: dict[int, str] = {}
"""This process's start time, by process id (a forked child has its own)."""


def _holder() -> dict[str, Any]:
    pid = os.getpid()
    start = _STARTS.get(pid)
    if start is None:
        start = _STARTS[pid] = _process_start()
    return {"host": _HOST, "pid": pid, "start": start}


_SEEN: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()
"""By store object: the journal value this process last wrote there."""

_ACTIVE: set[str] = set()
"""The tokens of the journals this process's runs hold now."""


def release(token: str | None) -> None:
    """The run holding ``token`` in this process has ended (whatever its journal says)."""
    _ACTIVE.discard(token or "")


def holder_alive(holder: Any, until: Any, token: Any = None) -> bool:
    """Whether the holder of an entry may still be working on it."""
    if not isinstance(holder, dict):
        return False
    if holder.get("host") == _HOST and isinstance(holder.get("pid"), int):
        pid = holder["pid"]
        if pid == os.getpid():
            return token in _ACTIVE
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        if holder.get("start"):
            try:
                with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
                    started = stat.read().rsplit(")", 1)[1].split()[19]
            except (OSError, IndexError):
                return False
            return bool(started == holder["start"])
        return True
    return isinstance(until, (int, float)) and until > time.time()


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One run of a session's journal, as ``aniki runs list`` shows it."""

    run_id: str
    state: str
    """``"running"`` (its holder works on it), ``"cut"`` (its holder died: ``recover``
    finishes it), ``"held"`` (waiting for approval) or ``"done"``."""
    agent: str
    updated: float
    """When the entry last changed (seconds since the epoch)."""
    calls: tuple[tuple[str, str, str], ...] = ()
    """``(call id, tool name, "done" | "claimed" | "waiting")`` of its unstored turns."""


class Journal:
    """The journal entry of one run, in the store that keeps ``session``'s meta."""

    def __init__(self, session: Any, owner: Any, run_id: str) -> None:
        self.session = session
        self.session_id = str(session.id)
        self.run_id = run_id
        self._owner = owner
        self._can = capabilities_of(owner)
        self.token = os.urandom(8).hex()
        self.durable = False
        """Whether a durable executor runs the run: a replay of it may find the entry as
        its first attempt left it, and takes it over."""
        self._known: Any = None
        self._read = False
        with contextlib.suppress(KeyError, TypeError):  # the value last written here:
            self._known, self._read = _SEEN[owner], True  # a swap against it needs no read

    # -- the whole value, changed by compare-and-swap --------------------------------------

    async def load(self) -> dict[str, Any]:
        """The session's journal as stored now."""
        get = self._can.get_meta
        assert get is not None
        value = await session_io.call(self._can.blocking, lambda: get(KEY))
        self._known, self._read = value, True
        return _checked(value, self.session_id)

    async def change(self, edit: Callable[[dict[str, Any]], Any]) -> Any:
        """Apply ``edit`` to a copy of the journal and store it, as one compare-and-swap
        (again on a lost race); ``edit`` returns what this returns, or raises to change
        nothing."""
        for attempt in range(_TRIES):
            if not self._read:
                await self.load()
            before = self._known
            state = _checked(before, self.session_id)
            state = {"v": _VERSION, "runs": {k: dict(v) for k, v in state["runs"].items()}}
            answer = edit(state)
            _prune(state)
            if await self._swap(before, state):
                self._known = state
                with contextlib.suppress(TypeError):  # not weakly referable: not kept
                    _SEEN[self._owner] = state
                return answer
            self._read = False
            await asyncio.sleep(random.uniform(0, 0.002 * (attempt + 1)))
        raise StoreUnavailableError(
            f"the run journal of session {self.session_id!r} changed under every one of "
            f"{_TRIES} tries; nothing was changed"
        )

    def try_now(self, edit: Callable[[dict[str, Any]], Any]) -> bool:
        """:meth:`change` as one try in the calling thread, against the value last read or
        written here, for a store whose calls block (from its worker thread); whether it
        took. It raises nothing: on any failure, :meth:`change` is the way."""
        swap = self._can.swap_meta
        if swap is None or not self._can.blocking or not self._read:
            return False
        before = self._known
        try:
            state = _checked(before, self.session_id)
            state = {"v": _VERSION, "runs": {k: dict(v) for k, v in state["runs"].items()}}
            edit(state)
            _prune(state)
            done = swap(KEY, before, state)
        except Exception:  # change() tries again, and reports it
            return False
        if inspect.iscoroutine(done):  # a store that looked synchronous but is not
            done.close()
            return False
        if done is not True:
            return False
        self._known = state
        with contextlib.suppress(TypeError):
            _SEEN[self._owner] = state
        return True

    async def _swap(self, before: Any, after: dict[str, Any]) -> bool:
        swap, put = self._can.swap_meta, self._can.set_meta
        if swap is not None:
            done = await session_io.call(self._can.blocking, lambda: swap(KEY, before, after))
            return bool(done)
        assert put is not None  # a store without compare-and-swap: last writer wins
        await session_io.call(self._can.blocking, lambda: put(KEY, after))
        return True

    # -- this run's entry ------------------------------------------------------------------

    def mine(self, state: dict[str, Any]) -> dict[str, Any]:
        """This run's entry, held by this journal; else :class:`RunInProgressError`."""
        entry: dict[str, Any] | None = state["runs"].get(self.run_id)
        if entry is not None and self.durable:
            entry["token"] = self.token
        if entry is None or entry.get("token") != self.token:
            raise RunInProgressError(self.run_id, self.session_id, "its claim was taken over")
        entry["until"] = time.time() + LEASE
        entry["updated"] = time.time()
        return entry

    def take(
        self, state: dict[str, Any], entry: dict[str, Any] | None, agent: str
    ) -> dict[str, Any]:
        """Make this journal the holder of the run (a fresh entry when ``entry`` is None)."""
        taken = dict(entry or {"state": "running", "agent": agent, "turns": []})
        _ACTIVE.add(self.token)
        taken.update(
            state="running",
            session=self.session_id,
            holder=_holder(),
            token=self.token,
            until=time.time() + LEASE,
            updated=time.time(),
        )
        state["runs"][self.run_id] = taken
        return taken

    def refuse_if_held(self, entry: dict[str, Any] | None) -> None:
        """:class:`RunInProgressError` when ``entry`` is a run someone else still works on."""
        if (
            entry is not None
            and entry.get("state") == "running"
            and entry.get("token") != self.token
            and holder_alive(entry.get("holder"), entry.get("until"), entry.get("token"))
        ):
            raise RunInProgressError(self.run_id, self.session_id)


def journal_of(session: Any, run_id: str, *, held: bool = False) -> Journal | None:
    """The journal of run ``run_id`` in ``session``'s store; ``None`` when the store keeps
    no derived state, or a durable executor keeps the run's journal instead. With ``held``
    (a turn held for approval, and its resume), also under a durable executor: the turn is
    kept here, and the executor, which runs each run once, is its only holder
    (:attr:`Journal.durable`)."""
    durable = steps.current() is not None
    if durable and not held:
        return None
    found = session
    for _ in range(8):
        can = capabilities_of(found)
        if can.get_meta is not None and can.set_meta is not None:
            journal = Journal(session, found, run_id)
            journal.durable = durable
            return journal
        found = can.inner
        if found is None:
            return None
    return None


async def runs_of(session: Any) -> list[RunInfo]:
    """The runs ``session``'s journal remembers, the newest first."""
    journal = journal_of(session, "", held=True)
    if journal is None:
        return []
    return runs_in(await journal.load(), journal.session_id)


def runs_in(value: Any, session_id: str) -> list[RunInfo]:
    """The runs a stored journal ``value`` of session ``session_id`` remembers, the newest
    first (``CorruptStoreError`` for a value this version cannot read)."""
    state = _checked(value, session_id)
    found = [
        _info(run_id, entry)
        for run_id, entry in state["runs"].items()
        if entry.get("session", session_id) == session_id  # not a copy a fork made
    ]
    return sorted(found, key=lambda info: -info.updated)


def _info(run_id: str, entry: dict[str, Any]) -> RunInfo:
    state = str(entry.get("state", "done"))
    if state == "running" and not holder_alive(
        entry.get("holder"), entry.get("until"), entry.get("token")
    ):
        state = "cut"
    calls: list[tuple[str, str, str]] = []
    for turn in entry.get("turns", ()):
        response = Message.from_dict(turn["response"])
        done = turn.get("calls", {})
        for call in response.tool_calls:
            record = done.get(call.id)
            shown = "waiting" if record is None else ("done" if record.get("result") else "claimed")
            calls.append((call.id, call.name, shown))
    return RunInfo(
        run_id, state, str(entry.get("agent", "")), float(entry.get("updated", 0)), tuple(calls)
    )


def _checked(value: Any, session_id: str) -> dict[str, Any]:
    """The journal ``value`` holds (an empty one for ``None``); ``CorruptStoreError`` for a
    value this version cannot read."""
    if value is None:
        return {"v": _VERSION, "runs": {}}
    if (
        not isinstance(value, dict)
        or value.get("v") != _VERSION
        or not isinstance(value.get("runs"), dict)
        or not all(isinstance(entry, dict) for entry in value["runs"].values())
    ):
        raise CorruptStoreError(
            f"the run journal of session {session_id!r} ({KEY!r}) cannot be read: written by "
            "a newer aniki, or changed by hand"
        )
    return value


def _prune(state: dict[str, Any]) -> None:
    """Forget all but the newest :data:`KEEP_DONE` ended runs."""
    ended = [k for k, v in state["runs"].items() if v.get("state") == "done"]
    if len(ended) > KEEP_DONE:
        ended.sort(key=lambda k: float(state["runs"][k].get("updated", 0)))
        for run_id in ended[: len(ended) - KEEP_DONE]:
            del state["runs"][run_id]
