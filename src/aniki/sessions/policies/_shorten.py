"""A message larger than a policy's whole budget, sent shortened: pure, no I/O.

A token budget bounds the view, yet one message (a pasted file, a tool's long result, a long
reply) may cost more than the whole budget by itself, and the rules keep an exchange whole
rather than break it. :class:`Shortener` has a view send such a message cut to fit: the head
of its text and a short tail, joined by a note saying how many characters were cut and that
the stored message is whole (for a tool result: that the tool can be called for a part).
Only the view changes; the stored history is untouched, as with clearing.

What is kept:

- the role, the tool calls and ``tool_call_id`` (a pair never breaks), the reasoning (signed by
  its provider: a cut one would be refused), the id and the time;
- the attachments, when the message fits with them once its text is cut; otherwise each is
  sent as a line naming it, and the text gets all the room;
- of the text, a head and a tail a fifth its size, each ending or starting at a line break
  near the cut when there is one (whole lines read better than broken ones).

**The same every time.** A shortened message is a function of the message and the budget
alone, never of the view around it, so every read, policy object and process sends it
identically and a prompt cache serves it. It is measured without the counter's calibration
(:meth:`~aniki.tokens.EstimatingCounter.observe` moves that from request to request, and a
text that followed it would change, breaking the cached prefix, at every request).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace

from ...messages import Attachment, Message
from ...tokens import EstimatingCounter, TiktokenCounter, TokenCounter

__all__ = ["Shortener"]

CHARS_PER_TOKEN = 16
"""The most characters of text kept per token of the budget: about four times what a token
holds in prose, so any text fits, and the longest text is never measured whole."""

_TAIL = 5
"""The tail kept is a fifth of the text kept: the end of a log or a listing often matters."""

_SNAP = 400
"""A cut moves to a line break found within this many characters of it (and within a
quarter of the part it ends), so that the parts kept hold whole lines."""

_CACHED = 64
"""How many messages each shortener remembers (oversized ones only)."""


class Shortener:
    """Shortens, in a view, each message that alone costs more than ``allowance`` tokens, as
    the policy's counter (``counter()``, asked at each use: a policy's may be replaced)
    measures it without its calibration.

    Example::

        counter = EstimatingCounter()
        shortener = Shortener(8_000, lambda: counter)
        view, count = shortener.apply(view)  # count: how many were sent shortened
    """

    def __init__(self, allowance: int, counter: Callable[[], TokenCounter]) -> None:
        self.allowance = allowance
        """The most one message may cost as sent."""
        self._counter_of = counter
        self._counter: TokenCounter | None = None
        self._calibrated: EstimatingCounter | None = None
        self._steady: Callable[[Message], int] = lambda message: 0  # set with the counter
        self._below = allowance
        self._made = functools.lru_cache(maxsize=_CACHED)(self._make)
        # What cost() found over the allowance during the read under way, by id (the read's
        # window holds the messages, so no id is reused before apply() ends the read).
        self._over: dict[int, tuple[Message, Message | None]] = {}

    @property
    def below(self) -> int:
        """A count at or under this is within the allowance (a policy's weighing need not ask
        :meth:`cost` then: the message is sent whole)."""
        return self._below

    def _sync(self) -> TokenCounter:
        """The policy's counter; what was made with another one is forgotten."""
        counter = self._counter_of()
        if counter is not self._counter:
            self._made.cache_clear()
            self._calibrated = counter if isinstance(counter, EstimatingCounter) else None
            self._steady = counter.count_message
            if self._calibrated is not None:
                self._steady = self._calibrated.raw_count
            self._counter = counter
        if self._calibrated is not None:
            # A message counted at most `_below` is within the allowance, so it is not measured
            # again; a calibration under 1 counts under the steady measure: it lowers the bound.
            factor = self._calibrated.factor
            self._below = self.allowance if factor >= 1.0 else int(self.allowance * factor)
        return counter

    def synced(self) -> Shortener:
        """This shortener, brought up to date with the policy's counter: :meth:`cost` counts
        with the counter as of the last call, so a read calls it once before weighing."""
        self._sync()
        return self

    def shortened(self, message: Message) -> Message | None:
        """``message`` as a view sends it when it is over the allowance; ``None`` when it is
        sent whole (within it, or nothing in it can be cut)."""
        self._sync()
        return self._over_allowance(message)

    def _over_allowance(self, message: Message) -> Message | None:
        if self._steady(message) <= self.allowance:
            return None
        # The id and time key the cache too: equal messages keep their own.
        return self._made(message, (message.id, message.created_at))

    def cost(self, message: Message, weight: int) -> int:
        """What ``message``, which the policy's counter weighed at ``weight`` (over
        :attr:`below`), costs as a view sends it; remembered for :meth:`apply`.

        A policy weighs every message of the view it places during the read that places it,
        so the messages :meth:`apply` finds here are all it has to shorten."""
        shortened = self._over_allowance(message)
        self._over[id(message)] = (message, shortened)
        if shortened is None:
            return weight
        counter = self._counter if self._counter is not None else self._sync()
        return counter.count_message(shortened)

    def weigh(self, message: Message) -> int:
        """What ``message`` costs as a view sends it (a policy's cost function)."""
        counter = self._counter if self._counter is not None else self._sync()
        weight = counter.count_message(message)
        return weight if weight <= self._below else self.cost(message, weight)

    def apply(self, view: Sequence[Message]) -> tuple[tuple[Message, ...], int]:
        """``view``, every message of which this read weighed, as it is sent, and how many
        of its messages were shortened; the read ends here."""
        over, self._over = self._over, {}
        if not over:
            return tuple(view), 0
        return self._sent(view, over, None)

    def sent(self, view: Sequence[Message]) -> tuple[tuple[Message, ...], int]:
        """:meth:`apply` for a ``view`` whose messages this read may not all have weighed:
        each it did not is counted."""
        over, self._over = self._over, {}
        return self._sent(view, over, self._sync().count_message)

    def _sent(
        self,
        view: Sequence[Message],
        over: dict[int, tuple[Message, Message | None]],
        count_message: Callable[[Message], int] | None,
    ) -> tuple[tuple[Message, ...], int]:
        sent, count = [], 0
        for message in view:
            found = over.get(id(message))
            if found is not None and found[0] is message:
                shortened = found[1]
            elif count_message is not None and count_message(message) > self._below:
                shortened = self._over_allowance(message)
            else:
                shortened = None
            if shortened is not None:
                message, count = shortened, count + 1
            sent.append(message)
        return tuple(sent), count

    def _make(self, message: Message, stamp: object) -> Message | None:
        room, text = self.allowance, message.content
        kept = message.attachments
        if kept and self._steady(replace(message, content=_note(message, len(text)))) > room:
            kept = ()  # not even the note fits beside them: each is sent as its name
        named = "".join(_named(part) for part in message.attachments if part not in kept)
        measure = self._measure(message, kept)
        if not text or (named and measure(text + named) <= room):
            content = text + named  # no text to cut, or it fits once the attachments are named
        else:

            def fits(length: int) -> bool:
                return measure(_cut(message, length) + named) <= room

            most = min(len(text) - 1, CHARS_PER_TOKEN * room)
            guess = len(text) * room // max(self._steady(message), 1)
            content = _cut(message, _longest(fits, most, guess)) + named
        if not content or (content == text and kept == message.attachments):
            return None  # nothing to cut: the tool calls or the reasoning are what is large
        shortened = replace(message, content=content, attachments=kept)
        return shortened if self._steady(shortened) < self._steady(message) else None

    def _measure(self, message: Message, kept: tuple[Attachment, ...]) -> Callable[[str], int]:
        """What ``message`` with the attachments ``kept`` costs with a text: the built-in
        counters add the text's own count; any other counter counts the whole message."""
        counter, steady = self._counter, self._steady
        if isinstance(counter, (EstimatingCounter, TiktokenCounter)):
            count_text = counter.count_text
            fixed = steady(replace(message, content=".", attachments=kept)) - count_text(".")
            return lambda text: fixed + count_text(text)
        return lambda text: steady(replace(message, content=text, attachments=kept))


def _longest(fits: Callable[[int], bool], most: int, guess: int) -> int:
    """The longest length from 0 to ``most`` that ``fits``, to within a hundredth, found by
    bisection from ``guess``; 0 when none does."""
    low, high = 0, most + 1
    probe = min(max(guess, 1), most)
    while high - low > max(1, low // 100) and probe > low:
        if fits(probe):
            low = probe
        else:
            high = probe
        probe = (low + high) // 2
    return low


def _cut(message: Message, length: int) -> str:
    """The text of ``message`` keeping ``length`` characters: its head and tail, joined by
    the note. Where a line break lies near the cut, the cut moves to it."""
    text = message.content
    tail = length // _TAIL
    head = length - tail
    end = len(text) - tail
    if (newline := text.rfind("\n", head - min(head // 4, _SNAP), head)) >= 0:
        head = newline + 1
    if (newline := text.find("\n", end, end + min(tail // 4, _SNAP))) >= 0:
        end = newline + 1
    kept_head, kept_tail = text[:head], text[end:]
    before = "\n" if kept_head and not kept_head.endswith("\n") else ""
    after = "\n" if kept_tail else ""
    return f"{kept_head}{before}{_note(message, end - head)}{after}{kept_tail}"


def _note(message: Message, cut: int) -> str:
    """What the text of ``message`` says where ``cut`` of its characters were cut."""
    whole = (
        "the stored result is whole: call the tool again for the part you need"
        if message.role == "tool"
        else "the stored message is whole"
    )
    size = len(message.content)
    return f"[... {cut:,} of {size:,} characters cut here to fit the context; {whole} ...]"


def _named(part: Attachment) -> str:
    """The line a left-out attachment is sent as."""
    what = part.name or part.media_type
    return f"\n[{part.kind} {what} left out to fit the context; the stored message keeps it]"
