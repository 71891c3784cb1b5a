"""The inspector over real HTTP at its edges: a provider that reports no prompt-cache figures,
and pages asked for past the end of a conversation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from aniki import Message, Usage
from aniki.sessions import SQLiteSession

from .test_http import fetch, page, text_of

pytest.importorskip("starlette", reason="the inspector needs the inspect extra")
pytest.importorskip("jinja2", reason="the inspector needs the inspect extra")

from aniki.inspector._serve import running


def _store(tmp_path: Path, usages: list[Usage], *, name: str = "s") -> str:
    """A SQLite store whose session ``name`` has a turn per usage."""
    session = SQLiteSession(name, path=tmp_path / "chats.db")
    for number, usage in enumerate(usages):
        session.add_messages(
            [
                Message("user", f"question {number}"),
                Message("assistant", f"answer {number}", model="m", usage=usage),
            ]
        )
    session.close()
    return f"sqlite:///{tmp_path / 'chats.db'}"


def _totals(html: str) -> str:
    found = re.search(r'<p class="totals">(.*?)</p>', html, re.S)
    assert found is not None, html[:2000]
    return " ".join(text_of(found.group(1)).split())


def test_no_cache_figures_reported_is_shown_as_unknown_not_zero(tmp_path: Path) -> None:
    """llama.cpp and other servers report input tokens but nothing about a prompt cache: the
    share served from cache is unknown, which is not 0 %."""
    uncached = Usage(input_tokens=1200, output_tokens=30, requests=1)
    url = _store(tmp_path, [uncached] * 3)
    with running(url) as address:
        html = page(address, "/usage?id=s")
    totals = _totals(html)
    assert "3,600 input tokens sent" in totals
    assert "0%" not in totals and "served from cache" not in totals
    assert "unknown" in totals and "reported no prompt-cache figures" in totals
    rows = re.findall(r"<tr>\s*<td class=\"num\">(\d+)</td>(.*?)</tr>", html, re.S)
    assert len(rows) == 3
    assert all("0%" not in row and "unknown" in row for _, row in rows)


@pytest.mark.parametrize(
    ("usages", "share"),
    [
        # Anthropic's first turn: everything written to the cache, nothing read yet: 0 % is
        # a figure the provider reported.
        ([Usage(input_tokens=1000, output_tokens=5, requests=1, cache_write_tokens=900)], "0%"),
        (
            [
                Usage(input_tokens=1000, output_tokens=5, requests=1),
                Usage(input_tokens=1000, output_tokens=5, requests=1, cache_read_tokens=500),
            ],
            "25%",
        ),
    ],
)
def test_reported_cache_figures_give_the_share(
    tmp_path: Path, usages: list[Usage], share: str
) -> None:
    url = _store(tmp_path, usages)
    with running(url) as address:
        totals = _totals(page(address, "/usage?id=s"))
    assert f"{share} of them served from cache" in totals
    assert "unknown" not in totals


@pytest.mark.parametrize("query", ["at=100", "at=40", "start=40", "start=1000&size=5"])
def test_a_page_past_the_end_says_so_and_links_the_last_page(tmp_path: Path, query: str) -> None:
    url = _store(tmp_path, [Usage(input_tokens=10, requests=1)] * 20)  # 40 messages
    with running(url) as address:
        status, _, body = fetch(address, f"/session?id=s&{query}")
        html = body.decode()
        assert status == 404, html[:2000]
        shown = " ".join(text_of(html).split())
        assert "#40\N{EN DASH}#39" not in shown  # the empty page it used to be
        assert "past the end" in shown and "40 messages (#0 to #39)" in shown
        links = re.findall(r'<a class="last-page" href="([^"]+)"', html)
        assert len(links) == 1
        last = page(address, links[0].replace("&amp;", "&"))
    size = 5 if "size=5" in query else 50
    indexes = [int(i) for i in re.findall(r'id="m(\d+)"', last)]
    assert indexes == list(range(max(0, 40 - size), 40))


def test_the_last_message_and_the_last_page_are_still_served(tmp_path: Path) -> None:
    url = _store(tmp_path, [Usage(input_tokens=10, requests=1)] * 20)
    with running(url) as address:
        html = page(address, "/session?id=s&at=39&size=10")
    assert [int(i) for i in re.findall(r'id="m(\d+)"', html)] == list(range(30, 40))
    assert "messages #30\N{EN DASH}#39 of 40" in " ".join(text_of(html).split())
