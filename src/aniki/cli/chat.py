"""``aniki chat``: an interactive, streamed conversation kept in a store."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

import click

from .._aio import within
from ..agent import Agent
from ..errors import AnikiError, AuthenticationError, StoreError
from ..events import ReasoningDelta, StreamRestarted, TextDelta, ToolCallStarted
from ..messages import Message
from ..providers.base import Provider
from ..reports import ContextReport
from ..runner import Runner
from ..tokens import count_tokens
from ..usage import Usage
from ._common import (
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    cli_message,
    console,
    default_store_url,
    err_console,
    fail,
    handle_errors,
    plain,
    shown_url,
    text,
)
from ._stores import open_store_session

__all__ = ["chat", "resolve_provider"]

_EXIT_WAIT = 2.0
"""Seconds the chat's loop is given at exit to finish what the replies left running on it
(an HTTP response being closed) and to close the provider's client."""

DEFAULT_MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}

NO_PROVIDER_HINT = """\
Configure one of:
  export OPENAI_API_KEY=...                  OpenAI (then: aniki chat)
  export ANTHROPIC_API_KEY=...               Anthropic (then: aniki chat --provider anthropic)
  aniki chat --base-url http://127.0.0.1:11434/v1 --model llama3.2
                                             a local OpenAI-compatible server
                                             (Ollama, vLLM, llama.cpp, LM Studio)
Or run `aniki demo`: an offline tour that needs no key and no server."""

HELP = """\
/history  show the conversation so far
/tokens   tokens stored and sent per turn; what the last reply and this chat cost,
          with the tokens read from and written to the provider's prompt cache
/context  after each reply, what each model call was sent: messages, tokens, whether the
          prompt-cache prefix was kept, and the share the provider served from cache (toggle)
/clear    delete this session's history (asks first; /clear --yes does not)
/exit     leave (Ctrl-D works too); Ctrl-C stops a reply in progress"""


def resolve_provider(name: str | None, base_url: str | None) -> tuple[str, Provider]:
    """The provider the user configured, or exit with instructions when there is none."""
    if name is None:
        if base_url or os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
            name = "openai"
        elif os.environ.get("ANTHROPIC_API_KEY"):
            name = "anthropic"
        else:
            fail("no model provider is configured.", code=EXIT_USAGE, hint=NO_PROVIDER_HINT)
            raise AssertionError("unreachable")
    # Imported through the package, which turns a missing vendor package into a UserError
    # naming the extra to install.
    if name == "openai":
        from ..providers import OpenAIProvider

        configured = (
            base_url or os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL")
        )
        if not configured:
            fail("OPENAI_API_KEY is not set.", code=EXIT_USAGE, hint=NO_PROVIDER_HINT)
        key = os.environ.get("OPENAI_API_KEY") or ("none" if base_url else None)
        return name, OpenAIProvider(api_key=key, base_url=base_url)
    if name == "anthropic":
        from ..providers import AnthropicProvider

        if base_url is None and not os.environ.get("ANTHROPIC_API_KEY"):
            fail("ANTHROPIC_API_KEY is not set.", code=EXIT_USAGE, hint=NO_PROVIDER_HINT)
        return name, AnthropicProvider(base_url=base_url)
    from ..providers.registry import get_provider

    return name, get_provider(name)


@click.command()
@click.option(
    "--session",
    "session_id",
    default="default",
    show_default=True,
    help="The conversation to open or resume.",
)
@click.option(
    "--store",
    default=None,
    metavar="URL",
    help="Where conversations live (default: $ANIKI_STORE or the embedded SQLite store).",
)
@click.option(
    "--provider",
    "provider_name",
    default=None,
    help="openai, anthropic, or another registered name (default: from the environment).",
)
@click.option("--model", default=None, help="The model name.")
@click.option("--base-url", default=None, help="An OpenAI-compatible server's API root.")
@click.option(
    "--system", default="You are a helpful assistant.", show_default=True, help="The system prompt."
)
@click.option(
    "--window",
    type=click.IntRange(min=1),
    default=None,
    help="Send only the most recent N messages.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=None,
    help="Send only the most recent messages that fit N tokens.",
)
@handle_errors
def chat(
    session_id: str,
    store: str | None,
    provider_name: str | None,
    model: str | None,
    base_url: str | None,
    system: str,
    window: int | None,
    max_tokens: int | None,
) -> None:
    """Talk with a model; the conversation is kept and resumed by --session."""
    if window is not None and max_tokens is not None:
        fail("--window and --max-tokens exclude each other; pick one", code=EXIT_USAGE)
    url = store or default_store_url()
    name, provider = resolve_provider(provider_name, base_url)
    model = model or DEFAULT_MODELS.get(name)
    if model is None:
        fail(f"pass --model: provider {name!r} has no default model", code=EXIT_USAGE)
    stored = open_store_session(url, session_id)
    session: Any = stored
    if window is not None:
        from ..sessions.policies.windowed import WindowedSession

        session = WindowedSession(stored, window)
    elif max_tokens is not None:
        from ..sessions.policies.budget import TokenBudgetSession

        session = TokenBudgetSession(stored, max_tokens, model=model)
    agent = Agent("chat", system, model=str(model), provider=provider, session=session)
    _Chat(agent, stored, session, url).loop()


class _Chat:
    def __init__(self, agent: Agent, stored: Any, view: Any, url: str) -> None:
        self.agent = agent
        self.stored = stored
        self.view = view
        self.url = url
        self.runner = Runner()
        self.last_usage: Usage | None = None
        self.chat_usage = Usage()
        self.show_context = False
        self.last_reports: tuple[ContextReport, ...] = ()
        self.loop_ = asyncio.new_event_loop()

    def loop(self) -> None:
        count = len(self.stored.get_messages())
        console.print(
            f"[bold]aniki chat[/] · session [cyan]{text(self.stored.id)}[/] in "
            f"{shown_url(self.url)} · model {text(self.agent.model)} · {count} earlier messages"
            " · /help for commands"
        )
        prompt = _prompt()
        try:
            while True:
                try:
                    line = input(prompt)
                except EOFError:
                    console.print()
                    return
                except KeyboardInterrupt:
                    console.print()
                    raise SystemExit(EXIT_INTERRUPTED) from None
                entered = line.strip()
                if not entered:
                    continue
                if entered.startswith("/"):
                    if not self.command(entered):
                        return
                    continue
                self.turn(entered)
        finally:
            try:
                self.loop_.run_until_complete(_wind_down())
            finally:
                self.loop_.close()

    def command(self, entered: str) -> bool:
        words = entered.split()
        name = words[0].lower()
        if name in ("/exit", "/quit"):
            return False
        if name == "/history":
            from .sessions_cmd import _print_message

            for message in self.stored.get_messages():
                _print_message(message)
        elif name == "/clear":
            self.clear(confirmed=any(word in ("-y", "--yes") for word in words[1:]))
        elif name == "/tokens":
            self.tokens()
        elif name == "/context":
            self.show_context = not self.show_context
            console.print(f"context reports {'on' if self.show_context else 'off'}")
            if self.show_context:
                self.print_context()
        elif name == "/help":
            console.print(HELP)
        else:
            console.print(f"unknown command {text(name)}; /help lists them")
        return True

    def clear(self, *, confirmed: bool) -> None:
        """Delete the history once the user said yes, as ``aniki sessions rm`` asks."""
        count = len(self.stored.get_messages())
        if not count:
            console.print("the history is already empty")
            return
        session_id = self.stored.id
        if not confirmed:
            if not sys.stdin.isatty():
                err_console.print(
                    f"[bold red]error:[/] not deleting the {count} messages of "
                    f"{text(repr(session_id))} without a confirmation"
                )
                err_console.print(
                    "type /clear --yes to delete from a script (no terminal to ask on)",
                    markup=False,
                )
                return
            try:
                confirmed = click.confirm(f"delete {count} messages of {plain(repr(session_id))}?")
            except click.Abort:  # Ctrl-C or Ctrl-D at the question: a no
                console.print()
            if not confirmed:
                console.print("kept the history")
                return
        self.stored.clear()
        console.print("history cleared")

    def tokens(self) -> None:
        everything: Sequence[Message] = self.stored.get_messages()
        sent: Sequence[Message] = self.view.get_messages()
        model = self.agent.model
        console.print(
            f"stored: {len(everything)} messages, ~{count_tokens(everything, model):,} tokens"
        )
        console.print(f"sent per turn: {len(sent)} messages, ~{count_tokens(sent, model):,} tokens")
        if self.last_usage is not None:
            console.print(f"last reply: {self.last_usage.describe()}")
            console.print(f"this chat: {self.chat_usage.describe()}")
            if self.chat_usage.unreported_requests:
                console.print(
                    "[dim]the server sent no token counts for some replies (llama.cpp's sends "
                    "none when streaming): the totals leave those replies out[/]"
                )

    def turn(self, message: str) -> None:
        task = self.loop_.create_task(self._stream(message))
        interrupted = False
        with contextlib.suppress(NotImplementedError, RuntimeError):
            self.loop_.add_signal_handler(signal.SIGINT, task.cancel)
        try:
            self.loop_.run_until_complete(task)
        except asyncio.CancelledError:
            interrupted = True
        except (AuthenticationError, StoreError):
            console.print()  # end the "assistant>" line before the error
            raise
        except AnikiError as exc:
            # A failed reply (rate limit, timeout, broken stream) ends this turn, not the chat.
            console.print(f"\n[bold red]error:[/] {text(cli_message(exc))}")
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                self.loop_.remove_signal_handler(signal.SIGINT)
        if interrupted:
            console.print("\n[yellow]reply stopped; only your message was kept[/]")

    async def _stream(self, message: str) -> None:
        console.print("[bold green]assistant>[/] ", end="")
        async with self.runner.stream(self.agent, message=message) as stream:
            async for event in stream:
                if isinstance(event, TextDelta):
                    console.print(plain(event.text), end="", markup=False, soft_wrap=True)
                elif isinstance(event, ReasoningDelta):  # the model's thinking, dimmed
                    console.print(
                        plain(event.text), end="", markup=False, soft_wrap=True, style="dim"
                    )
                elif isinstance(event, ToolCallStarted):
                    console.print(f"[dim]\\[tool {text(event.tool_call.name)}][/] ", end="")
                elif isinstance(event, StreamRestarted):
                    reason = text(event.reason)
                    console.print(f"\n[yellow]stream broke ({reason}); retrying[/]\n", end="")
        console.print()
        if stream.result is not None:
            self.last_usage = stream.result.usage
            self.chat_usage += stream.result.usage
            self.last_reports = stream.result.context_reports
            if self.show_context:
                self.print_context()

    def print_context(self) -> None:
        for number, report in enumerate(self.last_reports, start=1):
            console.print(f"[dim]call {number}: {text(report.describe())}[/]")


async def _wind_down() -> None:
    """Shut the chat's loop down as ``asyncio.run`` does, leaving nothing pending on it.

    A vendor's stream generators that a reply did not close are finalized by the collector,
    each with a task that closes its HTTP response; one made as the last reply ended can
    still be pending when the chat leaves, and closing the loop over it would destroy it
    ("Task was destroyed but it is pending!"). Those tasks finish first, then
    ``shutdown_asyncgens()`` closes the provider's client, which waits for it; each step
    within a bound.
    """
    loop = asyncio.get_running_loop()
    await _finish_tasks(loop.time() + _EXIT_WAIT / 3)
    with contextlib.suppress(asyncio.TimeoutError):
        await within(_EXIT_WAIT / 3, loop.shutdown_asyncgens())
    await _finish_tasks(loop.time() + _EXIT_WAIT / 3)


async def _finish_tasks(deadline: float) -> None:
    """Wait until every other task of the loop is done, those made meanwhile included; at
    ``deadline``, cancel what is left."""
    loop = asyncio.get_running_loop()
    while others := asyncio.all_tasks() - {asyncio.current_task()}:
        late = loop.time() >= deadline
        if late:
            for task in others:
                task.cancel()
        await asyncio.wait(others, timeout=_EXIT_WAIT / 4 if late else deadline - loop.time())
        for task in others:
            if task.done() and not task.cancelled():
                task.exception()  # retrieved: a failed clean-up is not worth a traceback
        if late:
            return


def _prompt() -> str:
    """The ``you>`` prompt, with line editing and in-chat history on a terminal.

    Importing :mod:`readline` makes :func:`input` edit lines (arrow keys, Ctrl-A/E, ...) and
    recall earlier lines with the up arrow, as other terminal programs do; the history lives
    only as long as the chat. The prompt goes through :func:`input` so that readline knows
    its width; colour codes are wrapped in ``\\001``/``\\002`` so it does not count them.
    """
    if not sys.stdin.isatty():
        return "you> "
    with contextlib.suppress(ImportError):  # not on every platform
        import readline  # noqa: F401
    if not console.is_terminal or console.color_system is None:
        return "you> "
    return "\001\033[1;36m\002you>\001\033[0m\002 "
