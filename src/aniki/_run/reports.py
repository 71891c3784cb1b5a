"""Building a run's :class:`~aniki.ContextReport` s: one per model call, as its request is
made, settled with what the provider reported, and logged (DEBUG, logger ``aniki.context``).

Token figures are estimates made with the history policy's counter when it has one, else
with :func:`~aniki.tokens.counter_for_model` for the agent's model. What a session's read saw
(how many messages it holds, a summary, whether its view moved) comes from the session's
capabilities; whether a request extends the previous one is judged against what this process
sent last for that session.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import weakref
from array import array
from collections.abc import Sequence
from typing import Any

from ..messages import Message
from ..providers.base import ToolDefinition
from ..reports import ContextReport, ContextTokens
from ..sessions._capabilities import Capabilities, reads_of
from ..tokens import TokenCounter, counter_for_model
from ..usage import Usage

__all__ = ["ReportBuilder"]

logger = logging.getLogger("aniki.context")


class ReportBuilder:
    """Builds a run's reports; one per run, as the run's requests are made."""

    def __init__(self, session: Any, model: str, can: Capabilities) -> None:
        """``can``: what ``session`` can do (``RunPlan.can``)."""
        self._session = session
        self._reads = reads_of(session, can)
        counter = can.counter
        self._counter: TokenCounter = counter if counter is not None else _counter(model)
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
        shortened = info.shortened if info is not None else 0
        summary = 1 if info is not None and info.summary and sent else 0
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
            shortened_messages=shortened,
        )
        self.reports.append(report)
        return report

    def settle(self, usage: Usage | None) -> None:
        """Attach what the provider reported to the latest report, and log it."""
        if not self.reports:
            return
        report = self.reports[-1]
        if usage is not None:
            report = dataclasses.replace(report, usage=usage)
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
        if len(_COUNTERS) > 64:  # a process that names many models keeps a few counters
            _COUNTERS.clear()
        counter = _COUNTERS[model] = counter_for_model(model)
    return counter


def _session_id(session: Any) -> str:
    try:
        return repr(str(session.id))[:80]
    except Exception:  # a custom session's id may be anything; the log line must not fail
        return "?"
