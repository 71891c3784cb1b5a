"""The summarizer's call: its request, then its reply capped and fitted to the summary's share.

Fitting measures the reply again and again (a binary search on its length, each step counting
tokens), so it runs in a worker thread, on at most :data:`REPLY_CHARS_PER_TOKEN` characters
per token of the share. Done whole on the event loop, fitting a 10 MB reply held the loop for
2.6 s, a 1 MB one for 0.4 s (measured, counting with tiktoken on a 2-core machine).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

from ..._threads import COMPUTE
from ...errors import UserError
from ...messages import Message
from ...providers.base import ModelRequest, ModelResponse
from ...tokens import TokenCounter
from .._reading import ReadingRun, current
from ..memory import InMemorySession
from ._summary import fit_text, render_request, summary_message

if TYPE_CHECKING:
    from ...agent import Agent

__all__ = [
    "REPLY_CHARS_PER_TOKEN",
    "Summarizer",
    "conversation_request",
    "fit_reply",
    "summarize",
    "summarize_in_place",
]

Summarizer: TypeAlias = "Agent"
"""What writes the summaries: an agent, run here (the one module of the policies that runs
one, and so names the agent and the runner above them)."""

logger = logging.getLogger("aniki")

REPLY_CHARS_PER_TOKEN = 16
"""The most characters a summary holds per token of its share.

A reply of the length asked for takes about 4 characters per token: four times that leaves
room for any text, and a reply longer still is cut, with a warning, before it is measured.
"""


async def summarize(
    summarizer: Summarizer | None,
    prompt: str,
    previous: str | None,
    messages: Sequence[Message],
    *,
    share: int,
    counter: TokenCounter,
) -> str:
    """The summary of ``previous`` and ``messages`` as a transcript, written by
    ``summarizer`` (``None``: the model of the run reading the session), fitted to ``share``
    tokens (its summary message, as ``counter`` counts it). Its calls are charged to that
    run, when there is one."""
    from ...runner import Runner  # imported here: the runner imports the sessions package

    words = max(share * 3 // 5, 10)
    request = render_request(prompt, previous, messages, words)
    run = current()
    if summarizer is None:
        run = _the_run(run)
        asked = ModelRequest(run.model, (Message("user", request),), settings=run.settings)
        return await fit_reply(_reply(await run.complete(asked)), share, counter)
    result = await Runner().run(summarizer, message=request, session=InMemorySession())
    if run is not None:
        run.charge(result.usage)
    return await fit_reply(result.content, share, counter)


async def summarize_in_place(
    prompt: str,
    previous: str | None,
    view: Sequence[Message],
    kept: int,
    *,
    share: int,
    counter: TokenCounter,
) -> str:
    """The run's own model's summary of the conversation as its last request sent it: the
    run's instructions and tools, the summary so far, the messages of ``view``, then one
    question asking for a summary of all but the last ``kept`` of them. Everything before the
    question is what the run's previous request began with, so a prompt cache serves it."""
    run = _the_run(current())
    head, tools = await run.head()
    before = (summary_message(previous),) if previous else ()
    ask = Message("user", conversation_request(prompt, kept, max(share * 3 // 5, 10)))
    request = ModelRequest(
        run.model, (*head, *before, *view, ask), tools=tools, settings=run.settings
    )
    return await fit_reply(_reply(await run.complete(request)), share, counter)


def conversation_request(prompt: str, kept: int, words: int) -> str:
    """The question that ends a summary request made in the conversation's own terms."""
    rest = f", except its last {kept} messages (they stay as they are)" if kept else ""
    return (
        "This message is from the application, not the user. Write a summary of the "
        f"conversation above{rest}, earlier summary included, to stand in for it from now "
        f"on.\n{prompt}\nKeep it under {words} words. Reply with the summary only: no "
        "greeting, and do not call any tool."
    )


def _the_run(run: ReadingRun | None) -> ReadingRun:
    if run is None:
        raise UserError(
            "a SummarizingSession without a summarizer summarizes with the model of the run "
            "that reads it; read it through Runner.run, or give it a summarizer agent"
        )
    return run


def _reply(response: ModelResponse) -> str:
    if not response.content.strip() and response.tool_calls:
        raise ValueError("the model called a tool instead of writing the summary")
    return response.content


async def fit_reply(reply: str, share: int, counter: TokenCounter) -> str:
    """``reply`` as a summary: stripped, and cut to ``share`` tokens and to at most
    :data:`REPLY_CHARS_PER_TOKEN` characters per token of ``share``, off the event loop.

    Raises ``ValueError`` for an empty reply.
    """
    text = reply.strip()
    if not text:
        raise ValueError("the summarizer replied with an empty summary")
    longest = REPLY_CHARS_PER_TOKEN * share
    if len(text) > longest:
        logger.warning(
            "the summarizer replied with %d characters for a summary of %d tokens; "
            "keeping at most the first %d",
            len(text),
            share,
            longest,
        )

    def measure(candidate: str) -> int:
        return counter.count_message(summary_message(candidate))

    return await COMPUTE.submit(lambda: fit_text(text, share, measure, longest=longest))
