"""``aniki demo``: an offline tour of agents, tools, streaming and managed memory."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from typing import Any

import click
import pydantic
from rich.table import Table

from ..agent import Agent
from ..events import RunCompleted, TextDelta, ToolCallCompleted, ToolCallStarted
from ..providers.base import ModelRequest, Provider
from ..runner import Runner
from ..sessions.budget import TokenBudgetSession
from ..sessions.memory import InMemorySession
from ..testing.mock import MockProvider, MockReply
from ..tokens import count_tokens
from ..tools import tool
from ._common import console, default_store_url, handle_errors
from ._stores import open_store_session
from .chat import DEFAULT_MODELS, resolve_provider

__all__ = ["demo"]

SESSION_ID = "demo"
BUDGET = 400


class Forecast(pydantic.BaseModel):
    """The structured answer the first step asks for."""

    city: str
    summary: str
    temperature_c: float


@tool
def get_weather(city: str) -> str:
    """Look up the current weather.

    Args:
        city: The city to look up.
    """
    return json.dumps({"city": city, "temperature_c": 4.0, "conditions": "light rain"})


def scripted_reply(request: ModelRequest) -> MockReply:
    """The demo's canned model: it follows the tour's script, whatever is said."""
    last = request.messages[-1]
    if request.tools and last.role == "user":
        return MockReply(tool_calls=(_weather_call(),))
    if last.role == "tool":
        forecast = {"city": "Oslo", "summary": "Cold with light rain", "temperature_c": 4.0}
        return MockReply(content=json.dumps(forecast))
    if "packing" in last.content:
        text = "Pack a waterproof jacket, warm layers and shoes that can take a puddle."
        return MockReply(content=text, delay=0.2, chunks=tuple(_pieces(text)))
    words = " ".join(["note"] * 30)
    return MockReply(content=f"Noted turn {len(request.messages)}: {words}.")


def _weather_call() -> Any:
    from ..messages import ToolCall

    return ToolCall(id="call_demo_1", name="get_weather", arguments='{"city": "Oslo"}')


def _pieces(text: str) -> list[str]:
    words = text.split(" ")
    return [w + " " for w in words[:-1]] + [words[-1]]


@click.command()
@click.option(
    "--provider",
    "provider_name",
    default=None,
    help="Run the tour live with this provider (openai, anthropic, ...).",
)
@click.option("--model", default=None, help="The model for a live tour.")
@click.option("--base-url", default=None, help="An OpenAI-compatible server for a live tour.")
@click.option(
    "--store",
    default=None,
    metavar="URL",
    help="Where the demo conversation is kept (default: the embedded SQLite store).",
)
@handle_errors
def demo(
    provider_name: str | None, model: str | None, base_url: str | None, store: str | None
) -> None:
    """A tour of aniki that needs no key and no server (or runs live with --provider)."""
    live = provider_name is not None or base_url is not None
    if live:
        name, provider = resolve_provider(provider_name, base_url)
        model = model or DEFAULT_MODELS.get(name, "default")
        label = f"live: {name} · {model}"
    else:
        provider, model = MockProvider(handler=scripted_reply), "scripted"
        label = "scripted model: canned replies, not a real LLM (pass --provider to go live)"
    url = store or default_store_url()
    console.rule(f"[bold]aniki demo[/] · {label}")
    asyncio.run(_tour(provider, str(model), url, live=live))


async def _tour(provider: Provider, model: str, url: str, *, live: bool) -> None:
    session = open_store_session(url, SESSION_ID)
    session.clear()
    runner = Runner()

    console.print("\n[bold]1. An agent with a tool and structured output[/]")
    forecaster = Agent(
        "Forecaster",
        "Answer with the forecast for the city asked about.",
        model=model,
        provider=provider,
        session=session,
        tools=[get_weather],
        output_schema=Forecast,
    )
    question = "What's the weather in Oslo?"
    console.print(f"[cyan]you>[/] {question}")
    async for event in runner.stream(forecaster, message=question):
        if isinstance(event, ToolCallStarted):
            call = event.tool_call
            console.print(f"  [dim]tool call[/] {call.name}({call.arguments})")
        elif isinstance(event, ToolCallCompleted):
            console.print(f"  [dim]tool result[/] {event.message.content}")
        elif isinstance(event, RunCompleted):
            console.print(f"  [dim]validated output[/] {event.result.output!r}")

    console.print("\n[bold]2. A streamed reply[/] (the same conversation, another agent)")
    assistant = Agent(
        "Assistant",
        "You are a helpful travel assistant.",
        model=model,
        provider=provider,
        session=session,
    )
    question = "Any packing advice for that weather?"
    console.print(f"[cyan]you>[/] {question}\n[green]assistant>[/] ", end="")
    async for event in runner.stream(assistant, message=question):
        if isinstance(event, TextDelta):
            console.print(event.text, end="", markup=False)
    console.print()

    console.print(f"\n[bold]3. Persistence[/] in {url}, session {SESSION_ID!r}")
    stored = len(session.get_messages())
    console.print(f"this process stored {stored} messages; a new process opens the store:")
    console.print(f"  [dim]{_restart(url)}[/]")

    console.print("\n[bold]4. A token budget[/]: tokens sent per turn, with and without it")
    await _budget_table(provider, model, turns=5 if live else 30)
    console.print(
        f"\nSee the conversation again with [bold]aniki sessions show {SESSION_ID}[/], "
        "or start your own with [bold]aniki chat[/]."
    )


def _restart(url: str) -> str:
    code = (
        "import sys\n"
        "from aniki.sessions.url import open_session\n"
        "messages = open_session(sys.argv[1], sys.argv[2]).get_messages()\n"
        "print(f'found {len(messages)} messages; the last says: {messages[-1].content[:60]!r}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, url, SESSION_ID], capture_output=True, text=True, check=False
    )
    return (done.stdout or done.stderr).strip()


async def _budget_table(provider: Provider, model: str, *, turns: int) -> None:
    sent: dict[str, list[int]] = {"no policy": [], f"TokenBudgetSession({BUDGET})": []}
    sessions: tuple[Any, ...] = (
        InMemorySession(),
        TokenBudgetSession(InMemorySession(), BUDGET, model=model),
    )
    for label, session in zip(sent, sessions, strict=True):

        async def measure(
            ctx: Any, request: ModelRequest, call_next: Any, label: str = label
        ) -> Any:
            sent[label].append(count_tokens(request.messages, model))
            return await call_next(request)

        agent = Agent(
            "Note taker",
            "Acknowledge each note briefly.",
            model=model,
            provider=provider,
            session=session,
            middleware=[measure],
        )
        for turn in range(1, turns + 1):
            await Runner().run(agent, message=f"Note {turn}: the meeting moved to room {turn}.")
    table = Table("turn", *sent, title="tokens sent with each request", title_justify="left")
    for turn in sorted({1, 2, 5, 10, 20, turns} & set(range(1, turns + 1))):
        table.add_row(str(turn), *(f"{values[turn - 1]:,}" for values in sent.values()))
    console.print(table)
