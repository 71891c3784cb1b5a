"""Stored messages turned into what the templates show: plain values, no markup.

Every string here is data from the store. The templates escape it (Jinja's autoescape) and
:func:`shown` writes control and bidirectional-override characters as visible escapes, so a
message can neither inject markup nor reorder what the page shows.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from ..cli._common import plain
from ..messages import Message
from ..reports import ContextReport
from ..sessions._blobs import AttachmentRef
from ..sessions._pages import NamedPage
from ..usage import Usage

__all__ = [
    "FILTERS",
    "INLINE_IMAGES",
    "MessageView",
    "dollars",
    "message_view",
    "page_views",
    "shown",
]

INLINE_IMAGES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""Attachments shown as pictures; every other kind is offered as a download."""


def shown(value: object) -> str:
    """``value`` as text with control and bidi characters written as escapes (``\\x1b``,
    ``\\u202e``); tab and newline are kept: what the ``aniki`` command prints."""
    return plain(value)


@dataclass(frozen=True, slots=True)
class CallShown:
    name: str
    id: str
    arguments: str
    """Pretty-printed when they are JSON, else the model's text as it came."""


@dataclass(frozen=True, slots=True)
class AttachmentShown:
    number: int
    line: str
    """What it is in one line: ``image/png, 200 KB, sha256 1a2b3c4d5e6f…, chart.png``."""
    sha256: str | None
    """The whole hash of its bytes (``None`` for an attachment by URL)."""
    stored: bool
    """Whether the store holds its bytes (offered as a download, or shown as a picture)."""
    picture: bool
    """Whether it is shown inline (a raster image whose bytes the store holds)."""


@dataclass(frozen=True, slots=True)
class ReasoningShown:
    text: str
    signed: bool
    redacted: int | None
    """The length of a redacted payload, when the provider hid the thinking."""


@dataclass(frozen=True, slots=True)
class MessageView:
    """One message as the conversation page shows it."""

    index: int
    role: str
    content: str
    tool_calls: tuple[CallShown, ...]
    tool_call_id: str | None
    attachments: tuple[AttachmentShown, ...]
    reasoning: tuple[ReasoningShown, ...]
    id: str | None
    created_at: str | None
    model: str | None
    usage: str | None
    report: str | None
    """The kept context report in one line (assistant messages of a model call)."""
    window: tuple[int, int] | None
    """The indexes of the first and last stored message the call sent."""
    sealed: bool
    """Whether the content is an ``EncryptedSession`` record (the page has no key)."""


def page_views(page: NamedPage) -> list[MessageView]:
    """What the page shows of each message of ``page``."""
    return [
        message_view(page.start + offset, message, page.attachments[offset])
        for offset, message in enumerate(page.messages)
    ]


def message_view(
    index: int, message: Message, attachments: Sequence[AttachmentRef] = ()
) -> MessageView:
    """What the page shows of ``message``, the history's message at ``index``, with what
    names its attachments (read apart from it: see
    :func:`~aniki.sessions._pages.read_named_page`)."""
    report = message.context
    window = None
    if report is not None and report.sent_messages:
        window = (max(0, index - report.sent_messages), index - 1)
    return MessageView(
        index=index,
        role=message.role,
        content=message.content,
        tool_calls=tuple(
            CallShown(call.name, call.id, _arguments(call.arguments)) for call in message.tool_calls
        ),
        tool_call_id=message.tool_call_id,
        attachments=tuple(
            AttachmentShown(
                number,
                part.line(),
                part.sha256,
                part.url is None,
                part.url is None and part.media_type in INLINE_IMAGES,
            )
            for number, part in enumerate(attachments)
        ),
        reasoning=tuple(
            ReasoningShown(
                part.text,
                part.signature is not None,
                None if part.redacted is None else len(part.redacted),
            )
            for part in message.reasoning
        ),
        id=message.id,
        created_at=_time(message.created_at),
        model=message.model,
        usage=None if message.usage is None else usage_line(message.usage),
        report=None if report is None else report_line(report),
        window=window,
        sealed=message.content.startswith(_SEALED),
    )


_SEALED = ("aniki-enc:v1:", "aniki-enc:v2:")  # aniki.sessions.encrypted's record prefixes


def usage_line(usage: Usage) -> str:
    """What a provider billed for one call, in one line."""
    parts = [f"{usage.input_tokens:,} in", f"{usage.output_tokens:,} out"]
    if usage.cache_read_tokens:
        share = usage.cache_read_tokens / usage.input_tokens if usage.input_tokens else 0.0
        parts.append(f"{usage.cache_read_tokens:,} from cache ({share:.0%})")
    if usage.cache_write_tokens:
        parts.append(f"{usage.cache_write_tokens:,} written to cache")
    return ", ".join(parts)


def dollars(value: float) -> str:
    """An amount of dollars: cents from $1 up (``$1,234.50``), else three significant
    digits (``$0.0123``, ``$0.000150``), so a cheap call does not read as ``$0.00``."""
    if value >= 1 or value <= 0:
        return f"${value:,.2f}"
    return f"${value:.{2 - math.floor(math.log10(value))}f}"


def report_line(report: ContextReport) -> str:
    """A kept context report in one line, without what the provider billed."""
    stored = "?" if report.stored_messages is None else f"{report.stored_messages:,}"
    parts = [f"{report.sent_messages:,} of {stored} messages sent"]
    if report.summarized_messages:
        parts.append(f"{report.summarized_messages:,} summarized")
    if report.shortened_messages:
        parts.append(f"{report.shortened_messages:,} shortened to fit")
    parts.append(f"~{report.tokens.total:,} tokens")
    if report.prefix_kept is not None:
        parts.append("prefix kept" if report.prefix_kept else "prefix changed")
    return ", ".join(parts)


def _arguments(text: str) -> str:
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


FILTERS = {"shown": shown, "dollars": dollars}
"""The filters the templates use: ``{{ text | shown }}``, ``{{ cost | dollars }}``."""
