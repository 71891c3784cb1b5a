"""Every example runs offline, as a user runs it, and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

EXPECTED = {
    "first_agent.py": ["You told me: 'My name is Lalit.'", "4 messages in the session"],
    "sessions.py": ["assistant: This is message 1", "stored: example-conversation with 2"],
    "policies.py": ["tokens of history sent"],
    "streaming.py": ["Once upon a time", "['user', 'assistant', 'user']"],
    "tools.py": ["get_weather", "validated output: Forecast(city='Oslo'"],
    "providers.py": ["No provider is configured"],
    "multi_agent.py": [
        "[Billing speaks: handoff]",
        "[Policy speaks: tool]",
        "Sorry about that. Our policy: Double charges are refunded in full within 5 days.",
        "answered by: Billing",
        "model calls: 4",
    ],
    "approvals.py": [
        'awaiting approval: refund({"order_id": "A-1009", "amount_eur": 25}) [call_1]',
        "Done. The tool said: refunded 25.00 EUR on order A-1009",
        "stored: ['user', 'assistant', 'tool', 'assistant']",
    ],
    "attachments.py": [
        "(thinking) The image is 1 x 1",
        "It is a single red pixel",
        "stored: Attachment('image/png', data=<",
        "name='pixel.png')",
        "stored reasoning: ['The image is 1 x 1; its only pixel is pure red.']",
    ],
    "tracing.py": [
        "invoke_agent Forecaster",
        "    execute_tool get_weather",
        "gen_ai.tool.call.id=call_2",
        "gen_ai.usage.cache_read.input_tokens=256, gen_ai.response.finish_reasons=stop",
    ],
    "durable.py": [
        "worker ended by signal 9",
        "stored before recovery: ['user']",
        "Done: lamp reserved; lamp shipped",
        "stored: ['user', 'assistant', 'tool', 'tool', 'assistant']",
        "reserve ran 1 time(s)",
        "ship ran 2 time(s), with 1 idempotency key(s)",
    ],
    "chat_app.py": [
        "ann: 'Fix my CV', 2 messages\nann: 'Pack list for a',",
        "ann: 'Which temples in Kyoto', 2 messages",
        "deleted for bob: 1",
        "left: ['ann-chat-2', 'ann-chat-1', 'ann-chat-0']",
        "pruned (not written for 30 days): 0",
    ],
    "guardrails.py": [
        "agent: Your refund of this order is done.",
        "-> 'Refused: refunds above 100 EUR need a person.'",
        "agent: I cannot do that myself; a colleague will.",
        "stopped by input guardrail no_card_numbers: the message holds what looks like a card",
        "stored: ['user', 'assistant', 'tool', 'assistant', 'user', 'assistant', 'tool', "
        "'assistant', 'user']",
    ],
    "mcp_tools.py": [
        "tools from the MCP server: shop_order_status, shop_return_policy",
        "tool: Order A-1009: shipped with PostNord, arriving Thursday.",
    ],
}


def offline_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}


SERVED = {"fastapi_app.py"}
"""Examples that are servers: test_fastapi_app.py serves them and drives them over HTTP."""


def test_every_example_is_covered() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.py") if not p.name.startswith(("_", "test_"))}
    assert scripts == set(EXPECTED) | SERVED


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs_offline(name: str, tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), str(tmp_path / "example.db")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=offline_env(),
    )
    assert done.returncode == 0, done.stderr
    for expected in EXPECTED[name]:
        assert expected in done.stdout


def test_the_sessions_example_continues_after_a_restart(tmp_path: Path) -> None:
    def run() -> str:
        return subprocess.run(
            [sys.executable, str(EXAMPLES / "sessions.py"), str(tmp_path / "s.db")],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
            env=offline_env(),
        ).stdout

    run()
    assert "2 messages stored before this run" in run()


def test_the_testing_example_passes_under_pytest(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            str(EXAMPLES / "test_my_agent.py"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=offline_env(),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
