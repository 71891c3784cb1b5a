"""Turning tracing on and off, what it costs to import, and the names it uses."""

from __future__ import annotations

import subprocess
import sys

import pytest

import aniki.tracing
from aniki import UserError
from aniki._run import observe
from aniki.tracing import _names


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_aniki_does_not_import_opentelemetry() -> None:
    code = (
        "import sys, aniki, aniki.tracing\n"
        "from aniki import Agent, Runner\n"
        "from aniki.testing import MockProvider\n"
        "agent = Agent('A', model='m', provider=MockProvider(['Hi.']))\n"
        "Runner().run_sync(agent, message='Hello')\n"
        "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))"
    )
    assert _python(code) == "[]"


def test_enable_without_opentelemetry_names_the_extra_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['opentelemetry'] = None  # as if it were not installed\n"
        "import aniki.tracing\n"
        "try:\n"
        "    aniki.tracing.enable()\n"
        "except aniki.UserError as exc:\n"
        "    print(exc)\n"
        "print(aniki.tracing.enabled())"
    )
    said, enabled = _python(code).splitlines()
    assert "pip install 'aniki-sdk[otel]'" in said
    assert enabled == "False"


def test_enable_checks_include_content() -> None:
    with pytest.raises(UserError, match="include_content must be True or False"):
        aniki.tracing.enable(include_content="yes")  # type: ignore[arg-type]
    assert observe.OBSERVER is None


def test_enable_and_disable_set_the_one_observer() -> None:
    pytest.importorskip("opentelemetry")
    assert not aniki.tracing.enabled()
    aniki.tracing.enable()  # the global provider: a no-op one unless the application set one
    try:
        assert aniki.tracing.enabled()
        assert observe.OBSERVER is not None
    finally:
        aniki.tracing.disable()
    assert observe.OBSERVER is None


def test_the_gen_ai_names_are_the_conventions() -> None:
    conventions = pytest.importorskip(
        "opentelemetry.semconv._incubating.attributes.gen_ai_attributes"
    )
    defined = {value for name, value in vars(conventions).items() if name.startswith("GEN_AI_")}
    ours = {
        value
        for name, value in vars(_names).items()
        if name.isupper() and isinstance(value, str) and value.startswith("gen_ai.")
    }
    assert ours - defined == set()
    assert "gen_ai.usage.cache_read.input_tokens" in ours
