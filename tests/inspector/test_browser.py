"""The inspector in a real browser (headless chromium): what a reader clicks through works,
the chart is drawn, and stored hostile text stays text once the browser has parsed it.

One browser and one SQLite store serve the whole module; see ``browser.py`` for the browser.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from aniki import Message
from aniki.sessions import open_store

from .browser import chrome, near, png_pixels
from .sample import HOSTILE, SUMMARY_TEXT, TURNS, converse

pytest.importorskip("starlette", reason="the inspector needs the inspect extra")
pytest.importorskip("jinja2", reason="the inspector needs the inspect extra")

from aniki.inspector._serve import running

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver
    from selenium.webdriver.remote.webelement import WebElement

SESSION = "chat-1"
ODD_ID = "odd id #1 ?a=b&c=d / <b>bold</b> 100%20 ünïcødé 日本語 🙂"
"""A session id with every character a link could lose: space, ``#``, ``?``, ``&``, ``/``,
markup, a percent escape and non-ASCII."""
SENT, CACHED = "#e8743b", "#1f6fb2"
"""The chart's two bar colours (usage.html)."""


@pytest.fixture(scope="module")
def driver() -> Iterator[WebDriver]:
    with chrome() as started:
        yield started


@pytest.fixture(scope="module")
def sqlite_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('browser') / 'chats.db'}"
    with open_store(url) as store:
        converse(store.session(SESSION))
        odd = store.session(ODD_ID)
        odd.add_message(Message("user", "Hello from an odd id"))
        odd.add_message(Message("assistant", "Hello back"))
    return url


@pytest.fixture(scope="module")
def address(sqlite_url: str) -> Iterator[str]:
    with running(sqlite_url) as served:
        yield served


def stored(url: str, session_id: str) -> list[Message]:
    with open_store(url) as store:
        return list(store.session(session_id).get_messages())


def visit(driver: WebDriver, address: str, path: str, **params: object) -> None:
    """Open ``path?params`` and check that nothing stored ran as markup there."""
    query = urllib.parse.urlencode(params)
    driver.get(address.rstrip("/") + path + (f"?{query}" if query else ""))
    inert(driver)


def inert(driver: WebDriver) -> None:
    """The page ran nothing and grew nothing from stored text."""
    assert driver.title != "pwned"
    assert driver.execute_script("return document.getElementsByTagName('script').length") == 0
    pictures = driver.execute_script("return Array.from(document.images, i => i.src)")
    assert not [src for src in pictures if src.endswith("/x")], pictures


def click(driver: WebDriver, element: WebElement) -> None:
    """Click a link or button and wait for the page it opens."""
    from selenium.webdriver.support import expected_conditions
    from selenium.webdriver.support.wait import WebDriverWait

    old = driver.find_element("tag name", "html")
    element.click()
    WebDriverWait(driver, 10).until(expected_conditions.staleness_of(old))
    WebDriverWait(driver, 10).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    inert(driver)


def one(driver: WebDriver, selector: str) -> WebElement:
    return driver.find_element("css selector", selector)


def every(driver: WebDriver, selector: str) -> list[WebElement]:
    return driver.find_elements("css selector", selector)


def indexes(driver: WebDriver) -> list[int]:
    """The indexes of the messages the page shows, in order."""
    return [int(e.get_attribute("data-index") or -1) for e in every(driver, "article.message")]


def text(element: WebElement) -> str:
    """The element's text as the DOM holds it (selenium's ``.text`` trims and folds)."""
    return str(element.get_property("textContent"))


def test_sessions_page_lists_the_session_and_opens_it_at_the_last_page(
    driver: WebDriver, address: str, sqlite_url: str
) -> None:
    messages = stored(sqlite_url, SESSION)
    visit(driver, address, "/")
    links = every(driver, "table.sessions a.session-link")
    assert sorted(text(link) for link in links) == sorted([SESSION, ODD_ID])
    row = next(link for link in links if text(link) == SESSION).find_element("xpath", "../..")
    assert text(row.find_element("css selector", "td.num")).replace(",", "") == str(len(messages))
    click(driver, next(link for link in links if text(link) == SESSION))
    assert text(one(driver, "h1.session-title")) == SESSION
    shown = indexes(driver)
    assert shown[-1] == len(messages) - 1  # the last page
    assert shown == list(range(shown[0], len(messages)))
    assert every(driver, "a.page-next") == [] and every(driver, "a.page-last") == []


def test_pager_moves_through_the_conversation(
    driver: WebDriver, address: str, sqlite_url: str
) -> None:
    total = len(stored(sqlite_url, SESSION))
    assert total > 25, "the sample is too short to page through"
    visit(driver, address, "/session", id=SESSION, size=10)
    last = list(range(total - 10, total))
    assert indexes(driver) == last
    click(driver, one(driver, "a.page-first"))
    assert indexes(driver) == list(range(10))
    assert every(driver, "a.page-previous") == [] and every(driver, "a.page-first") == []
    click(driver, one(driver, "a.page-next"))
    assert indexes(driver) == list(range(10, 20))
    click(driver, one(driver, "a.page-next"))
    assert indexes(driver) == list(range(20, min(30, total)))
    click(driver, one(driver, "a.page-previous"))
    assert indexes(driver) == list(range(10, 20))
    click(driver, one(driver, "a.page-last"))
    assert indexes(driver) == last


def test_at_shows_the_message_highlighted_and_the_goto_form_gets_there(
    driver: WebDriver, address: str
) -> None:
    visit(driver, address, "/session", id=SESSION, size=10, at=15)
    assert indexes(driver) == list(range(10, 20))
    highlighted = every(driver, "article.message.highlight")
    assert [e.get_attribute("id") for e in highlighted] == ["m15"]
    assert highlighted[0].value_of_css_property("box-shadow") != "none"
    field = one(driver, "form.goto input[name=at]")
    field.send_keys("3")
    click(driver, one(driver, "form.goto button"))
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(driver.current_url).query)
    assert query == {"id": [SESSION], "size": ["10"], "at": ["3"]}
    assert indexes(driver) == list(range(10))
    assert [e.get_attribute("id") for e in every(driver, "article.highlight")] == ["m3"]


def test_reasoning_is_collapsed_until_clicked(driver: WebDriver, address: str) -> None:
    visit(driver, address, "/session", id=SESSION)
    reasoning = every(driver, "details.reasoning")
    assert reasoning and not any(e.get_property("open") for e in reasoning)
    first = reasoning[0]
    thought = first.find_element("css selector", "pre.text")
    assert not thought.is_displayed()
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", first)
    first.find_element("tag name", "summary").click()
    assert first.get_property("open") is True
    assert thought.is_displayed() and "keep it short" in thought.text


def test_the_image_attachment_loads(driver: WebDriver, address: str, sqlite_url: str) -> None:
    from selenium.webdriver.support.wait import WebDriverWait

    picture = next(i for i, m in enumerate(stored(sqlite_url, SESSION)) if m.attachments)
    visit(driver, address, "/session", id=SESSION, at=picture)
    image = one(driver, f"#m{picture} div.attachment img")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", image)  # lazy
    WebDriverWait(driver, 10).until(lambda d: image.get_property("complete"))
    assert image.get_property("naturalWidth") == 8  # sample.png()'s square
    assert image.get_property("naturalHeight") == 8


def test_what_was_sent_opens_the_call_with_window_cut_and_summary(
    driver: WebDriver, address: str, sqlite_url: str
) -> None:
    messages = stored(sqlite_url, SESSION)
    index = max(i for i, m in enumerate(messages) if m.role == "assistant")
    report = messages[index].context
    assert report is not None and report.summarized_messages, "the last call had no summary"
    visit(driver, address, "/session", id=SESSION)
    link = one(driver, f"#m{index} footer.call a.call-link")
    assert text(link) == "what was sent"
    click(driver, link)
    assert urllib.parse.parse_qs(urllib.parse.urlsplit(driver.current_url).query) == {
        "id": [SESSION],
        "index": [str(index)],
    }
    start = index - report.sent_messages
    window = text(one(driver, "dl.report dd.window"))
    assert window == f"messages #{start}\u2013#{index - 1} ({report.sent_messages}) sent verbatim"
    summarized = report.summarized_messages
    assert text(one(driver, "dd.summary-range")).startswith(
        f"messages #0\u2013#{summarized - 1} ({summarized})"
    )
    cut = text(one(driver, "dd.cut"))
    if start > summarized:
        assert cut.startswith(f"messages #{summarized}\u2013#{start - 1}")
    else:
        assert cut == "nothing left out"
    summary = one(driver, "details.summary-text")
    assert summary.get_property("open") is True
    assert summary.find_element("css selector", "pre").text == SUMMARY_TEXT
    assert summary.find_elements("tag name", "b") == []
    assert indexes(driver)[0] == start  # the window's messages follow


def test_the_usage_chart_is_drawn_in_both_colours(driver: WebDriver, address: str) -> None:
    visit(driver, address, "/usage", id=SESSION)
    bars = every(driver, "svg#usage-chart g.bar")
    assert len(bars) == TURNS == len(every(driver, "table.turns tbody tr"))
    assert all(
        len(bar.find_elements("css selector", "rect.sent, rect.cached")) == 2 for bar in bars
    )
    assert int(text(one(driver, "span.sent-total")).replace(",", "")) > 0
    assert 0 < int(text(one(driver, "span.cached-share")).rstrip("%")) < 100
    chart = one(driver, "svg#usage-chart")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", chart)
    width, height, pixels = png_pixels(chart.screenshot_as_png)
    assert width > 600 and height > 150, (width, height)
    sent, cached = near(pixels, SENT), near(pixels, CACHED)
    assert sent > 0.01 * len(pixels) and cached > 0.01 * len(pixels), (sent, cached, len(pixels))
    assert len(set(pixels[::7])) > 4, "the chart looks blank"


def test_hostile_text_stays_text(driver: WebDriver, address: str, sqlite_url: str) -> None:
    messages = stored(sqlite_url, SESSION)
    hostile = [i for i, m in enumerate(messages) if HOSTILE in m.content]
    assert len(hostile) > 5 and {messages[i].role for i in hostile} >= {"user", "assistant", "tool"}
    visit(driver, address, "/session", id=SESSION, start=0, size=500)
    assert indexes(driver) == list(range(len(messages)))
    for index, message in enumerate(messages):
        shown = every(driver, f"#m{index} pre.content")
        if not message.content:
            assert shown == []
            continue
        # The page writes bidi overrides as visible escapes (so text cannot reorder itself);
        # every other character is exactly the stored one.
        assert text(shown[0]) == message.content.replace("\u202e", "\\u202e"), index
    assert "\u202e" in HOSTILE
    visit(driver, address, "/search", id=SESSION, q="<script>")
    assert every(driver, "article.message")
    assert text(one(driver, "h1.session-title")) == f"{SESSION}: find"


def test_export_link_gives_back_the_stored_messages(
    driver: WebDriver, address: str, sqlite_url: str
) -> None:
    messages = stored(sqlite_url, SESSION)
    visit(driver, address, "/session", id=SESSION)
    links = {
        urllib.parse.parse_qs(urllib.parse.urlsplit(href).query)["format"][0]: href
        for href in (e.get_attribute("href") or "" for e in every(driver, "nav.tabs a.export"))
    }
    assert sorted(links) == ["json", "jsonl"]
    with urllib.request.urlopen(links["jsonl"], timeout=30) as response:
        lines = response.read().decode().splitlines()
    assert [Message.from_dict(json.loads(line)) for line in lines] == messages
    with urllib.request.urlopen(links["json"], timeout=30) as response:
        document = json.loads(response.read())
    assert document["id"] == SESSION
    assert [Message.from_dict(m) for m in document["messages"]] == messages


def check_round_trip(driver: WebDriver, address: str, session_id: str, url: str) -> None:
    """From the sessions page, through the links, to every page of ``session_id``."""
    messages = stored(url, session_id)
    visit(driver, address, "/")
    link = next(e for e in every(driver, "a.session-link") if text(e) == session_id)
    click(driver, link)
    assert text(one(driver, "h1.session-title")) == session_id
    assert [text(e) for e in every(driver, "pre.content")] == [m.content for m in messages]
    click(driver, one(driver, "nav.tabs a.tab-usage"))
    assert text(one(driver, "h1.session-title")) == f"{session_id}: tokens and cache"
    click(driver, one(driver, "nav.tabs a.tab-conversation"))
    assert indexes(driver) == list(range(len(messages)))
    one(driver, "nav.tabs form.search input[name=q]").send_keys(messages[0].content[:5])
    click(driver, one(driver, "nav.tabs form.search button"))
    assert text(one(driver, "h1.session-title")) == f"{session_id}: find"
    assert indexes(driver) and indexes(driver)[0] == 0
    href = one(driver, "nav.tabs a.export").get_attribute("href") or ""
    with urllib.request.urlopen(href, timeout=30) as response:
        exported = [Message.from_dict(json.loads(line)) for line in response.read().splitlines()]
    assert exported == messages


def test_an_odd_session_id_round_trips_through_links(
    driver: WebDriver, address: str, sqlite_url: str
) -> None:
    check_round_trip(driver, address, ODD_ID, sqlite_url)
    visit(driver, address, "/", q="#1 ?a=b&c")
    assert [text(e) for e in every(driver, "a.session-link")] == [ODD_ID]


def test_a_file_store_works_too(driver: WebDriver, tmp_path: Path) -> None:
    url = f"file://{tmp_path / 'chats'}"
    with open_store(url) as store:
        converse(store.session(SESSION), turns=3)
        odd = store.session(ODD_ID)
        odd.add_message(Message("user", "Hello from an odd id"))
        odd.add_message(Message("assistant", "Hello back"))
    with running(url) as served:
        visit(driver, served, "/")
        assert sorted(text(e) for e in every(driver, "a.session-link")) == sorted([SESSION, ODD_ID])
        messages = stored(url, SESSION)
        click(driver, next(e for e in every(driver, "a.session-link") if text(e) == SESSION))
        assert indexes(driver) == list(range(len(messages)))
        reply = max(i for i, m in enumerate(messages) if m.role == "assistant")
        click(driver, one(driver, f"#m{reply} a.call-link"))
        assert text(one(driver, "dd.window")).endswith("sent verbatim")
        visit(driver, served, "/usage", id=SESSION)
        assert len(every(driver, "svg#usage-chart g.bar")) == 3
        check_round_trip(driver, served, ODD_ID, url)
