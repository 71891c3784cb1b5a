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
from ...messages import Message
from ...tokens import TokenCounter
from ..memory import InMemorySession
from ._summary import fit_text, render_request, summary_message

if TYPE_CHECKING:
    from ...agent import Agent

__all__ = ["REPLY_CHARS_PER_TOKEN", "Summarizer", "fit_reply", "summarize"]

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
    summarizer: Summarizer,
    prompt: str,
    previous: str | None,
    messages: Sequence[Message],
    *,
    share: int,
    counter: TokenCounter,
) -> str:
    """``summarizer``'s summary of ``previous`` and ``messages``, fitted to ``share`` tokens
    (its summary message, as ``counter`` counts it)."""
    from ...runner import Runner  # imported here: the runner imports the sessions package

    words = max(share * 3 // 5, 10)
    request = render_request(prompt, previous, messages, words)
    result = await Runner().run(summarizer, message=request, session=InMemorySession())
    return await fit_reply(result.content, share, counter)


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
