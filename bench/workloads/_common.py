"""What every workload shares: the run's scale, its result rows and targets, timing helpers."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from peers import Peer, StoreSpec
from peers.base import Durability, StoreKind
from peers.servers import ServerMissing

ScaleName = Literal["full", "quick", "smoke"]


@dataclass(frozen=True)
class Scale:
    """How big each workload runs. ``full`` is the real comparison; ``smoke`` only proves the
    harness still works (CI); ``quick`` is in between, for a look while developing."""

    name: ScaleName
    repeats: int
    """Repetitions of each measurement; the table shows medians."""
    turns: int
    """Workload 1: turns of the long conversation."""
    appends: int
    """Workload 2: single-message appends per measurement."""
    history_sizes: tuple[int, ...]
    """Workload 3: stored history lengths (messages)."""
    import_samples: int
    """Workload 4: fresh interpreters per package."""
    conversations: int
    """Workload 5: conversations at once."""
    conversation_turns: int
    """Workload 5: turns per conversation."""
    model_delay: float
    """Workload 5: seconds the scripted model sleeps per call."""
    economy_turns: int
    """Workload 6: turns of the managed conversation."""
    spawn_peers: bool = True
    """Workload 3: read the peers' cold figures in new processes (the smoke run reads them
    in-process: importing a peer takes seconds)."""


SCALES: dict[ScaleName, Scale] = {
    "full": Scale("full", 3, 500, 2000, (10_000, 100_000), 7, 200, 5, 0.050, 500),
    "quick": Scale("quick", 2, 150, 500, (2_000, 20_000), 3, 200, 5, 0.050, 150),
    "smoke": Scale("smoke", 1, 6, 20, (400,), 1, 10, 2, 0.005, 30, spawn_peers=False),
}


@dataclass
class Context:
    """One harness run: its scale, the frameworks, a scratch directory and a server namespace."""

    scale: Scale
    peers: list[Peer]
    tmp: Path
    namespace: str
    log: Callable[[str], None] = field(default=lambda text: print(text, file=sys.stderr))

    def store(
        self,
        kind: StoreKind,
        name: str = "",
        *,
        durability: Durability = "full",
        cleanup: bool = True,
        namespace_suffix: str = "",
    ) -> StoreSpec:
        """A :class:`StoreSpec` for this run (files under ``tmp``; servers under ``namespace``)."""
        from peers.servers import POSTGRES_DSN, REDIS_URL

        location = {
            "memory": "",
            "sqlite": str(self.tmp / f"{name or 'bench'}.db"),
            "file": str(self.tmp / (name or "files")),
            "redis": REDIS_URL,
            "postgres": POSTGRES_DSN,
        }[kind]
        if kind == "file":
            Path(location).mkdir(parents=True, exist_ok=True)
        namespace = f"{self.namespace}_{namespace_suffix}" if namespace_suffix else self.namespace
        return StoreSpec(kind, location, durability, namespace, cleanup)


@dataclass(frozen=True)
class Target:
    """What aniki must reach on a row: a bound on its own figure or on a ratio to a column."""

    text: str
    """How the table states it."""
    column: str | None
    """``None``: the bound is on aniki's figure; else on aniki's figure over that column's."""
    at_most: float | None = None
    at_least: float | None = None

    def met(self, row: Row) -> bool | None:
        """Whether the row meets it (``None`` when a figure it needs is missing)."""
        value = row.values.get("aniki") if self.column is None else row.ratio(self.column)
        if value is None:
            return None
        if self.at_most is not None and value > self.at_most:
            return False
        return not (self.at_least is not None and value < self.at_least)


def aniki_at_most(limit: float, text: str) -> Target:
    return Target(text, None, at_most=limit)


def ratio_at_most(column: str, limit: float, text: str) -> Target:
    return Target(text, column, at_most=limit)


def ratio_at_least(column: str, limit: float, text: str) -> Target:
    return Target(text, column, at_least=limit)


@dataclass
class Row:
    """One measure: a figure per column (a framework, or ``raw`` for a bare driver)."""

    measure: str
    unit: str
    values: dict[str, float] = field(default_factory=dict)
    target: Target | None = None

    def ratio(self, column: str) -> float | None:
        """aniki's figure over ``column``'s, when both exist."""
        mine, theirs = self.values.get("aniki"), self.values.get(column)
        if mine is None or theirs is None or theirs == 0:
            return None
        return mine / theirs


@dataclass
class Section:
    """A workload's outcome: its rows, and notes on what was skipped and why."""

    number: int
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    skipped: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    """(framework or column, reason) -> where it was not measured."""
    missing_servers: list[str] = field(default_factory=list)
    """Notes about servers that did not answer (the smoke test fails on them under CI)."""

    def row(self, measure: str, unit: str, target: Target | None = None) -> Row:
        """The row named ``measure``, created on first use (keeps insertion order)."""
        for existing in self.rows:
            if existing.measure == measure:
                return existing
        made = Row(measure, unit, target=target)
        self.rows.append(made)
        return made

    def skip(self, who: str, reason: Exception, where: str = "") -> None:
        """Record that ``who`` (a framework or column) was not measured ``where``, and why."""
        places = self.skipped.setdefault((who, str(reason)), [])
        if where and where not in places:
            places.append(where)
        if isinstance(reason, ServerMissing):
            text = f"{who}: {reason}"
            if text not in self.missing_servers:
                self.missing_servers.append(text)

    def all_notes(self) -> list[str]:
        """The notes, then one line per skipped framework and reason, naming where."""
        lines = list(self.notes)
        for (who, reason), places in self.skipped.items():
            lines.append(
                f"{who} not measured{' for ' + ', '.join(places) if places else ''}: {reason}"
            )
        return lines


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def check_history(framework: str, turn: int, seen: int, expected: int) -> None:
    """Fail loudly when a framework did not send the history it should have (it would look
    fast for the wrong reason)."""
    if seen != expected:
        raise AssertionError(
            f"{framework} sent {seen} history messages to the model at turn {turn}, "
            f"expected {expected}: the comparison would be unfair"
        )
