"""The stores the single-purpose benchmark scripts measure: the test suite's Redis and
PostgreSQL servers (``ANIKI_TEST_REDIS_URL`` / ``ANIKI_TEST_POSTGRES_DSN`` override them, as
for the tests) and a SQLite file and a file-store directory in a scratch directory."""

from __future__ import annotations

import os
from pathlib import Path

REDIS_URL = os.environ.get("ANIKI_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "ANIKI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)


def store_urls(directory: Path) -> dict[str, str]:
    """A URL for every kind of persistent store, by name; local ones under ``directory``."""
    return {
        "sqlite": f"sqlite:///{directory / 'chats.db'}",
        "file": f"file://{directory / 'chats'}",
        "redis": REDIS_URL,
        "postgres": POSTGRES_DSN,
    }
