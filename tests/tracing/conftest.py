"""Tracing on, into an in-memory exporter, for one test; off again after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

import aniki.tracing

if TYPE_CHECKING:
    from .spans import Spans


def _traced(include_content: bool) -> Iterator[Spans]:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    from .spans import Spans

    made = Spans()
    aniki.tracing.enable(made.provider, include_content=include_content)
    try:
        yield made
    finally:
        aniki.tracing.disable()
        made.provider.shutdown()


@pytest.fixture
def spans() -> Iterator[Spans]:
    """Tracing as ``enable(provider)`` sets it: no message contents."""
    yield from _traced(include_content=False)


@pytest.fixture
def spans_with_content() -> Iterator[Spans]:
    """Tracing with ``include_content=True``."""
    yield from _traced(include_content=True)
