"""Each guardrail's check is a span under the run's: its name, its stage, whether it tripped,
and its reason only with ``include_content=True`` (a reason may quote what it checked)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from aniki import Agent, Guardrail, GuardrailTripped, Runner
from aniki.testing import MockProvider
from tests.core.helpers import MODES, drive

if TYPE_CHECKING:
    from .spans import Spans


def polite(ctx: Any, message: Any) -> str | None:
    return None if "please" in message.content else "ask politely"


def no_secrets(ctx: Any, output: str) -> str | None:
    return "the reply names the code 1234" if "1234" in output else None


def agent() -> Agent:
    return Agent(
        "Guarded",
        model="mock-model",
        provider=MockProvider(handler=lambda request: "the code is 1234"),
        input_guardrails=[polite],
        output_guardrails=[Guardrail(no_secrets, replacement="I cannot say.")],
    )


@pytest.mark.parametrize("mode", MODES)
async def test_each_check_is_a_span_under_the_run(mode: str, spans: Spans) -> None:
    result = await drive(mode, Runner(), agent(), message="the code, please")
    assert result.content == "I cannot say."
    run = spans.one("invoke_agent ")
    checks = {span.name: span for span in spans.named("guardrail ")}
    assert set(checks) == {"guardrail polite", "guardrail no_secrets"}
    for span in checks.values():
        assert span.parent is not None and span.parent.span_id == run.context.span_id
    passed, tripped = (
        checks["guardrail polite"].attributes,
        checks["guardrail no_secrets"].attributes,
    )
    assert (passed["aniki.guardrail.stage"], passed["aniki.guardrail.tripped"]) == ("input", False)
    assert (tripped["aniki.guardrail.stage"], tripped["aniki.guardrail.tripped"]) == (
        "output",
        True,
    )
    assert "aniki.guardrail.reason" not in tripped  # no contents by default


async def test_the_reason_is_content(spans_with_content: Spans) -> None:
    with pytest.raises(GuardrailTripped):
        await Runner().run(agent(), message="the code")
    attributes = spans_with_content.one("guardrail polite").attributes
    assert attributes["aniki.guardrail.tripped"] is True
    assert attributes["aniki.guardrail.reason"] == "ask politely"
