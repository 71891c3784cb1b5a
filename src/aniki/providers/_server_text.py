"""What a server said about its failure: text an error message can quote, and whether it
says the prompt does not fit the context window (pure, no I/O).

A server explains a failure in one of a few shapes: the vendors' ``{"error": {"message":
...}}`` or ``{"message": ...}``, ``{"error": "..."}`` (Ollama, LM Studio), FastAPI's
``{"detail": "..."}`` or its list of validation errors (vLLM and most Python servers), or
plain text (a proxy's page, a traceback). The line that says what was wrong is often the
last one, after a long traceback or an echo of the request, so the text is kept whole up
to :data:`MAX_QUOTED` characters, and beyond that its start and its end are kept.

Credentials a server may echo (``Authorization: Bearer ...``, ``api_key=...``) are taken
out of the quoted text (:func:`~aniki._secrets.hide_credentials`); the provider's own key is
scrubbed before (see :mod:`._errors`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from .._secrets import hide_credentials

__all__ = [
    "MAX_QUOTED",
    "context_window_exceeded",
    "quoted",
    "server_message",
]

MAX_QUOTED = 4_000
"""Characters of a server's explanation an error message quotes whole (the body keeps all)."""

# Phrases the vendors and the common compatible servers use when a prompt does not fit:
# OpenAI and vLLM ("maximum context length", code context_length_exceeded), llama.cpp
# ("exceeds the available context size", type exceed_context_size_error), Anthropic
# ("prompt is too long", "exceed context limit"), LM Studio ("context ... overflows").
_CONTEXT_PATTERNS = re.compile(
    r"context[_ ]length[_ ]exceeded"
    r"|maximum context length"
    r"|exceed(?:s|ed)?[_ ](?:the )?(?:available |model'?s? )?context"
    r"|context (?:window|length|limit|size)[^.]{0,60}?(?:exceed|overflow)"
    r"|context (?:the )?overflows"
    r"|prompt is too long"
    r"|too many tokens in (?:the )?(?:prompt|context)",
    re.IGNORECASE,
)

_HEAD = 1_800
_TAIL = 1_800
"""What is kept of a longer text: its start, and its end, where a traceback says what broke."""


def quoted(text: str) -> str:
    """``text`` as an error message quotes it: whole up to :data:`MAX_QUOTED` characters,
    else its start and end around a note of how much was left out."""
    text = hide_credentials(text.strip())
    if len(text) <= MAX_QUOTED:
        return text
    left_out = len(text) - _HEAD - _TAIL
    return (
        f"{text[:_HEAD]} [... {left_out:,} of {len(text):,} characters left out; the error's "
        f"body has them all ...] {text[-_TAIL:]}"
    )


def _detail(value: Any) -> str | None:
    """FastAPI's ``detail``: a text, or a list of validation errors (``loc``, ``msg``)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list) or not value:
        return None
    lines = []
    for item in value:
        if isinstance(item, Mapping) and isinstance(item.get("msg"), str):
            where = item.get("loc")
            path = ".".join(str(part) for part in where) if isinstance(where, list) else ""
            lines.append(f"{path}: {item['msg']}" if path else item["msg"])
        else:
            lines.append(json.dumps(item, ensure_ascii=False, default=str))
    return "; ".join(lines)


def _said(body: Any) -> str | None:
    node = body
    for _ in range(2):  # {"error": {"message": ...}} or {"message": ...}
        if isinstance(node, Mapping):
            for key in ("message", "detail"):
                said = _detail(node.get(key))
                if said and said.strip():
                    return said
            node = node.get("error")
        elif isinstance(node, str) and node.strip():
            return node
    return None


def server_message(body: Any) -> str | None:
    """The human-readable text of an error body, in any of the shapes above, as quoted."""
    said = _said(body)
    return None if said is None else quoted(said)


def _body_codes(body: Any) -> list[str]:
    """The machine-readable codes and types an error body carries, at any of its levels."""
    codes: list[str] = []
    node = body
    for _ in range(2):
        if not isinstance(node, Mapping):
            break
        codes += [str(node[key]) for key in ("code", "type") if node.get(key) is not None]
        node = node.get("error")
    return codes


def context_window_exceeded(body: Any, message: str | None = None) -> bool:
    """Whether an error body (or message) says the request does not fit the context window."""
    texts = [*_body_codes(body), _said(body) or "", message or ""]
    return any(_CONTEXT_PATTERNS.search(text) for text in texts if text)
