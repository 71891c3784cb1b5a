"""A scripted summarizer that records exactly which messages each summary was asked to fold."""

from __future__ import annotations

import re
from collections.abc import Sequence

from aniki import Agent, Message
from aniki.providers.base import ModelRequest
from aniki.testing import MockProvider

from .transcripts import parse_request

MARK = re.compile(r"<m(\d+)>")


def tagged(messages: Sequence[Message]) -> list[Message]:
    """``messages`` with ``<mN>`` (N = position) at the start of each text, to trace them."""
    return [
        Message(
            role=m.role,
            content=f"<m{i}> {m.content}".strip(),
            tool_calls=m.tool_calls,
            tool_call_id=m.tool_call_id,
        )
        for i, m in enumerate(messages)
    ]


class Summarizer:
    """Replies ``summary number N``; remembers what each request folded."""

    def __init__(self, *, verbose: int = 0) -> None:
        self.provider = MockProvider(handler=self._reply)
        self.agent = Agent("Summarizer", model="mock", provider=self.provider)
        self.folded: list[list[int]] = []
        """For each call, the message numbers in its new messages, in order."""
        self.previous: list[str | None] = []
        """For each call, the summary so far it was given."""
        self.verbose = verbose
        self.fail_next = 0

    def _reply(self, request: ModelRequest) -> str:
        assert len(request.messages) == 1, "the summarizer runs on a fresh, empty session"
        parsed = parse_request(request.messages[-1].content)
        self.previous.append(parsed.previous)
        if self.fail_next:
            self.fail_next -= 1
            raise RuntimeError("the summarizer is down")
        new = "\n".join(entry[-1] for entry in parsed.entries)
        self.folded.append(list(dict.fromkeys(int(n) for n in MARK.findall(new))))
        return f"summary number {len(self.folded)}" + " and more" * self.verbose

    @property
    def calls(self) -> int:
        return len(self.provider.requests)

    def all_folded(self) -> list[int]:
        return [n for batch in self.folded for n in batch]
