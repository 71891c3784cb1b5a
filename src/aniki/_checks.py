"""Checks shared by the message types: text that encodes, mappings with known keys, and
values shown safely in an error message whatever they hold."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .errors import ValidationError

__all__ = ["check_mapping", "check_text", "keys_shown", "shown"]


def shown(value: object) -> str:
    """``value`` for an error message: short, and safe for any input (huge, deeply nested)."""
    if isinstance(value, str):
        head = repr(value[:40])  # an unprintable character shows as up to 10 characters
        if len(head) > 60:
            head = head[:60]
        elif len(value) <= 40:
            return head
        return f"{head}... ({len(value)} characters)"
    if value is None or isinstance(value, (bool, float)):
        return repr(value)
    if isinstance(value, int):  # a huge int's repr is long (or refused past 4300 digits)
        return repr(value) if -(10**20) < value < 10**20 else f"an int of {value.bit_length()} bits"
    # The repr of a hostile container can be huge or recurse too deeply: name the type only.
    return f"a {type(value).__name__}"


def check_text(value: object, where: str, *, field: str) -> str:
    """``value`` when it is a string that encodes as UTF-8, else ``ValidationError``."""
    if not isinstance(value, str):
        raise ValidationError(f"{where} must be a string, got {type(value).__name__}", field=field)
    if value.isascii():  # no surrogates possible; spares encoding a long text
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValidationError(
            f"{where} is not valid Unicode text (a lone surrogate at index {exc.start}); "
            "decode the source bytes properly before storing them",
            field=field,
        ) from None
    return value


def check_mapping(data: object, what: str, allowed: frozenset[str], *, field: str) -> None:
    """``ValidationError`` unless ``data`` is a mapping holding only ``allowed`` keys."""
    if not isinstance(data, Mapping):
        raise ValidationError(f"{what} must be a mapping, got {type(data).__name__}", field=field)
    unknown = set(data) - allowed
    if unknown:
        raise ValidationError(
            f"unknown key(s) in {what}: {keys_shown(unknown)}; allowed: {sorted(allowed)}",
            field=field,
        )


def keys_shown(keys: Iterable[object]) -> str:
    """Up to five of ``keys``, shown safely, and how many more there are."""
    listed = sorted(shown(key) for key in keys)
    return ", ".join(listed[:5]) + (f" (+{len(listed) - 5} more)" if len(listed) > 5 else "")
