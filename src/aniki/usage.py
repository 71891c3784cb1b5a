"""Token and request counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ._checks import check_mapping, shown
from .errors import ValidationError

__all__ = ["Usage"]


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}" + ("" if count == 1 else "s")


@dataclass(frozen=True, slots=True)
class Usage:
    """What model calls cost. Usages add up: ``Usage(requests=1) + Usage(requests=1)``.

    ``cache_read_tokens`` and ``cache_write_tokens`` are parts of ``input_tokens``, not
    additions to it. A reply without token counts (llama.cpp's OpenAI-compatible server
    sends none in a stream) leaves its request counted in ``unreported_requests``: the token
    figures are then a lower bound, not a measured total.

    Example::

        total = Usage(input_tokens=1200, output_tokens=40, requests=1, cache_read_tokens=1000)
        total += Usage(requests=1, unreported_requests=1)
        total.requests  # 2
        total.describe()  # '..., 2 requests; tokens not reported for 1 of 2 requests'
    """

    input_tokens: int = 0
    """Tokens sent to the model (the prompt), including those read from or written to the
    provider's prompt cache."""
    output_tokens: int = 0
    """Tokens the model produced (completion)."""
    requests: int = 0
    """Model calls made."""
    cache_read_tokens: int = 0
    """Of ``input_tokens``, those served from the provider's prompt cache (billed at about a
    tenth of the input price; no prefill needed)."""
    cache_write_tokens: int = 0
    """Of ``input_tokens``, those written to the provider's prompt cache for later requests to
    read (Anthropic bills them at 1.25 times the input price; OpenAI reports none)."""
    unreported_requests: int = 0
    """Of ``requests``, those whose reply carried no token counts. When it is not zero, the
    token figures are a lower bound: those requests cost tokens that are not counted here."""

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def describe(self) -> str:
        """The usage in words, saying which requests had no token counts.

        For example ``'1,200 tokens in (1,000 read from cache, 0 written), 40 out,
        2 requests; tokens not reported for 1 of 2 requests'``.
        """
        requests = _plural(self.requests, "request")
        if self.requests and self.unreported_requests >= self.requests:
            return f"{requests}; tokens not reported"
        text = (
            f"{self.input_tokens:,} tokens in ({self.cache_read_tokens:,} read from cache, "
            f"{self.cache_write_tokens:,} written), {self.output_tokens:,} out, {requests}"
        )
        if self.unreported_requests:
            text += (
                f"; tokens not reported for {self.unreported_requests:,} of "
                f"{self.requests:,} requests"
            )
        return text

    def __str__(self) -> str:
        return self.describe()

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            unreported_requests=self.unreported_requests + other.unreported_requests,
        )

    def to_dict(self) -> dict[str, int]:
        """JSON-safe: the counts that are not zero (``{}`` for an empty usage)."""
        return {name: value for name in _FIELDS if (value := getattr(self, name))}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Usage:
        """Build a usage from :meth:`to_dict`'s mapping (absent counts are zero)."""
        check_mapping(data, "a usage", _FIELD_SET, field="usage")
        for name, value in data.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValidationError(
                    f"usage {name} must be a count (an int from 0), got {shown(value)}",
                    field=f"usage.{name}",
                )
        return cls(**data)


_FIELDS = tuple(spec.name for spec in fields(Usage))
_FIELD_SET = frozenset(_FIELDS)
