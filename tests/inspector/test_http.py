"""The inspector over real HTTP, against every persistent store: what each page shows, that it
only reads, and that stored data stays data."""

from __future__ import annotations

import contextlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest

from aniki import Message
from aniki.errors import UserError
from aniki.sessions import open_store
from aniki.sessions.policies._summary import SUMMARY_KEY

from ..servers import postgres_dsn, redis_url
from .sample import HOSTILE, SUMMARY_TEXT, TURNS, converse

pytest.importorskip("starlette", reason="the inspector needs the inspect extra")
pytest.importorskip("jinja2", reason="the inspector needs the inspect extra")

from aniki.inspector._serve import running


def fetch(
    address: str, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
) -> tuple[int, Any, bytes]:
    """``(status, headers, body)`` of one request."""
    request = urllib.request.Request(address.rstrip("/") + path, method=method)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read()


def page(address: str, path: str) -> str:
    status, _, body = fetch(address, path)
    assert status == 200, body.decode()[:2000]
    return body.decode()


def text_of(html: str) -> str:
    """The page's visible text, roughly: tags dropped, entities decoded."""
    return unescape(re.sub(r"<[^>]+>", "", html))


@pytest.fixture(params=["sqlite", "file", "redis", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    kind = request.param
    if kind == "sqlite":
        yield f"sqlite:///{tmp_path / 'chats.db'}"
    elif kind == "file":
        yield f"file://{tmp_path / 'chats'}"
    elif kind == "redis":
        yield redis_url()
    else:
        yield postgres_dsn()


@pytest.fixture
def filled(store_url: str) -> Iterator[tuple[str, str, list[Any]]]:
    """A store holding one sampled conversation: ``(url, session id, run results)``."""
    session_id = f"inspect-{uuid.uuid4().hex[:10]}"
    with open_store(store_url) as store:
        results = converse(store.session(session_id))
    yield store_url, session_id, results
    with open_store(store_url) as store:
        store.session(session_id).clear()


def stored(url: str, session_id: str) -> list[Message]:
    with open_store(url) as store:
        return list(store.session(session_id).get_messages())


def test_sessions_list_search_and_counts(filled: tuple[str, str, list[Any]]) -> None:
    url, session_id, _ = filled
    messages = stored(url, session_id)
    with open_store(url) as store:
        store.session(session_id).set_info(title=HOSTILE, owner="user-<7>")
    with running(url) as address:
        html = page(address, "/?" + urllib.parse.urlencode({"q": session_id}))
        assert f'href="/session?id={session_id}"' in html
        row = re.search(
            rf"{session_id}</a></td>\s*<td class=\"title\">(.*?)</td>\s*"
            r'<td class="owner">(.*?)</td>\s*<td class="num">([\d,]+)</td>',
            html,
            re.S,
        )
        assert row is not None and int(row.group(3).replace(",", "")) == len(messages)
        assert "<" not in row.group(1) + row.group(2)  # the title and owner shown as text
        assert unescape(row.group(2)) == "user-<7>"
        assert "1 of" in text_of(html)
        missing = page(address, "/?q=" + uuid.uuid4().hex)
        assert "No session id contains" in missing


def test_conversation_shows_roles_calls_attachments_reasoning_ids_and_times(
    filled: tuple[str, str, list[Any]],
) -> None:
    url, session_id, _ = filled
    messages = stored(url, session_id)
    with running(url) as address:
        html = page(address, f"/session?id={session_id}&start=0&size=500")
    articles = re.findall(r'<article class="message role-(\w+)[^"]*" id="m(\d+)"', html)
    assert [role for role, _ in articles] == [m.role for m in messages]
    assert [int(i) for _, i in articles] == list(range(len(messages)))
    for message in messages:
        assert message.id is not None and message.id in html
        assert message.created_at is not None
        assert message.created_at.strftime("%Y-%m-%d %H:%M:%S") in html
    assert '<details class="reasoning">' in html  # collapsed: no "open"
    assert "The user wants an answer" in html
    assert 'calls <code class="tool-name">weather</code>' in html
    answered = next(m for m in messages if m.role == "tool")
    assert f"answers <code>{answered.tool_call_id}</code>" in html
    picture = next(i for i, m in enumerate(messages) if m.attachments)
    assert f"/attachment?id={session_id}&amp;index={picture}&amp;part=0" in html


def test_hostile_text_is_shown_as_text(filled: tuple[str, str, list[Any]]) -> None:
    url, session_id, _ = filled
    with running(url) as address:
        for path in (
            f"/session?id={session_id}&start=0&size=500",
            f"/search?id={session_id}&q=" + urllib.parse.quote(HOSTILE[:20]),
        ):
            status, headers, body = fetch(address, path)
            html = body.decode()
            assert status == 200
            assert "<script" not in html and "onerror=" not in html.replace("onerror=&#34;", "")
            assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in html
            assert "{{ 7*7 }}" in html and "49" not in text_of(html).split("{{ 7*7 }}")[0][-3:]
            assert "\u202e" not in html and "\\u202eevil" in html
            assert "script-src" not in headers["content-security-policy"]
            assert "default-src 'none'" in headers["content-security-policy"]
            assert headers["x-content-type-options"] == "nosniff"


def test_paging_reads_the_asked_page(filled: tuple[str, str, list[Any]]) -> None:
    url, session_id, _ = filled
    messages = stored(url, session_id)
    total = len(messages)
    with running(url) as address:
        last = page(address, f"/session?id={session_id}&size=5")
        shown = [int(i) for i in re.findall(r'id="m(\d+)"', last)]
        assert shown == list(range(total - 5, total))
        assert 'class="page-next off"' in last and 'class="page-previous"' in last
        middle = page(address, f"/session?id={session_id}&size=5&start=5")
        assert [int(i) for i in re.findall(r'id="m(\d+)"', middle)] == list(range(5, 10))
        at = page(address, f"/session?id={session_id}&size=5&at=12")
        assert [int(i) for i in re.findall(r'id="m(\d+)"', at)] == list(range(10, 15))
        assert 'class="message role-' in at and 'highlight" id="m12"' in at


def test_each_reply_says_what_was_sent_and_the_call_page_shows_window_cut_and_summary(
    filled: tuple[str, str, list[Any]],
) -> None:
    url, session_id, results = filled
    messages = stored(url, session_id)
    with open_store(url) as store:
        summary = store.session(session_id).get_meta(SUMMARY_KEY)
    assert summary is not None, "the sample made no summary"
    replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
    reports = [r for result in results for r in result.context_reports]
    assert len(replies) == len(reports)
    summarized = [i for i, r in zip(replies, reports, strict=True) if r.summarized_messages]
    assert summarized, "no call was sent a summary"
    index = summarized[-1]
    report = messages[index].context
    assert report is not None
    with running(url) as address:
        html = page(address, f"/call?id={session_id}&index={index}")
        plain = text_of(html)
        start = index - report.sent_messages
        sent = f"messages #{start}\u2013#{index - 1} ({report.sent_messages}) sent verbatim"
        assert sent in plain
        assert f"messages #0\u2013#{report.summarized_messages - 1}" in plain
        if start > report.summarized_messages:
            assert f"messages #{report.summarized_messages}\u2013#{start - 1}" in plain
        assert SUMMARY_TEXT in plain and "&lt;b&gt;Paris&lt;/b&gt;" in html
        shown = [int(i) for i in re.findall(r'id="m(\d+)"', html)]
        assert shown == [*range(start, index), index]  # the window, then the reply
        usage = messages[index].usage
        assert usage is not None and f"{usage.input_tokens:,} in" in plain
        first_reply = replies[0]
        early = text_of(page(address, f"/call?id={session_id}&index={first_reply}"))
        assert "nothing left out" in early and "Summary" not in early.split("summary")[0]
        status, _, body = fetch(address, f"/call?id={session_id}&index=0")
        assert status == 404 and b"not a model" in body


def test_usage_page_charts_every_turn_and_the_cached_share(
    filled: tuple[str, str, list[Any]],
) -> None:
    url, session_id, _ = filled
    messages = stored(url, session_id)
    sent = sum(m.usage.input_tokens for m in messages if m.usage is not None)
    cached = sum(m.usage.cache_read_tokens for m in messages if m.usage is not None)
    assert 0 < cached < sent
    with running(url) as address:
        html = page(address, f"/usage?id={session_id}")
    bars = re.findall(
        r'<g class="bar" data-turn="(\d+)" data-sent="(\d+)" data-cached="(\d+)"', html
    )
    assert len(bars) == TURNS
    assert sum(int(s) for _, s, _ in bars) == sent
    assert sum(int(c) for _, _, c in bars) == cached
    assert f'<span class="sent-total">{sent:,}</span>' in html
    assert f'<span class="cached-share">{cached / sent:.0%}</span>' in html


def test_usage_is_read_again_after_an_append_and_after_an_undo(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'chats.db'}"
    with open_store(url) as store:
        converse(store.session("s"), turns=3)
        with running(url) as address:
            before = page(address, "/usage?id=s").count('<g class="bar"')
            converse(store.session("s"), turns=2)
            grown = page(address, "/usage?id=s").count('<g class="bar"')
            store.session("s").undo()
            undone = page(address, "/usage?id=s").count('<g class="bar"')
    assert (before, grown, undone) == (3, 5, 4)


def test_export_round_trips(filled: tuple[str, str, list[Any]]) -> None:
    url, session_id, _ = filled
    messages = stored(url, session_id)
    with running(url) as address:
        status, headers, body = fetch(address, f"/export?id={session_id}&format=jsonl")
        assert status == 200 and "attachment" in headers["content-disposition"]
        lines = [Message.from_dict(json.loads(line)) for line in body.decode().splitlines()]
        assert lines == messages
        assert [m.id for m in lines] == [m.id for m in messages]
        _, _, body = fetch(address, f"/export?id={session_id}&format=json")
        document = json.loads(body)
        assert document["id"] == session_id and document["format"] == "aniki.session/1"
        assert [Message.from_dict(m) for m in document["messages"]] == messages


def test_attachments_are_served_as_pictures_or_downloads(tmp_path: Path) -> None:
    from aniki import Attachment

    from .sample import png

    url = f"sqlite:///{tmp_path / 'a.db'}"
    picture, page = png(), b"<html><script>document.title='pwned'</script></html>"
    with open_store(url) as store:
        store.session("a").add_message(
            Message(
                "user",
                "two files",
                attachments=(
                    Attachment("image/png", data=picture, name="red.png"),
                    Attachment("text/plain", data=page, name="nöte <1>.html"),
                ),
            )
        )
    with running(url) as address:
        status, headers, body = fetch(address, "/attachment?id=a&index=0&part=0")
        assert (status, headers["content-type"], body) == (200, "image/png", picture)
        status, headers, body = fetch(address, "/attachment?id=a&index=0&part=1")
        assert status == 200 and body == page
        assert headers["content-type"] == "application/octet-stream"
        assert headers["content-disposition"] == 'attachment; filename="n_te__1_.html"'
        _, _, shown = fetch(address, "/session?id=a")
        assert shown.count(b"<img ") == 1  # the text file is offered as a download only
        assert fetch(address, "/attachment?id=a&index=0&part=2")[0] == 404


def test_only_reads_only_answers_get_and_only_to_local_host_names(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"
    with open_store(url) as store:
        store.session("r").add_message(Message("user", "hello"))
    before = (tmp_path / "r.db").read_bytes()
    with running(url) as address:
        assert fetch(address, "/session?id=r", method="POST")[0] == 405
        assert fetch(address, "/export?id=r", method="DELETE")[0] == 405
        assert fetch(address, "/", headers={"Host": "evil.example"})[0] == 400
        assert fetch(address, "/", headers={"Host": "localhost:1"})[0] == 200
        for path in ("/", "/session?id=r", "/usage?id=r", "/export?id=r", "/search?id=r&q=h"):
            assert fetch(address, path)[0] == 200
    assert (tmp_path / "r.db").read_bytes() == before


def test_bad_requests_get_clear_pages(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    with open_store(url) as store:
        store.session("b").add_message(Message("user", "hello"))
    with running(url) as address:
        cases = {
            "/session": (400, "name a session"),
            "/session?id=nope": (404, "has no messages"),
            "/session?id=b&start=x": (400, "start must be a whole number"),
            "/session?id=b&start=-3": (400, "start must be 0 or more"),
            "/export?id=b&format=xml": (400, "unknown export format"),
            "/nowhere": (404, "Not Found"),
        }
        for path, (status, words) in cases.items():
            got, headers, body = fetch(address, path)
            assert got == status, path
            assert words in unescape(body.decode()), (path, body[:500])
            assert headers["content-type"].startswith("text/html")


def test_a_missing_store_is_refused_before_serving(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'missing.db'}"
    with pytest.raises(UserError, match="there is no store at"), running(missing):
        pass
    assert not (tmp_path / "missing.db").exists()


def test_a_database_without_aniki_tables_is_refused_not_given_them(tmp_path: Path) -> None:
    import sqlite3

    foreign = tmp_path / "other.db"
    with contextlib.closing(sqlite3.connect(foreign)) as conn, conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    before = foreign.read_bytes()
    with pytest.raises(UserError, match="holds no aniki sessions"), running(f"sqlite:///{foreign}"):
        pass
    assert foreign.read_bytes() == before

    import psycopg

    dsn = postgres_dsn()
    name = f"aniki_inspect_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        empty = dsn.rsplit("/", 1)[0] + "/" + name
        with pytest.raises(UserError, match="no aniki_messages table"), running(empty):
            pass
        with psycopg.connect(empty) as conn:
            assert conn.execute("SELECT to_regclass('aniki_messages')").fetchone() == (None,)
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def test_an_encrypted_session_shows_its_sealed_records(tmp_path: Path) -> None:
    pytest.importorskip("cryptography", reason="EncryptedSession needs the encryption extra")
    from cryptography.fernet import Fernet

    from aniki.sessions import SQLiteSession
    from aniki.sessions.encrypted import EncryptedSession

    with SQLiteSession("sealed", tmp_path / "e.db") as inner:
        EncryptedSession(inner, Fernet.generate_key()).add_message(
            Message("user", "my card is 4111 1111")
        )
    with running(f"sqlite:///{tmp_path / 'e.db'}") as address:
        html = page(address, "/session?id=sealed")
    assert "4111" not in html and "aniki-enc:v2:" in html
    assert "the page has no key" in html


def test_passwords_in_the_store_url_are_never_shown() -> None:
    dsn = postgres_dsn()
    secret = "s3cret-" + uuid.uuid4().hex[:6]
    with_password = dsn.replace("postgres@", f"postgres:{secret}@", 1)
    assert secret in with_password, "the test DSN has no user name to add a password to"
    with running(with_password) as address:
        for path in ("/", "/session?id=none", "/usage?id=none", "/nowhere"):
            _, _, body = fetch(address, path)
            assert secret not in body.decode()
            assert "postgres:***@" in body.decode()
