"""What a stored history must look like after any fault: valid for every provider."""

from __future__ import annotations

from collections.abc import Sequence

from aniki import Message


def assert_valid_history(messages: Sequence[Message]) -> None:
    """Fail unless ``messages`` could be sent to any provider as they are.

    Every tool call is answered, by a tool message that directly follows its turn, and
    every tool message answers a call of the turn before it; no assistant message is empty;
    no call id is used twice.
    """
    open_calls: set[str] = set()
    used: set[str] = set()
    for index, message in enumerate(messages):
        if message.role == "tool":
            assert message.tool_call_id in open_calls, (
                f"message {index} answers {message.tool_call_id!r}, which no open call made"
            )
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, f"calls {sorted(open_calls)} unanswered before message {index}"
        if message.role == "assistant":
            assert message.content or message.tool_calls, f"message {index} is empty"
            ids = [call.id for call in message.tool_calls]
            assert len(set(ids)) == len(ids) and not used & set(ids), f"ids reused: {ids}"
            used |= set(ids)
            open_calls = set(ids)
    assert not open_calls, f"calls {sorted(open_calls)} are never answered"
