"""The chart of tokens sent per turn and the share served from cache, as SVG shapes.

The shapes are computed here and written out by the ``usage.html`` template: plain SVG
with no script and no style attribute, so it renders under the page's strict content
security policy and in any browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._data import TurnCost

__all__ = ["Bar", "Chart", "chart"]

WIDTH = 960
HEIGHT = 300
_LEFT, _RIGHT, _TOP, _BOTTOM = 64, 12, 12, 36
_MAX_BARS = 160
"""More turns than this are drawn in groups of consecutive turns, one bar a group."""


@dataclass(frozen=True, slots=True)
class Bar:
    """One bar: a turn, or a group of consecutive turns."""

    x: float
    width: float
    y_sent: float
    """The top of the whole bar (tokens sent)."""
    y_cached: float
    """The top of its cached part, which is drawn from the baseline up."""
    first: int
    """The first turn the bar stands for."""
    last: int
    """The last turn it stands for."""
    sent: int
    cached: int
    index: int
    """The index of the first message of the first turn (for its link)."""

    @property
    def label(self) -> str:
        """What the bar stands for, for its tooltip."""
        turns = (
            f"turn {self.first}" if self.first == self.last else f"turns {self.first}-{self.last}"
        )
        share = self.cached / self.sent if self.sent else 0.0
        return f"{turns}: {self.sent:,} tokens sent, {share:.0%} from cache"


@dataclass(frozen=True, slots=True)
class Chart:
    """The chart's bars and axis."""

    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]
    """``(y, label)`` of each horizontal grid line."""
    width: int = WIDTH
    height: int = HEIGHT
    left: int = _LEFT
    baseline: float = HEIGHT - _BOTTOM
    per_bar: int = 1
    """Turns per bar."""


def chart(turns: Sequence[TurnCost]) -> Chart:
    """The chart of ``turns`` (turns without a model call count as zero)."""
    per_bar = max(1, -(-len(turns) // _MAX_BARS))
    groups = [turns[i : i + per_bar] for i in range(0, len(turns), per_bar)]
    totals = [(sum(t.sent for t in g), sum(t.cached for t in g)) for g in groups]
    top = _nice(max((sent for sent, _ in totals), default=0))
    plot_width = WIDTH - _LEFT - _RIGHT
    plot_height = HEIGHT - _TOP - _BOTTOM
    baseline = float(HEIGHT - _BOTTOM)
    slot = plot_width / max(1, len(groups))
    gap = min(2.0, slot * 0.2)
    bars = []
    for number, (group, (sent, cached)) in enumerate(zip(groups, totals, strict=True)):
        bars.append(
            Bar(
                x=round(_LEFT + number * slot + gap / 2, 2),
                width=round(max(0.5, slot - gap), 2),
                y_sent=round(baseline - plot_height * sent / top, 2),
                y_cached=round(baseline - plot_height * cached / top, 2),
                first=group[0].turn,
                last=group[-1].turn,
                sent=sent,
                cached=cached,
                index=group[0].index,
            )
        )
    ticks = tuple(
        (round(baseline - plot_height * step / 4, 2), f"{top * step // 4:,}") for step in range(5)
    )
    return Chart(tuple(bars), ticks, baseline=baseline, per_bar=per_bar)


def _nice(value: int) -> int:
    """The smallest of 1, 2 or 5 times a power of ten, times 4, that is at least ``value``
    (so the four grid steps are round numbers)."""
    if value <= 0:
        return 4
    scale = 1
    while True:
        for step in (1, 2, 5):
            if step * scale * 4 >= value:
                return step * scale * 4
        scale *= 10
