"""Fixtures for provider tests: a fake vendor server on 127.0.0.1, fresh for each test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .fake_server import FakeServer
from .vendors import VENDORS, Vendor


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    async with FakeServer() as running:
        yield running


@pytest.fixture(params=VENDORS, ids=lambda vendor: vendor.name)
def vendor(request: pytest.FixtureRequest) -> Vendor:
    """Each wire format in turn (OpenAI Chat Completions, Anthropic Messages)."""
    chosen: Vendor = request.param
    return chosen


@pytest.fixture(autouse=True)
def _no_vendor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep the machine's own keys and endpoints out of every test."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "OPENAI_CUSTOM_HEADERS",
        "ANTHROPIC_CUSTOM_HEADERS",
    ):
        monkeypatch.delenv(name, raising=False)
