"""What a model call costs, as OpenAI and Anthropic bill it, prompt cache included.

The figures below are the providers' published prices in US dollars per million tokens, and
their published prompt-caching rules, read from the pages named in each list's
:class:`CacheRules` (``source``) on the date it gives (``checked``). Prices change: check the
source before relying on a figure, and build your own :class:`Prices` or :class:`PriceList`
for a model that is not listed, a negotiated rate, or a newer price. Nothing here calls a
provider.

Example::

    from aniki import Usage
    from aniki.pricing import prices_for

    usage = Usage(input_tokens=12_000, output_tokens=800, requests=3, cache_read_tokens=9_000)
    prices_for("gpt-4o-mini-2024-07-18").cost(usage)  # 0.001605 dollars

It imports nothing but aniki's :class:`~aniki.Usage` and errors: no provider client, no pydantic.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from types import MappingProxyType

from .errors import UserError
from .usage import Usage

__all__ = ["ANTHROPIC", "OPENAI", "CacheRules", "PriceList", "Prices", "prices_for"]

_MILLION = 1_000_000
_RELEASE = re.compile(r"(-\d{4}-\d{2}-\d{2}|-\d{8}|-latest)?")
"""What may follow a listed name in a model id: a dated release, or ``-latest``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheRules:
    """How a provider's prompt cache works and bills, as it publishes it.

    Example::

        CacheRules(read=0.5, minimum=1024, step=128, ttl_seconds=300)  # a cache of your own
    """

    read: float
    """What a token read from the cache costs, as a multiple of the input price (0.1: a tenth)."""
    write: float = 1.0
    """What a token written to the cache costs, as a multiple of the input price (1.0: no
    premium)."""
    write_1h: float | None = None
    """The write multiple for Anthropic's one-hour cache; ``None`` where there is none."""
    minimum: int = 0
    """The shortest prefix, in tokens, the cache holds (a model's :attr:`Prices.minimum` may
    differ)."""
    step: int = 1
    """Cached prefixes are counted in steps of this many tokens (rounded down)."""
    breakpoints: int | None = None
    """The most cache breakpoints one request may mark; ``None`` where the provider caches
    on its own, without breakpoints."""
    ttl_seconds: int = 300
    """How long an unused cached prefix lives, by default."""
    source: str = ""
    """Where the rules and the figures were read."""
    checked: str = ""
    """The date they were read (``YYYY-MM-DD``)."""

    def __post_init__(self) -> None:
        for name in ("read", "write", "write_1h"):
            value = getattr(self, name)
            if value is not None and not (_is_number(value) and value >= 0):
                raise UserError(f"CacheRules {name} must be a multiple of 0 or more, got {value!r}")
        _check_count("CacheRules minimum", self.minimum)
        _check_count("CacheRules ttl_seconds", self.ttl_seconds)
        if _check_count("CacheRules step", self.step) < 1:
            raise UserError("CacheRules step must be 1 or more (1: every token counts)")
        if (
            self.breakpoints is not None
            and _check_count("CacheRules breakpoints", self.breakpoints) < 1
        ):
            raise UserError("CacheRules breakpoints must be 1 or more, or None for no limit")


@dataclass(frozen=True, slots=True)
class Prices:
    """One model's prices in dollars per million tokens, and the cache rules that apply.

    Example::

        prices = Prices(
            "my-model", input=1.0, output=4.0, cache_read=0.1, cache_write=1.0,
            minimum=1024, rules=OPENAI.rules,
        )
        prices.cost(Usage(input_tokens=2_000, output_tokens=100, cache_read_tokens=1_024))
    """

    model: str
    """The model's name (a dated release of it finds these prices too)."""
    _: KW_ONLY
    input: float
    """Input tokens not served from or written to the cache."""
    output: float
    """Output tokens (reasoning tokens included, as providers bill them)."""
    cache_read: float
    """Input tokens read from the prompt cache."""
    cache_write: float
    """Input tokens written to the prompt cache (Anthropic's five-minute cache)."""
    minimum: int
    """The shortest prefix, in tokens, the cache holds for this model."""
    rules: CacheRules
    """The provider's caching rules."""

    def __post_init__(self) -> None:
        if not isinstance(self.model, str) or not self.model:
            raise UserError(f"Prices model must be a model's name, got {self.model!r}")
        for name in ("input", "output", "cache_read", "cache_write"):
            value = getattr(self, name)
            if not (_is_number(value) and value >= 0):
                raise UserError(
                    f"Prices {name} for {self.model} must be dollars per million tokens "
                    f"(0 or more), got {value!r}"
                )
        _check_count(f"Prices minimum for {self.model}", self.minimum)
        if not isinstance(self.rules, CacheRules):
            raise UserError(f"Prices rules for {self.model} must be a CacheRules")

    def cost(self, usage: Usage) -> float:
        """The dollars a provider bills for ``usage``: its uncached input at :attr:`input`,
        its cache reads at :attr:`cache_read`, its cache writes at :attr:`cache_write` and its
        output at :attr:`output`.

        Requests counted in ``usage.unreported_requests`` carried no token counts, so for
        them the figure is a lower bound.
        """
        _check_usage(usage)
        uncached = usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens
        return (
            uncached * self.input
            + usage.cache_read_tokens * self.cache_read
            + usage.cache_write_tokens * self.cache_write
            + usage.output_tokens * self.output
        ) / _MILLION

    def input_equivalents(self, usage: Usage) -> float:
        """:meth:`cost` as a number of uncached input tokens of this model: a bill that two
        models, or two ways of sending a history, can be compared by."""
        if self.input == 0:
            raise UserError(
                f"{self.model} has an input price of 0, so its bill has no input-token "
                "equivalent: compare cost() instead"
            )
        return self.cost(usage) / self.input * _MILLION

    def request(self, sent: int, cached_prefix: int, *, written: int = 0) -> float:
        """The predicted input dollars of one request of ``sent`` tokens, of which the first
        ``cached_prefix`` are a prefix the provider's cache holds, and ``written`` more are
        written to the cache (Anthropic) at :attr:`cache_write`.

        The cache rules apply: a prefix shorter than :attr:`minimum` is not served from the
        cache, and a longer one counts in whole steps of :attr:`CacheRules.step` tokens;
        nothing is written when the prefix up to the end of what is written is shorter than
        :attr:`minimum`. What the cache does not serve or take is billed at :attr:`input`.
        Output is not included: add ``output_tokens * output / 1e6``.
        """
        for name, value in (("sent", sent), ("cached_prefix", cached_prefix), ("written", written)):
            _check_count(f"request() {name}", value)
        if cached_prefix + written > sent:
            raise UserError(
                f"request(): cached_prefix ({cached_prefix:,}) plus written ({written:,}) is "
                f"more than sent ({sent:,}); both are parts of the tokens sent"
            )
        cached = 0
        if cached_prefix >= self.minimum:
            cached = cached_prefix - cached_prefix % self.rules.step
        if cached_prefix + written < self.minimum:
            written = 0
        uncached = sent - cached - written
        return (
            uncached * self.input + cached * self.cache_read + written * self.cache_write
        ) / _MILLION


@dataclass(frozen=True, slots=True)
class PriceList:
    """One provider's models and prices, under one set of cache rules.

    Example::

        OPENAI.prices("gpt-4o-mini-2024-07-18").input  # 0.15
        "gpt-5" in OPENAI.names()  # True
    """

    name: str
    """The provider (``"OpenAI"``)."""
    rules: CacheRules
    """Its caching rules."""
    models: Mapping[str, Prices]
    """Each model's name and prices."""

    def __post_init__(self) -> None:
        for key, prices in self.models.items():
            if not isinstance(prices, Prices) or prices.model != key:
                raise UserError(
                    f"PriceList {self.name}: the entry {key!r} must be the Prices of model "
                    f"{key!r}, got {prices!r}"
                )
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))

    def prices(self, model: str) -> Prices:
        """The prices of ``model``: a listed name, or a dated release of one
        (``gpt-4o-mini-2024-07-18``, ``claude-sonnet-4-5-20250929``, ``...-latest``).

        Raises :class:`~aniki.UserError` for a model the list does not know, naming the
        models it does.
        """
        found = _match(self.models, model)
        if found is None:
            raise UserError(_unknown(model, self.names(), f"{self.name}'s price list"))
        return found

    def names(self) -> tuple[str, ...]:
        """The listed models' names, sorted."""
        return tuple(sorted(self.models))


def prices_for(model: str) -> Prices:
    """The prices of ``model`` from :data:`OPENAI` or :data:`ANTHROPIC`: a listed name or a
    dated release of one, the longest listed name that fits (``gpt-4o-mini-2024-07-18``
    finds ``gpt-4o-mini``, not ``gpt-4o``).

    Raises :class:`~aniki.UserError` for any other model, naming the models it knows.
    """
    for price_list in (OPENAI, ANTHROPIC):
        found = _match(price_list.models, model)
        if found is not None:
            return found
    known = sorted((*OPENAI.names(), *ANTHROPIC.names()))
    raise UserError(_unknown(model, known, "aniki.pricing"))


def _match(models: Mapping[str, Prices], model: str) -> Prices | None:
    """The prices of the longest name in ``models`` that ``model`` is, or is a release of."""
    if not isinstance(model, str):
        raise UserError(f"name a model as a string, got {model!r}")
    best: Prices | None = None
    for name, prices in models.items():
        fits = model.startswith(name) and _RELEASE.fullmatch(model, len(name)) is not None
        if fits and (best is None or len(name) > len(best.model)):
            best = prices
    return best


def _unknown(model: str, known: tuple[str, ...] | list[str], where: str) -> str:
    return (
        f"{where} has no prices for model {model!r}; it knows {', '.join(known)} (and their "
        "dated releases). For another model, build a Prices of your own (see aniki.pricing)"
    )


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_count(what: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{what} must be a count of tokens (an int from 0), got {value!r}")
    return value


def _check_usage(usage: object) -> None:
    if not isinstance(usage, Usage):
        raise UserError(f"cost() takes an aniki.Usage, got {type(usage).__name__}")
    for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens"):
        _check_count(f"usage {name}", getattr(usage, name))
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    if cached > usage.input_tokens:
        raise UserError(
            f"usage counts {cached:,} cache tokens (read and written) but only "
            f"{usage.input_tokens:,} input tokens: cache tokens are parts of input_tokens, "
            "so input_tokens must include them"
        )


_CHECKED = "2026-12-07"

_OPENAI_RULES = CacheRules(
    read=0.5,
    write=1.0,
    write_1h=None,
    minimum=1024,
    step=128,
    breakpoints=None,
    ttl_seconds=300,
    source="https://platform.openai.com/docs/pricing and "
    "https://platform.openai.com/docs/guides/prompt-caching",
    checked=_CHECKED,
)
_ANTHROPIC_RULES = CacheRules(
    read=0.1,
    write=1.25,
    write_1h=2.0,
    minimum=1024,
    step=1,
    breakpoints=4,
    ttl_seconds=300,
    source="https://platform.claude.com/docs/en/about-claude/pricing and "
    "https://platform.claude.com/docs/en/build-with-claude/prompt-caching",
    checked=_CHECKED,
)


def _openai(model: str, input: float, cache_read: float, output: float) -> Prices:
    return Prices(
        model,
        input=input,
        output=output,
        cache_read=cache_read,
        cache_write=input,
        minimum=_OPENAI_RULES.minimum,
        rules=_OPENAI_RULES,
    )


# cache_read and cache_write are 0.1 and 1.25 times input, written out so no float rounding
# (0.1 * 3 == 0.30000000000000004) shows in a printed price.
def _anthropic(
    model: str, input: float, output: float, read: float, write: float, minimum: int
) -> Prices:
    return Prices(
        model,
        input=input,
        output=output,
        cache_read=read,
        cache_write=write,
        minimum=minimum,
        rules=_ANTHROPIC_RULES,
    )


OPENAI = PriceList(
    "OpenAI",
    _OPENAI_RULES,
    {
        p.model: p
        for p in (  # model, input, cached input, output
            _openai("gpt-4o-mini", 0.15, 0.075, 0.60),
            _openai("gpt-4o", 2.50, 1.25, 10.00),
            _openai("gpt-4.1", 2.00, 0.50, 8.00),
            _openai("gpt-4.1-mini", 0.40, 0.10, 1.60),
            _openai("gpt-4.1-nano", 0.10, 0.025, 0.40),
            _openai("gpt-5", 1.25, 0.125, 10.00),
            _openai("gpt-5-mini", 0.25, 0.025, 2.00),
            _openai("gpt-5-nano", 0.05, 0.005, 0.40),
            _openai("o3", 2.00, 0.50, 8.00),
            _openai("o4-mini", 1.10, 0.275, 4.40),
        )
    },
)
"""OpenAI's models, from the pages ``OPENAI.rules.source`` names.

OpenAI caches on its own every prompt of 1,024 tokens or more; a hit counts in steps of
128 tokens and costs 0.5, 0.25 or 0.1 times the input price depending on the model (``read``
is the least of those discounts; each model's :attr:`Prices.cache_read` is its own figure).
Writing costs nothing extra. A cached prefix lives 5-10 minutes of inactivity, at most an
hour; extended retention keeps it up to 24 h."""

ANTHROPIC = PriceList(
    "Anthropic",
    _ANTHROPIC_RULES,
    {
        p.model: p
        for p in (  # model, input, output, cache read, cache write (5 min), minimum
            _anthropic("claude-opus-4-5", 5.00, 25.00, 0.50, 6.25, 4096),
            _anthropic("claude-opus-4-1", 15.00, 75.00, 1.50, 18.75, 1024),
            _anthropic("claude-opus-4", 15.00, 75.00, 1.50, 18.75, 1024),
            _anthropic("claude-sonnet-4-5", 3.00, 15.00, 0.30, 3.75, 1024),
            _anthropic("claude-sonnet-4", 3.00, 15.00, 0.30, 3.75, 1024),
            _anthropic("claude-3-7-sonnet", 3.00, 15.00, 0.30, 3.75, 1024),
            _anthropic("claude-haiku-4-5", 1.00, 5.00, 0.10, 1.25, 4096),
            _anthropic("claude-3-5-haiku", 0.80, 4.00, 0.08, 1.00, 2048),
            _anthropic("claude-3-haiku", 0.25, 1.25, 0.025, 0.3125, 2048),
        )
    },
)
"""Anthropic's models, from the pages ``ANTHROPIC.rules.source`` names.

Anthropic caches the prefix up to each of at most 4 breakpoints a request marks. A read
costs 0.1 times the input price; a write 1.25 times for the five-minute cache, 2 times for
the one-hour one. A cached prefix lives five minutes from its last use (an hour in the
one-hour cache). The shortest cacheable prefix depends on the model (1,024 to 4,096
tokens: see each :attr:`Prices.minimum`)."""
