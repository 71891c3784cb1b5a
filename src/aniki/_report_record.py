"""A :class:`~aniki.ContextReport` as an assistant message keeps it: its stored form in
``Message.to_dict()`` (``"context"``), read back with the checks that make a damaged record a
:class:`~aniki.ValidationError` naming the field, never a ``KeyError``.

The report's ``usage`` is not in its record: the message keeps it once, as its own ``usage``,
and :func:`report_from_record` is handed it back. ``shortened_messages`` is in it only when it
is not 0, so a record without it reads as 0 and a report without shortened messages is stored
as it was before that field existed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ._checks import check_mapping, shown
from .errors import ValidationError
from .reports import ContextReport, ContextTokens
from .usage import Usage

__all__ = ["check_report", "report_from_record", "report_record"]

_REPORT_KEYS = ("stored_messages", "sent_messages", "summarized_messages", "tokens", "prefix_kept")
_REPORT_KEY_SET = frozenset(_REPORT_KEYS)
_SHORTENED = "shortened_messages"
_REPORT_KEYS_SHORTENED = _REPORT_KEY_SET | {_SHORTENED}
_TOKEN_KEYS = tuple(spec.name for spec in fields(ContextTokens))
_TOKEN_KEY_SET = frozenset(_TOKEN_KEYS)


def report_record(report: ContextReport) -> dict[str, Any]:
    """``report`` as a JSON-safe dict, without its ``usage``: the assistant message that
    keeps the report keeps that once, as its own :attr:`~aniki.Message.usage`."""
    tokens = report.tokens
    record: dict[str, Any] = {
        "stored_messages": report.stored_messages,
        "sent_messages": report.sent_messages,
        "summarized_messages": report.summarized_messages,
        "tokens": {
            "instructions": tokens.instructions,
            "tools": tokens.tools,
            "summary": tokens.summary,
            "history": tokens.history,
        },
        "prefix_kept": report.prefix_kept,
    }
    if report.shortened_messages:
        record[_SHORTENED] = report.shortened_messages
    return record


def report_from_record(data: Any, usage: Usage | None) -> ContextReport:
    """The report :func:`report_record` wrote, with ``usage`` (the message's); a
    :class:`~aniki.ValidationError` naming the field (``context.tokens.history``) when
    ``data`` is not such a record."""
    keys = data.keys() if type(data) is dict else None
    if keys in (_REPORT_KEY_SET, _REPORT_KEYS_SHORTENED):  # as aniki writes it: one pass
        tokens, stored, kept = data["tokens"], data["stored_messages"], data["prefix_kept"]
        sent, summarized = data["sent_messages"], data["summarized_messages"]
        shortened = data.get(_SHORTENED, 0)
        if (
            type(shortened) is int
            and shortened >= 0
            and type(tokens) is dict
            and tokens.keys() == _TOKEN_KEY_SET
            and (stored is None or (type(stored) is int and stored >= 0))
            and type(sent) is int
            and sent >= 0
            and type(summarized) is int
            and summarized >= 0
            and (kept is None or type(kept) is bool)
        ):
            counts = tokens["instructions"], tokens["tools"], tokens["summary"], tokens["history"]
            if (  # spelled out: a generator over four counts costs twice as much
                type(counts[0]) is int
                and type(counts[1]) is int
                and type(counts[2]) is int
                and type(counts[3]) is int
                and min(counts) >= 0
            ):
                return _made(stored, sent, summarized, counts, kept, usage, shortened)
    check_mapping(data, "a context report", _REPORT_KEYS_SHORTENED, field="context")
    _check_present(data, _REPORT_KEYS, "a context report", "context")
    tokens = data["tokens"]
    check_mapping(tokens, "context tokens", _TOKEN_KEY_SET, field="context.tokens")
    _check_present(tokens, _TOKEN_KEYS, "context tokens", "context.tokens")
    report = ContextReport(
        stored_messages=data["stored_messages"],
        sent_messages=data["sent_messages"],
        summarized_messages=data["summarized_messages"],
        tokens=ContextTokens(**{name: tokens[name] for name in _TOKEN_KEYS}),
        prefix_kept=data["prefix_kept"],
        usage=usage,
        shortened_messages=data.get(_SHORTENED, 0),
    )
    check_report(report)
    return report


def check_report(report: object, usage: object = None) -> None:
    """``ValidationError`` unless ``report`` is a :class:`ContextReport` a message can keep:
    counts are ints from 0 (``stored_messages`` may be ``None``), ``prefix_kept`` a bool or
    ``None``, and its ``usage`` is ``usage``, the message's own (kept once, on the message)."""
    if not isinstance(report, ContextReport):
        raise ValidationError(
            f"context must be a ContextReport or None, got {type(report).__name__}",
            field="context",
        )
    if report.stored_messages is not None:
        _check_count(report.stored_messages, "context.stored_messages", "or None")
    _check_count(report.sent_messages, "context.sent_messages")
    _check_count(report.summarized_messages, "context.summarized_messages")
    _check_count(report.shortened_messages, "context.shortened_messages")
    tokens = report.tokens
    if not isinstance(tokens, ContextTokens):
        raise ValidationError(
            f"context tokens must be a ContextTokens, got {type(tokens).__name__}",
            field="context.tokens",
        )
    for name in _TOKEN_KEYS:
        _check_count(getattr(tokens, name), f"context.tokens.{name}")
    if report.prefix_kept is not None and type(report.prefix_kept) is not bool:
        raise ValidationError(
            f"context.prefix_kept must be True, False or None, got {shown(report.prefix_kept)}",
            field="context.prefix_kept",
        )
    if report.usage != usage:
        raise ValidationError(
            "context.usage must be the message's usage (a message keeps it once): "
            "pass usage=report.usage with context=report",
            field="context.usage",
        )


def _check_count(value: object, field: str, more: str = "") -> None:
    # type() rather than isinstance(): a bool is not a count, and an int subclass could
    # write itself differently from an int in the stored JSON.
    if type(value) is not int or value < 0:
        also = f" {more}" if more else ""
        raise ValidationError(
            f"{field} must be a count (an int from 0){also}, got {shown(value)}", field=field
        )


def _check_present(data: Mapping[str, Any], keys: tuple[str, ...], what: str, field: str) -> None:
    missing = [key for key in keys if key not in data]
    if missing:
        raise ValidationError(
            f"{what} needs {missing} (a stored report has all of {list(keys)})",
            field=f"{field}.{missing[0]}",
        )


def _made(
    stored: int | None,
    sent: int,
    summarized: int,
    counts: tuple[int, int, int, int],
    kept: bool | None,
    usage: Usage | None,
    shortened: int,
) -> ContextReport:
    """A report from checked values, made with the slots' own setters: a frozen dataclass's
    ``__init__`` costs twice as much, and a store reads one report per assistant message."""
    tokens = _new(ContextTokens)
    _set_instructions(tokens, counts[0])
    _set_tools(tokens, counts[1])
    _set_summary(tokens, counts[2])
    _set_history(tokens, counts[3])
    report = _new(ContextReport)
    _set_stored(report, stored)
    _set_sent(report, sent)
    _set_summarized(report, summarized)
    _set_tokens(report, tokens)
    _set_kept(report, kept)
    _set_usage(report, usage)
    _set_shortened(report, shortened)
    return report


_new = object.__new__
_set_instructions, _set_tools, _set_summary, _set_history = (
    ContextTokens.__dict__[name].__set__ for name in _TOKEN_KEYS
)
_set_stored, _set_sent, _set_summarized, _set_tokens, _set_kept, _set_usage, _set_shortened = (
    ContextReport.__dict__[name].__set__ for name in (*_REPORT_KEYS, "usage", _SHORTENED)
)
