"""A counter of forks, so stores can tell that they run in a forked child.

A child must not use its parent's database connection or file descriptor offsets; comparing
a saved :func:`count` is cheaper than calling ``os.getpid()`` on every operation.
"""

from __future__ import annotations

import os

__all__ = ["count"]

_count = 0


def count() -> int:
    """How many forks separate this process from the one that imported aniki."""
    return _count


def _after_fork_in_child() -> None:
    global _count
    _count += 1


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
