"""Fixtures for the history-policy tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from .stores import KINDS, Store, make_store


@pytest.fixture(params=KINDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Store]:
    """Each kind of store in turn (servers skipped when absent, outside CI)."""
    opened = make_store(request.param, tmp_path)
    yield opened
    await opened.close()
