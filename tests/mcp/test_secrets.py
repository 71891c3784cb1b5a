"""Header and environment values, a URL's password and its query never show in an error, a
log line, a tool message or a repr."""

from __future__ import annotations

import logging
import sys
import traceback

import pytest

from aniki import Agent, Runner
from aniki._secrets import Secrets, redact, scrub, shown_url
from aniki.mcp import MCPServerHTTP, MCPServerStdio
from mcp import MCPError
from tests.mcp.conftest import SERVER, HTTPServer
from tests.mcp.test_calls import call, calling, tool_messages

SECRET = "env-secret-8d2f61"


def test_reprs_show_no_values() -> None:
    stdio = MCPServerStdio("python", ["server.py"], env={"SECRET": SECRET})
    assert repr(stdio) == (
        "MCPServerStdio('python', args=['server.py'], env=<1 variables>, name='python server.py')"
    )
    http = MCPServerHTTP(
        "https://user:pa55word-x@mcp.example.com/mcp?key=query-secret-1#top",
        headers={"Authorization": "Bearer header-secret-1"},
    )
    assert repr(http) == (
        "MCPServerHTTP('https://user:***@mcp.example.com/mcp?***', headers=<1 headers>, "
        "name='mcp.example.com/mcp')"
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://example.com/mcp", "https://example.com/mcp"),
        ("http://u:p@h:8000/a/b?x=1&y=2", "http://u:***@h:8000/a/b?***"),
        ("https://u:p@ss@h/", "https://u:***@h/"),
        ("https://h/p#frag", "https://h/p"),
        ("not a url", "not a url"),
    ],
)
def test_a_url_is_shown_without_its_password_or_query(url: str, shown: str) -> None:
    assert shown_url(url) == shown


def test_secrets_are_scrubbed_whole_and_by_token() -> None:
    secrets = Secrets(["Bearer abcdefgh12345", "short"])
    assert redact("a Bearer abcdefgh12345 b abcdefgh12345 short", secrets) == "a *** b *** short"


def test_an_exception_chain_is_scrubbed_for_a_traceback() -> None:
    token = "abcdefgh" + "12345"  # never written whole in this file, which a traceback quotes
    secrets = Secrets([f"Bearer {token}"])
    try:
        try:
            raise MCPError(-32600, f"no session for {token}")
        except MCPError as inner:
            raise RuntimeError(f"wrapped Bearer {token}") from inner
    except RuntimeError as exc:
        scrubbed = scrub(exc, secrets)
    text = "".join(traceback.format_exception(scrubbed))
    assert token not in text
    assert "no session for ***" in text and "wrapped ***" in text


async def test_a_failure_quoting_an_environment_value_does_not_show_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = MCPServerStdio(sys.executable, [str(SERVER)], env={"SECRET": SECRET})
    try:
        provider = calling([call("leak")])
        agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
        with caplog.at_level(logging.DEBUG):
            result = await Runner().run(agent, message="go")
    finally:
        await server.close()
    answer = tool_messages(result.messages)["call_1"]
    assert answer.endswith("secret=***")
    assert SECRET not in caplog.text
    assert SECRET not in repr(server)


async def test_a_failure_quoting_a_header_does_not_show_it(
    http_server: HTTPServer, caplog: pytest.LogCaptureFixture
) -> None:
    server = http_server.client()
    try:
        provider = calling([call("leak")])
        agent = Agent("A", model="m", provider=provider, mcp_servers=[server])
        with caplog.at_level(logging.DEBUG):
            result = await Runner().run(agent, message="go")
    finally:
        await server.close()
    answer = tool_messages(result.messages)["call_1"]
    assert "auth=*** secret=None" in answer
    assert http_server.token is not None
    assert http_server.token not in caplog.text
    assert http_server.token not in repr(server)
