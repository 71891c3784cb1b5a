"""The benchmark workloads, one module each, in the order the table shows them.

Each module has ``NUMBER``, ``TITLE`` and ``async def run(ctx) -> Section``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

NAMES = (
    "long_conversation",
    "append",
    "read_history",
    "import_time",
    "concurrency",
    "context_economy",
    "billed_context",
    "real_server",
)
"""Workload module names; ``--only`` takes these (or their numbers, from 1)."""


def load(name: str) -> ModuleType:
    """The workload module called ``name`` (or numbered ``name``)."""
    if name.isdigit() and 1 <= int(name) <= len(NAMES):
        name = NAMES[int(name) - 1]
    if name not in NAMES:
        raise ValueError(
            f"unknown workload {name!r}; choose from {', '.join(NAMES)} or 1-{len(NAMES)}"
        )
    return importlib.import_module(f"workloads.{name}")
