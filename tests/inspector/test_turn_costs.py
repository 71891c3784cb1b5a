"""What each turn cost in dollars on the tokens page: priced by the model each call names, or
by the prices the inspector was given; never a figure made up for a call without usage."""

from __future__ import annotations

import re
from html import unescape
from pathlib import Path

import pytest

from aniki import Message, Usage
from aniki.pricing import prices_for
from aniki.sessions import open_store

from .sample import TURNS, converse
from .test_http import page

pytest.importorskip("starlette", reason="the inspector needs the inspect extra")

from aniki.inspector._serve import running


@pytest.fixture
def priced_url(tmp_path: Path) -> str:
    """Three turns: one call on a priced model, one on a model aniki has no prices for,
    one whose provider reported no token counts."""
    url = f"sqlite:///{tmp_path / 'costs.db'}"
    mini = Usage(input_tokens=2_000, output_tokens=100, requests=1, cache_read_tokens=1_024)
    unknown = Usage(input_tokens=100, output_tokens=10, requests=1)
    with open_store(url) as store:
        store.session("c").add_messages(
            [
                Message("user", "first"),
                Message("assistant", "one", model="gpt-4o-mini-2024-07-18", usage=mini),
                Message("user", "second"),
                Message("assistant", "two", model="<b>house-model</b>", usage=unknown),
                Message("user", "third"),
                Message("assistant", "three", usage=Usage(requests=1, unreported_requests=1)),
            ]
        )
    return url


def cells(html: str) -> list[str]:
    return [unescape(c) for c in re.findall(r'<td class="num turn-cost">(.*?)</td>', html)]


def test_each_turn_is_priced_by_the_model_its_calls_name(priced_url: str) -> None:
    with running(priced_url) as address:
        html = page(address, "/usage?id=c")
    # gpt-4o-mini: 976 uncached x 0.15 + 1,024 cached x 0.075 + 100 out x 0.60
    #            = 146.4 + 76.8 + 60 = 283.2 millionths of a dollar
    assert cells(html) == ["$0.000283", "-", "-"]
    assert '<span class="cost-total">$0.000283</span>' in html
    assert "counting the 1 of 3 calls" in html
    assert "<b>house-model" not in html  # stored text stays data


def test_given_prices_bill_every_call_that_reported_usage(priced_url: str) -> None:
    with running(priced_url, prices=prices_for("claude-sonnet-4-5")) as address:
        html = page(address, "/usage?id=c")
    # turn 1: 976 x 3 + 1,024 x 0.30 + 100 x 15 = 2,928 + 307.2 + 1,500 = 4,735.2
    # turn 2: 100 x 3 + 10 x 15 = 450; turn 3 reported no tokens: no figure
    assert cells(html) == ["$0.00474", "$0.000450", "-"]
    # 4,735.2 + 450 = 5,185.2
    assert '<span class="cost-total">$0.00519</span>' in html
    assert "claude-sonnet-4-5's published prices" in unescape(html)


def test_a_session_without_priced_calls_shows_no_dollar_figure(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'free.db'}"
    with open_store(url) as store:
        converse(store.session("m"), turns=2)  # its model, mock-cache-1, has no prices
    with running(url) as address:
        html = page(address, "/usage?id=m")
    assert "cost-total" not in html and cells(html) == []
    assert "--prices MODEL" in html


def test_a_run_conversation_priced_turn_by_turn(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'run.db'}"
    with open_store(url) as store:
        converse(store.session("r"))
        messages = store.session("r").get_messages()
    mini = prices_for("gpt-4o-mini")
    reported = [m.usage for m in messages if m.usage is not None and m.usage.input_tokens]
    assert reported
    total = sum(mini.cost(usage) for usage in reported)
    with running(url, prices=mini) as address:
        html = page(address, "/usage?id=r")
    shown = [float(c.removeprefix("$")) for c in cells(html)]
    assert len(shown) == TURNS
    # each cell is rounded to three significant digits
    assert sum(shown) == pytest.approx(total, rel=0.01)
    found = re.search(r'<span class="cost-total">\$([0-9.]+)</span>', html)
    assert found and float(found.group(1)) == pytest.approx(total, rel=0.005)
