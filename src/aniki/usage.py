"""Token and request counts."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """What model calls cost. Usages add up: ``Usage(requests=1) + Usage(requests=1)``.

    Example::

        total = Usage(input_tokens=10, output_tokens=2, requests=1) + Usage(requests=1)
        total.requests  # 2
    """

    input_tokens: int = 0
    """Tokens sent to the model (prompt)."""
    output_tokens: int = 0
    """Tokens the model produced (completion)."""
    requests: int = 0
    """Model calls made."""

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
        )
