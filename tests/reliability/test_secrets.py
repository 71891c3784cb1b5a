"""API keys never leak: not into logs, stored sessions, errors (and their causes), or reprs.

Agents run over both wire formats with a recognisable fake key against a fake server that
is as indiscreet as it can be: it echoes the key in error bodies, in malformed replies and
in a stream's error event. Every log record of every logger is captured at DEBUG (the
vendor clients' and their HTTP library's included), and afterwards the key is searched for
in the records, in each error's text, repr and traceback (causes and contexts included), in
the providers' reprs and in the bytes of the SQLite file that held the conversation.
"""

from __future__ import annotations

import logging
import traceback
from pathlib import Path
from typing import Any

import pytest

from aniki import Agent, AnikiError, RunCompleted, Runner, SQLiteSession

from ..providers.fake_server import Drop, FakeServer, Reply, Respond, Stall, Stream, sse
from ..providers.vendors import Vendor

KEY = "sk-aniki-leakcheck-7f3e9c1d5b2a"
URL_PASSWORD = "url-pw-5e8d1c"
FAST = {"retry-after-ms": "10"}
LOGGERS = ["", "aniki", "openai", "anthropic", "httpx", "httpx2", "httpcore", "asyncio"]
"""Every logger the run may use (the vendor clients' HTTP library has gone by two names)."""


def make_provider(vendor: Vendor, url: str, **options: Any) -> Any:
    base = url + "/v1" if vendor.name == "openai" else url
    options.setdefault("max_retries", 1)
    options.setdefault("timeout", 0.5)
    return vendor.make(api_key=KEY, base_url=base, **options)


def indiscreet_bodies(vendor: Vendor) -> dict[str, list[Reply]]:
    """Error replies that all carry the key back, by status."""
    body = {"error": {"message": f"Incorrect API key provided: {KEY}", "type": "x", "key": KEY}}
    return {
        "401": [Respond(401, body)],
        "403": [Respond(403, body)],
        "400": [Respond(400, body)],
        "429": [Respond(429, body, FAST)] * 2,
        "500": [Respond(500, body, FAST)] * 2,
        "not JSON": [Respond(200, f"<html>your key is {KEY}</html>")],
        "another shape": [Respond(200, {"echo": KEY})],
        # Without a response there is no Retry-After to speed retries up: these two are
        # sent to a provider that does not retry (see NOT_RETRIED).
        "dropped": [Drop()],
        "stalled": [Stall()],
    }


NOT_RETRIED = {"dropped", "stalled"}


def broken_streams(vendor: Vendor) -> dict[str, list[Reply]]:
    """Streams that break part-way with the key in what they send."""
    start = vendor.first_events(["Once ", "upon"], 1)
    if vendor.name == "anthropic":
        error = sse(
            {"type": "error", "error": {"type": "overloaded_error", "message": f"bad {KEY}"}},
            event="error",
        )
        odd = "event: content_block_delta\n" + sse([KEY])
    else:
        error = sse({"error": {"message": f"bad {KEY}", "type": "server_error"}})
        odd = sse([KEY])
    return {
        "error event": [Stream([*start, error])],
        "chunk of another shape": [Stream([*start, odd])],
        "malformed chunk": [Stream([*start, f'data: {{"key": "{KEY}"\n\n'])],
    }


def stored_files(directory: Path) -> dict[str, bytes]:
    """The SQLite file and its journal files, by name."""
    return {path.name: path.read_bytes() for path in directory.glob("chat.db*")}


def chain_texts(error: BaseException) -> list[str]:
    """Everything an error reporter could print about ``error`` and what it was raised from."""
    texts = ["".join(traceback.format_exception(error))]
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        texts += [str(node), repr(node), repr(node.args)]
        texts += [repr(getattr(node, name, None)) for name in ("body", "message")]
        pending += [node.__cause__, node.__context__]
    return texts


async def run_once(mode: str, agent: Agent, session: SQLiteSession) -> AnikiError | None:
    runner = Runner(stream_retries=0)
    try:
        if mode == "run":
            await runner.run(agent, message="Hi", session=session)
        else:
            events = [e async for e in runner.stream(agent, message="Hi", session=session)]
            assert isinstance(events[-1], RunCompleted)
    except AnikiError as exc:
        return exc
    return None


@pytest.mark.parametrize("mode", ["run", "stream"])
async def test_the_key_appears_in_no_log_error_repr_or_stored_byte(
    server: FakeServer,
    vendor: Vendor,
    mode: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    for name in LOGGERS:
        caplog.set_level(logging.DEBUG, logger=name)
    session = SQLiteSession("leak-check", tmp_path / "chat.db")
    provider = make_provider(vendor, server.url)
    quick = make_provider(vendor, server.url, max_retries=0, timeout=0.2)
    agent = Agent("Leaky", "Be brief.", model="test-model", provider=provider)
    quick_agent = Agent("Leaky", "Be brief.", model="test-model", provider=quick)
    ok: Reply = Stream(vendor.text_events(["Hel", "lo"])) if mode == "stream" else vendor.ok("Hi")

    server.enqueue(ok)
    assert await run_once(mode, agent, session) is None
    failures = indiscreet_bodies(vendor)
    if mode == "stream":
        failures.update(broken_streams(vendor))
    errors: dict[str, AnikiError] = {}
    for name, replies in failures.items():
        server.enqueue(*replies)
        error = await run_once(mode, quick_agent if name in NOT_RETRIED else agent, session)
        assert error is not None, name
        errors[name] = error
        assert server.pending == 0, name
    server.enqueue(ok)
    assert await run_once(mode, agent, session) is None

    # The server did receive the key (so the test can see it if it leaks) ...
    sent = [
        r.headers.get("authorization", "") + r.headers.get("x-api-key", "") for r in server.requests
    ]
    assert all(KEY in header for header in sent)
    # ... and it is nowhere else.
    for name, error in errors.items():
        for text in chain_texts(error):
            assert KEY not in text, f"{name}: {text[:300]}"
    records = caplog.records
    # The capture works: the vendor client logged its requests and retries at DEBUG.
    assert any(r.name.startswith(vendor.name) and r.levelno == logging.DEBUG for r in records)
    for record in records:
        text = f"{record.getMessage()} {record.args!r} {record.exc_text or ''}"
        assert KEY not in text, f"{record.name}: {text[:300]}"
    assert KEY not in caplog.text
    for made in (provider, quick):
        assert KEY not in repr(made) and KEY not in str(made)
    session.close()
    files = stored_files(tmp_path)
    assert "chat.db" in files
    for name, data in files.items():
        assert KEY.encode() not in data, name
    assert all(KEY not in repr(message) for message in session.get_messages())


async def test_a_password_in_the_base_url_stays_out_of_errors_and_reprs(vendor: Vendor) -> None:
    async with FakeServer() as server:
        port = server.port
    # The server is gone: the call is refused, and the error names the URL.
    url = f"http://user:{URL_PASSWORD}@127.0.0.1:{port}"
    provider = make_provider(vendor, url, max_retries=0)
    agent = Agent("A", model="test-model", provider=provider)
    with pytest.raises(AnikiError) as info:
        await Runner().run(agent, message="Hi")
    assert f"127.0.0.1:{port}" in str(info.value)
    for text in [*chain_texts(info.value), repr(provider)]:
        assert URL_PASSWORD not in text
        assert KEY not in text
