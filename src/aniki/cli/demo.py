"""``aniki demo``: an offline tour of agents, tools, streaming and managed memory."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import shlex
import subprocess
import sys
from typing import Any

import click
import pydantic
from rich.table import Table

from .._secrets import hide_password
from ..agent import Agent
from ..events import RunCompleted, TextDelta, ToolCallCompleted, ToolCallStarted
from ..messages import Message
from ..providers.base import ModelRequest, Provider
from ..runner import Runner
from ..sessions.memory import InMemorySession
from ..sessions.policies.budget import TokenBudgetSession
from ..testing.mock import MockProvider, MockReply
from ..tokens import count_tokens
from ..tools import tool
from ..usage import Usage
from ._common import console, data_dir, handle_errors, plain, shown_url, text
from ._stores import open_store_session, read_messages
from .chat import DEFAULT_MODELS, resolve_provider

__all__ = ["demo"]

SESSION_ID = "demo"
OWN_STORE = "demo.db"
DEMO_MARK = "aniki.demo"
"""Meta key marking a session the demo wrote, the only kind it ever clears."""
"""The demo's own SQLite file in the data directory: no other command writes to it."""
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


class ScriptedModel:
    """The demo's canned model, reporting usage as a provider with a prefix cache would.

    Token counts are aniki's estimates. The longest run of opening messages a request shares
    with an earlier request (with the same tools) counts as read from the cache, the rest as
    written to it, as at Anthropic's breakpoint on the last message.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self._seen: list[tuple[tuple[str, ...], tuple[Message, ...]]] = []

    def __call__(self, request: ModelRequest) -> MockReply:
        reply = scripted_reply(request)
        tools = tuple(tool.name for tool in request.tools)
        shared = max(
            (_shared_opening(request.messages, seen) for key, seen in self._seen if key == tools),
            default=0,
        )
        self._seen.append((tools, request.messages))
        sent = count_tokens(request.messages, self.model)
        read = count_tokens(request.messages[:shared], self.model)
        usage = Usage(
            input_tokens=sent,
            output_tokens=count_tokens([reply.response().to_message()], self.model),
            requests=1,
            cache_read_tokens=read,
            cache_write_tokens=sent - read,
        )
        return dataclasses.replace(reply, usage=usage)


def _shared_opening(one: tuple[Message, ...], other: tuple[Message, ...]) -> int:
    shared = 0
    for mine, theirs in zip(one, other, strict=False):
        if mine != theirs:
            break
        shared += 1
    return shared


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
    help="Keep the demo conversation in this store, under a new session id (default: the "
    "demo's own SQLite file, demo.db in the data directory).",
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
        provider, model = MockProvider(handler=ScriptedModel("scripted")), "scripted"
        label = "scripted model: canned replies, not a real LLM (pass --provider to go live)"
    console.rule(f"[bold]aniki demo[/] · {text(label)}")
    if store is None:
        # The demo's own file: its session "demo" is the previous run's, so it starts afresh.
        url = f"sqlite:///{data_dir() / OWN_STORE}"
        # The first of demo, demo-2, ... that is empty or the demo's own: a session a user
        # wrote there (ANIKI_STORE pointing at this file) is left alone.
        session = open_store_session(url, _unused_id(url, own=True))
        session.clear()
        session.set_meta(DEMO_MARK, True)
        console.print(f"[dim]the demo keeps its conversation in its own store, {shown_url(url)}[/]")
    else:
        # A store the user named: never clear anything there, take an id nobody uses yet.
        url = store
        session_id = _unused_id(url)
        session = open_store_session(url, session_id)
        console.print(
            f"[dim]the demo writes the new session {text(repr(session_id))} in {shown_url(url)}[/]"
        )
    asyncio.run(_tour(provider, str(model), url, session, live=live))


def _unused_id(url: str, *, own: bool = False) -> str:
    """The first of demo, demo-2, ... holding nothing (or, with ``own``, written by the demo)."""
    number = 1
    while True:
        session_id = SESSION_ID if number == 1 else f"{SESSION_ID}-{number}"
        if not read_messages(url, session_id):  # an empty one may be cleared: nothing is lost
            return session_id
        if own and open_store_session(url, session_id).get_meta(DEMO_MARK) is not None:
            return session_id
        number += 1


async def _tour(provider: Provider, model: str, url: str, session: Any, *, live: bool) -> None:
    session_id = session.id
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
    console.print(f"[cyan]you>[/] {text(question)}")
    async for event in runner.stream(forecaster, message=question):
        if isinstance(event, ToolCallStarted):
            call = event.tool_call
            console.print(f"  [dim]tool call[/] {text(call.name)}({text(call.arguments)})")
        elif isinstance(event, ToolCallCompleted):
            console.print(f"  [dim]tool result[/] {text(event.message.content)}")
        elif isinstance(event, RunCompleted):
            console.print(f"  [dim]validated output[/] {text(repr(event.result.output))}")
            _print_usage(event.result.usage, live=live)

    console.print("\n[bold]2. A streamed reply[/] (the same conversation, another agent)")
    assistant = Agent(
        "Assistant",
        "You are a helpful travel assistant.",
        model=model,
        provider=provider,
        session=session,
    )
    question = "Any packing advice for that weather?"
    console.print(f"[cyan]you>[/] {text(question)}\n[green]assistant>[/] ", end="")
    async for event in runner.stream(assistant, message=question):
        if isinstance(event, TextDelta):
            console.print(plain(event.text), end="", markup=False)
        elif isinstance(event, RunCompleted):
            console.print()
            _print_usage(event.result.usage, live=live)

    console.print(
        f"\n[bold]3. Persistence[/] in {shown_url(url)}, session {text(repr(session_id))}"
    )
    stored = len(session.get_messages())
    console.print(f"this process stored {stored} messages; a new process opens the store:")
    console.print(f"  [dim]{text(_restart(url, session_id))}[/]")

    console.print("\n[bold]4. A token budget[/]: tokens sent per turn, with and without it")
    await _budget_table(provider, model, turns=5 if live else 30)
    where = shlex.quote(hide_password(url))
    again = f"aniki sessions show {shlex.quote(session_id)} --store {where}"
    console.print(
        f"\nSee the conversation again with [bold]{text(again)}[/], "
        "or start your own with [bold]aniki chat[/]."
    )


def _print_usage(usage: Usage, *, live: bool) -> None:
    source = "as the provider reported it" if live else "estimated, with a simulated prompt cache"
    console.print(f"  [dim]usage, {source}:[/] {usage.describe()}")


def _restart(url: str, session_id: str) -> str:
    code = (
        "import sys\n"
        "from aniki.sessions.url import open_session\n"
        "messages = open_session(sys.argv[1], sys.argv[2]).get_messages()\n"
        "print(f'found {len(messages)} messages; the last says: {messages[-1].content[:60]!r}')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, url, session_id], capture_output=True, text=True, check=False
    )
    return (done.stdout or done.stderr).strip()


async def _budget_table(provider: Provider, model: str, *, turns: int) -> None:
    labels = ("no policy", f"TokenBudgetSession({BUDGET})")
    sent: dict[str, list[int]] = {label: [] for label in labels}
    cached: dict[str, list[int | None]] = {label: [] for label in labels}
    totals: dict[str, Usage] = {label: Usage() for label in labels}
    sessions: tuple[Any, ...] = (
        InMemorySession(),
        TokenBudgetSession(InMemorySession(), BUDGET, model=model),
    )
    for label, session in zip(labels, sessions, strict=True):

        async def measure(
            ctx: Any, request: ModelRequest, call_next: Any, label: str = label
        ) -> Any:
            sent[label].append(count_tokens(request.messages, model))
            response = await call_next(request)
            usage = response.usage
            cached[label].append(usage.cache_read_tokens if usage is not None else None)
            return response

        agent = Agent(
            "Note taker",
            # Each run its own instructions, so that neither reads the other's cached prefix.
            f"Acknowledge each note briefly. ({label})",
            model=model,
            provider=provider,
            session=session,
            middleware=[measure],
        )
        for turn in range(1, turns + 1):
            result = await Runner().run(
                agent, message=f"Note {turn}: the meeting moved to room {turn}."
            )
            totals[label] += result.usage
    columns = [column for label in labels for column in (label, "from cache")]
    table = Table(
        "turn",
        *columns,
        title="tokens sent with each request",
        title_justify="left",
        caption="from cache: read from the provider's prompt cache",
        caption_justify="left",
    )
    for turn in sorted({1, 2, 5, 10, 20, turns} & set(range(1, turns + 1))):
        cells = [
            cell
            for label in labels
            for cell in (f"{sent[label][turn - 1]:,}", _cached_cell(cached[label][turn - 1]))
        ]
        table.add_row(str(turn), *cells)
    console.print(table)
    for label in labels:
        console.print(f"  [dim]{label}, all {turns} turns:[/] {totals[label].describe()}")


def _cached_cell(tokens: int | None) -> str:
    return "not reported" if tokens is None else f"{tokens:,}"
