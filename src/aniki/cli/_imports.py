"""Reading a session export for ``aniki sessions import``: the whole file checked first.

Nothing is written until every message is valid and the tool calls and their results pair
up as every provider requires; a problem is reported with the line (or message) it is on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..errors import UserError, ValidationError
from ..messages import Message

__all__ = ["check_tool_pairs", "parse_export"]

_NOTHING = "nothing was imported"


def parse_export(file: Path) -> tuple[str | None, list[Message]]:
    """Read a ``json`` or ``jsonl`` export: ``(session id if recorded, messages)``.

    Raises :class:`~aniki.UserError` naming the file and the line (JSON lines) or message
    (a JSON document) of the first problem; an export without messages is a problem too.
    """
    try:
        content = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise UserError(
            f"{file} is not UTF-8 text (byte {exc.start}): {_NOTHING}; "
            "an export is JSON lines or a JSON document in UTF-8"
        ) from None
    document = _document(file, content)
    if document is not None:
        found_id, entries = document
        where = "message"
    else:
        found_id, entries = None, _lines(file, content)
        where = "line"
    messages = []
    for number, entry in entries:
        try:
            messages.append(Message.from_dict(entry))
        except ValidationError as exc:
            raise UserError(
                f"{file}, {where} {number}: an invalid message: {exc}; {_NOTHING}"
            ) from None
    if not messages:
        raise UserError(f"{file} holds no messages; {_NOTHING}")
    problem = check_tool_pairs(messages)
    if problem is not None:
        index, reason = problem
        raise UserError(f"{file}, {where} {entries[index][0]}: {reason}; {_NOTHING}")
    return found_id, messages


def check_tool_pairs(messages: Sequence[Message]) -> tuple[int, str] | None:
    """``(index, reason)`` of the first message that breaks the tool-call pairing, or None.

    The rule providers enforce: the results of an assistant message's tool calls come right
    after it (in any order), one per call, before any other message.
    """
    pending: dict[str, int] = {}  # call id -> index of the assistant message that made it
    for index, message in enumerate(messages):
        if message.role == "tool":
            if message.tool_call_id not in pending:
                return index, (
                    f"a tool result answers no pending call (id {message.tool_call_id!r}): "
                    "tool results must follow the assistant message that made the call"
                )
            del pending[message.tool_call_id]
            continue
        if pending:
            return _unanswered(pending)
        for call in message.tool_calls:
            pending[call.id] = index
    if pending:
        return _unanswered(pending)
    return None


def _unanswered(pending: dict[str, int]) -> tuple[int, str]:
    call_id, index = next(iter(pending.items()))
    return index, (
        f"tool call {call_id!r} is not answered: a tool result for each call must follow "
        "the assistant message that made it"
    )


def _document(file: Path, content: str) -> tuple[str | None, list[tuple[int, Any]]] | None:
    """A JSON export document (``{"messages": [...]}``), or None for JSON lines."""
    stripped = content.lstrip()
    if not (stripped.startswith("{") and '"messages"' in stripped[:4096]):
        return None
    parsed = _json(file, content, "")
    if not (isinstance(parsed, dict) and isinstance(parsed.get("messages"), list)):
        return None
    found_id = parsed.get("id")
    if found_id is not None and not isinstance(found_id, str):
        raise UserError(f"{file}: the export's id must be a string; {_NOTHING}")
    return found_id, list(enumerate(parsed["messages"], start=1))


def _lines(file: Path, content: str) -> list[tuple[int, Any]]:
    # Lines end at "\n" only: str.splitlines() also splits at U+2028, U+0085 and other
    # characters that JSON strings may hold unescaped (an export writes them as they are).
    return [
        (number, _json(file, line, f", line {number}"))
        for number, line in enumerate(content.split("\n"), start=1)
        if line.strip()
    ]


def _json(file: Path, content: str, where: str) -> Any:
    try:
        return json.loads(content)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{file}{where} is not JSON ({exc}): an export is JSON lines or a JSON document; "
            f"{_NOTHING}"
        ) from None
    except RecursionError:
        raise UserError(
            f"{file}{where}: the JSON is nested too deeply to read; {_NOTHING}"
        ) from None
