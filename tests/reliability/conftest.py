"""Fixtures for the reliability tests: the provider tests' fake server, and every store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

# The provider tests' fixtures: a fresh fake server per test, each wire format in turn, and
# no API key or endpoint from the machine's environment.
from tests.providers.conftest import _no_vendor_env, server, vendor

from .stores import KINDS, Store, opened

__all__ = ["_no_vendor_env", "server", "store", "vendor"]


@pytest.fixture(params=KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each store in turn (Redis and PostgreSQL skip when down, and fail under CI)."""
    with opened(request.param, tmp_path) as made:
        yield made
