"""The attributes of aniki's spans that are plain functions of a run's data: usage, a
context report, the provider, the session and the server (pure: no spans, no I/O)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from opentelemetry.util.types import AttributeValue

from . import _names as n

if TYPE_CHECKING:
    from ..reports import ContextReport
    from ..usage import Usage

__all__ = [
    "Attributes",
    "provider_name",
    "report_attributes",
    "server",
    "session_id",
    "usage_attributes",
]

Attributes = dict[str, AttributeValue]


def usage_attributes(usage: Usage, *, cache_writes: bool) -> Attributes:
    """``usage`` as attributes; ``cache_writes``: the provider counts cache writes, so a zero
    is a figure (see ``_otel._CACHE_WRITE_REPORTERS``)."""
    attributes: Attributes = {
        n.USAGE_INPUT_TOKENS: usage.input_tokens,
        n.USAGE_OUTPUT_TOKENS: usage.output_tokens,
        n.USAGE_CACHE_READ_INPUT_TOKENS: usage.cache_read_tokens,
    }
    if cache_writes or usage.cache_write_tokens:
        attributes[n.USAGE_CACHE_CREATION_INPUT_TOKENS] = usage.cache_write_tokens
    return attributes


def report_attributes(report: ContextReport, pending: int) -> Attributes:
    """A model call's :class:`~aniki.ContextReport`; ``pending`` of the messages sent were not
    stored yet (a stream's, and a correction after a reply that missed the output schema)."""
    tokens = report.tokens
    attributes: Attributes = {
        n.CONTEXT_SENT_MESSAGES: report.sent_messages,
        n.CONTEXT_SUMMARIZED_MESSAGES: report.summarized_messages,
        n.CONTEXT_TOKENS: tokens.total,
        n.CONTEXT_TOKENS_INSTRUCTIONS: tokens.instructions,
        n.CONTEXT_TOKENS_TOOLS: tokens.tools,
        n.CONTEXT_TOKENS_SUMMARY: tokens.summary,
        n.CONTEXT_TOKENS_HISTORY: tokens.history,
    }
    if report.stored_messages is not None:
        stored = report.stored_messages
        attributes[n.CONTEXT_STORED_MESSAGES] = stored
        sent_from_store = report.sent_messages - pending
        attributes[n.CONTEXT_OMITTED_MESSAGES] = max(
            stored - sent_from_store - report.summarized_messages, 0
        )
    if report.prefix_kept is not None:
        attributes[n.CONTEXT_PREFIX_KEPT] = report.prefix_kept
    if report.shortened_messages:
        attributes[n.CONTEXT_SHORTENED_MESSAGES] = report.shortened_messages
    return attributes


def provider_name(provider: object) -> str:
    """``gen_ai.provider.name``: the provider's ``name`` (``"openai"``, ``"anthropic"``), the
    registry name it is built from, or its class's name (``MockProvider``: ``"mock"``)."""
    if isinstance(provider, str):
        return provider
    name = getattr(provider, "name", None)
    if isinstance(name, str) and name:
        return name
    kind = type(provider).__name__
    return kind.removesuffix("Provider").lower() or kind.lower()


def session_id(session: Any) -> str | None:
    try:
        value = session.id
    except Exception:  # a custom session's id may be anything; tracing must not fail a run
        return None
    return None if value is None else str(value)


def server(provider: object) -> Attributes:
    """``server.address`` and ``server.port`` of a provider that has a ``base_url``."""
    url = getattr(provider, "base_url", None)
    if not isinstance(url, str):
        return {}
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return {}
    attributes: Attributes = {}
    if parts.hostname:
        attributes[n.SERVER_ADDRESS] = parts.hostname
    if port is not None:
        attributes[n.SERVER_PORT] = port
    return attributes
