"""``ContextReport``: what each model call was sent, and why.

One report per model call, in ``RunResult.context_reports`` (streamed runs too), and one
DEBUG line per call on the logger ``aniki.context``. Token figures are estimates made with
the history policy's counter when it has one, else with
:func:`~aniki.tokens.counter_for_model` for the agent's model; what the provider billed is in
:attr:`ContextReport.usage`.

Each report is also kept on the assistant message its call produced
(:attr:`~aniki.Message.context`), so a store keeps it with the conversation (its stored form
is in :mod:`aniki._report_record`). So that :mod:`aniki.messages` can import this module,
it imports no message or token code when it is loaded.
"""

from __future__ import annotations

import json
import logging
import weakref
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._reads import reads_of
from .usage import Usage

if TYPE_CHECKING:  # at run time these import aniki.messages, which imports this module
    from .messages import Message
    from .providers.base import ToolDefinition
    from .tokens import TokenCounter

__all__ = ["ContextReport", "ContextTokens"]

logger = logging.getLogger("aniki.context")

_SUMMARY_PREFIX = "Summary of the earlier conversation:\n"  # aniki.sessions.policies._summary's


@dataclass(frozen=True, slots=True)
class ContextTokens:
    """A request's estimated tokens, by part.

    Example::

        tokens = result.context_reports[-1].tokens
        print(tokens.total, "tokens, of which history:", tokens.history)
    """

    instructions: int = 0
    """The agent's instructions (the leading system message)."""
    tools: int = 0
    """The tool definitions: names, descriptions and parameter schemas."""
    summary: int = 0
    """The summary standing for older messages (``SummarizingSession``)."""
    history: int = 0
    """The conversation's messages sent verbatim."""

    @property
    def total(self) -> int:
        """All parts added up."""
        return self.instructions + self.tools + self.summary + self.history


@dataclass(frozen=True, slots=True)
class ContextReport:
    """What one model call was sent, and why.

    Example::

        result = await Runner().run(agent, message="Hi")
        for report in result.context_reports:
            print(report.sent_messages, "of", report.stored_messages, "messages sent;",
                  "cache-friendly" if report.prefix_kept else "prefix changed")
    """

    stored_messages: int | None
    """How many messages the session holds when the call is made (not counting messages of
    this run that a stream has not stored yet): reported by every built-in store and history
    policy; ``None`` for a custom session that is neither a store offering
    ``get_messages(limit=...)`` nor a policy (it may be a view, so it cannot tell)."""
    sent_messages: int
    """How many stored messages were sent verbatim (the instructions and a summary are not
    counted; messages of this run that a stream has not stored yet are)."""
    summarized_messages: int
    """How many of the oldest stored messages a summary stood for (0 without one)."""
    tokens: ContextTokens
    """The request's estimated tokens, by part."""
    prefix_kept: bool | None
    """Whether the history starts where the previous call of this session started, so the
    request extends the previous one and a prompt cache can serve it: ``False`` when a
    window's cut moved or a new summary was made; ``None`` when the session cannot tell."""
    usage: Usage | None = None
    """What the provider reported for this call (``None`` when it reported nothing)."""

    def describe(self) -> str:
        """One line for people: messages and tokens sent, and what the provider reported."""
        stored = "?" if self.stored_messages is None else str(self.stored_messages)
        parts = [f"{self.sent_messages} of {stored} messages sent"]
        if self.summarized_messages:
            parts.append(f"{self.summarized_messages} summarized")
        parts.append(f"~{self.tokens.total} tokens")
        if self.prefix_kept is not None:
            parts.append("prefix kept" if self.prefix_kept else "prefix changed")
        usage = self.usage
        if usage is not None and usage.input_tokens:
            share = usage.cache_read_tokens / usage.input_tokens
            parts.append(f"{usage.input_tokens} input tokens billed, {share:.0%} from cache")
        return ", ".join(parts)


class ReportBuilder:
    """Builds a run's reports; one per run, as the run's requests are made."""

    def __init__(self, session: Any, model: str) -> None:
        self._session = session
        self._reads = reads_of(session)
        counter: Any = getattr(session, "counter", None)
        if not callable(getattr(counter, "count_message", None)):
            counter = _counter(model)
        self._counter: TokenCounter = counter
        self._tools: tuple[tuple[ToolDefinition, ...], int] | None = None
        self.reports: list[ContextReport] = []

    def add(
        self,
        messages: Sequence[Message],
        tools: tuple[ToolDefinition, ...],
        *,
        has_instructions: bool,
        pending: int,
    ) -> ContextReport:
        """The report of a request whose ``messages`` (instructions first, when there are
        any) carry ``pending`` messages a stream has not stored yet."""
        count = self._counter.count_message
        head = 1 if has_instructions else 0
        sent = tuple(messages[head:])
        kept, sums = _against_last_sent(self._session, sent, self._counter)
        info = self._reads(len(sent) - pending)
        summarized = info.summarized if info is not None else 0
        summary = 1 if summarized and sent and _is_summary(sent[0]) else 0
        history = len(sent) - summary
        stored = info.stored if info is not None else None
        prefix_kept = info.prefix_kept if info is not None else None
        if kept is not None:  # what this process sent last for this session decides
            prefix_kept = kept
        total = sums[-1] if sums else 0
        summary_tokens = sums[0] if summary else 0
        report = ContextReport(
            stored_messages=stored,
            sent_messages=history,
            summarized_messages=summarized,
            tokens=ContextTokens(
                instructions=count(messages[0]) if head else 0,
                tools=self._tool_tokens(tools),
                summary=summary_tokens,
                history=total - summary_tokens,
            ),
            prefix_kept=prefix_kept,
        )
        self.reports.append(report)
        return report

    def settle(self, usage: Usage | None) -> None:
        """Attach what the provider reported to the latest report, and log it."""
        if not self.reports:
            return
        report = self.reports[-1]
        if usage is not None:
            report = ContextReport(
                stored_messages=report.stored_messages,
                sent_messages=report.sent_messages,
                summarized_messages=report.summarized_messages,
                tokens=report.tokens,
                prefix_kept=report.prefix_kept,
                usage=usage,
            )
            self.reports[-1] = report
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "session %s, call %d: %s (instructions %d, tools %d, summary %d, history %d)",
                _session_id(self._session),
                len(self.reports),
                report.describe(),
                report.tokens.instructions,
                report.tokens.tools,
                report.tokens.summary,
                report.tokens.history,
            )

    def _tool_tokens(self, tools: tuple[ToolDefinition, ...]) -> int:
        cached = self._tools
        if cached is not None and cached[0] == tools:
            return cached[1]
        text = "".join(
            tool.name + tool.description + json.dumps(tool.parameters, sort_keys=True)
            for tool in tools
        )
        count_text = getattr(self._counter, "count_text", None)
        total = count_text(text) if callable(count_text) else -(-len(text) // 4)
        total = int(total) + 4 * len(tools)
        self._tools = (tools, total)
        return total


_SENT: weakref.WeakKeyDictionary[Any, tuple[tuple[Message, ...], Any, array[int]]] = (
    weakref.WeakKeyDictionary()
)
"""Per session, its last request in this process: the messages sent after the instructions,
the counter and its calibration then, and the running token sums over those messages."""


def _against_last_sent(
    session: Any, sent: tuple[Message, ...], counter: TokenCounter
) -> tuple[bool | None, array[int]]:
    """Whether ``sent`` extends the last request of ``session`` in this process (``None``:
    there was none, or the session cannot be weakly referenced), and the running token sums
    over ``sent``; ``sent`` then takes the last request's place.

    A session's reads between two requests (the one after a reply, say) may move its view,
    so whether a request extends the previous one is judged against the previous request.
    Only what the previous request did not send is counted: a request costs what is new,
    not the whole conversation again.
    """
    calibration = (counter, getattr(counter, "factor", None))
    try:
        memo = _SENT.get(session)
    except TypeError:  # a session that cannot be weakly referenced: judged by its reads
        memo = None
        remember = False
    else:
        remember = True
    kept: bool | None = None
    shared = 0
    if memo is not None:
        previous = memo[0]
        kept = sent[: len(previous)] == previous  # the usual case, at C speed
        if kept:
            shared = len(previous)
        else:
            most = min(len(previous), len(sent))
            while shared < most and previous[shared] == sent[shared]:
                shared += 1
    sums = memo[2][:shared] if memo is not None and memo[1] == calibration else array("q")
    total = sums[-1] if sums else 0
    for message in sent[len(sums) :]:
        total += counter.count_message(message)
        sums.append(total)
    if remember:
        _SENT[session] = (sent, calibration, sums)
    return kept, sums


_COUNTERS: dict[str, TokenCounter] = {}


def _counter(model: str) -> TokenCounter:
    counter = _COUNTERS.get(model)
    if counter is None:
        from .tokens import counter_for_model  # see the imports at the top

        if len(_COUNTERS) > 64:  # a process that names many models keeps a few counters
            _COUNTERS.clear()
        counter = _COUNTERS[model] = counter_for_model(model)
    return counter


def _is_summary(message: Message) -> bool:
    return message.role == "system" and message.content.startswith(_SUMMARY_PREFIX)


def _session_id(session: Any) -> str:
    try:
        return repr(str(session.id))[:80]
    except Exception:  # a custom session's id may be anything; the log line must not fail
        return "?"
