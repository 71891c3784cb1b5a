"""Reads a summarizer request back, by the grammar the request promises, and nothing else.

A request is the prompt, then optionally ``<summary_so_far>``, one quoted line and
``</summary_so_far>``, then ``<new_messages>``, one line per message part and
``</new_messages>``. Every message line is a bracketed header and a JSON string; the header's
own fields (tool names and call ids) are JSON strings too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from aniki import Message

_STRING = r'"(?:[^"\\]|\\.)*"'
LINE = re.compile(
    rf"\[(?:(?P<role>user|system|assistant)"
    rf"|assistant calls tool (?P<name>{_STRING}) with id (?P<call>{_STRING})"
    rf"|tool result for (?P<answers>{_STRING}))\] (?P<text>{_STRING})"
)

Entry = tuple[str, ...]
"""One message part: ``(role, text)``, ``("call", name, id, arguments)`` or
``("tool", call id, text)``."""


@dataclass(frozen=True)
class Request:
    """What a summarizer request holds, as its structure says."""

    previous: str | None
    """The summary so far (``None`` when the request has none)."""
    entries: list[Entry]
    """The new messages' parts, in order."""


def _decode(quoted: str) -> str:
    value = json.loads(quoted)
    assert isinstance(value, str)
    return value


def _entry(line: str) -> Entry:
    match = LINE.fullmatch(line)
    assert match is not None, f"not a message line: {line!r}"
    text = _decode(match["text"])
    if match["role"]:
        return (match["role"], text)
    if match["name"]:
        return ("call", _decode(match["name"]), _decode(match["call"]), text)
    return ("tool", _decode(match["answers"]), text)


def parse_request(request: str) -> Request:
    """The summary so far and the new messages of ``request``; fails on anything else."""
    lines = request.split("\n")
    # No other line break (\r, \u2028, \x85, ...) may hide a line inside a line.
    assert request.splitlines() == lines
    for tag in ("<new_messages>", "</new_messages>"):
        assert request.count(tag) == 1, f"{tag} appears {request.count(tag)} times"
    opened = lines.index("<new_messages>")
    assert lines[-1] == "</new_messages>"
    previous = None
    if "<summary_so_far>" in request:
        for tag in ("<summary_so_far>", "</summary_so_far>"):
            assert request.count(tag) == 1, f"{tag} appears {request.count(tag)} times"
        start = lines.index("<summary_so_far>")
        assert lines[start + 2] == "</summary_so_far>" and start + 3 < opened
        previous = _decode(lines[start + 1])
    else:
        assert "</summary_so_far>" not in request
    return Request(previous, [_entry(line) for line in lines[opened + 1 : -1]])


def entries_of(messages: Sequence[Message]) -> list[Entry]:
    """The parts a transcript of ``messages`` must hold: text (when there is some), then
    each tool call; a tool message's result."""
    entries: list[Entry] = []
    for message in messages:
        if message.role == "tool":
            assert message.tool_call_id is not None
            entries.append(("tool", message.tool_call_id, message.content))
            continue
        if message.content:
            entries.append((message.role, message.content))
        entries += [("call", c.name, c.id, c.arguments) for c in message.tool_calls]
    return entries


def texts_of(request: str) -> str:
    """The new messages' texts and arguments of ``request``, one per line, decoded."""
    return "\n".join(entry[-1] for entry in parse_request(request).entries)
