"""Where an Anthropic request gets its ``cache_control`` breakpoints (pure, no I/O).

Anthropic caches a request's prefix (tools, then system, then messages) only up to a block
marked ``cache_control``, and allows at most four marks per request. A prefix shorter than
the model's minimum is simply not cached, whatever its marks. The marks:

1. the last tool definition: the tools stay cached when the system prompt changes;
2. the last system block: instructions and any summary, kept when the history changes;
3. the last block of the last message: this request's whole prefix is written, so the
   next request (this one plus the reply and what follows) can read it;
4. the last block of the user turn before the last message: exactly where the previous
   request put mark 3. Anthropic looks for a cached prefix only about 20 blocks back from a
   mark, and a turn with many parallel tool calls adds more blocks than that; this mark
   finds the previous request's prefix however many blocks the latest turn added.
"""

from __future__ import annotations

from typing import Any

__all__ = ["add_breakpoints", "cacheable"]


def _mark() -> dict[str, str]:
    return {"type": "ephemeral"}  # the 5-minute cache, the API's default lifetime


def cacheable(block: Any) -> bool:
    """Whether ``block`` may carry ``cache_control``: the API rejects it on an empty text
    block, and a block whose content is empty caches nothing a neighbour would not."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return isinstance(text, str) and bool(text.strip())
    if kind == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return bool(content.strip())
        return bool(content)
    return kind == "tool_use"


def _mark_last_block(blocks: list[Any]) -> bool:
    """Mark the last cacheable block of ``blocks`` (a copy replaces it); False if none is."""
    for index in range(len(blocks) - 1, -1, -1):
        if cacheable(blocks[index]):
            blocks[index] = {**blocks[index], "cache_control": _mark()}
            return True
    return False


def _mark_messages_up_to(messages: list[dict[str, Any]], last: int) -> int | None:
    """Mark the last cacheable block of ``messages[: last + 1]``; the index of the message
    marked, or ``None`` when no block there can be marked."""
    for index in range(last, -1, -1):
        content = messages[index].get("content")
        if isinstance(content, list):
            blocks = list(content)
            if _mark_last_block(blocks):
                messages[index] = {**messages[index], "content": blocks}
                return index
    return None


def _previous_user_turn(messages: list[dict[str, Any]]) -> int | None:
    for index in range(len(messages) - 2, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None


def add_breakpoints(params: dict[str, Any]) -> None:
    """Mark ``params`` (the keyword arguments of ``messages.create``) for prompt caching.

    Marked blocks are replaced by marked copies, so nothing ``params`` shares with the
    request it was built from is changed. A ``system`` string becomes one text block, the
    only form that can carry a mark.
    """
    tools = params.get("tools")
    if tools:
        tools = list(tools)
        tools[-1] = {**tools[-1], "cache_control": _mark()}
        params["tools"] = tools
    system = params.get("system")
    if system is not None:
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else list(system)
        _mark_last_block(blocks)
        params["system"] = blocks
    messages = list(params.get("messages") or ())
    if messages:
        marked = _mark_messages_up_to(messages, len(messages) - 1)
        previous = _previous_user_turn(messages)
        if marked is not None and previous is not None and previous < marked:
            _mark_messages_up_to(messages, previous)
        params["messages"] = messages
