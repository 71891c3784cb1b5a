"""Every error path, for every wire format: what the server did, what aniki raised.

Retries are the official clients' own; these tests check that they happen (and stop), that
``Retry-After`` is honoured, and that whatever fails reaches the caller as an aniki error
with the client's exception as its cause.
"""

from __future__ import annotations

from typing import Any

import pytest

from aniki import (
    AnikiError,
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    Message,
    ModelRequest,
    ModelResponse,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    StreamInterruptedError,
    TextDelta,
)
from aniki.providers.base import Provider

from .fake_server import Drop, FakeServer, Respond, Stall, Stream, closed_port, sse
from .vendors import ALL_VENDORS, API_KEY, Vendor

REQUEST = ModelRequest(model="m", messages=(Message("user", "Hi"),))
FAST_RETRY = {"retry-after-ms": "10"}


async def call(p: Provider, mode: str) -> tuple[list[str], ModelResponse]:
    """Make one call with ``complete`` or ``stream``; return the deltas and the reply."""
    if mode == "complete":
        return [], await p.complete(REQUEST)
    texts: list[str] = []
    async for item in p.stream(REQUEST):
        if isinstance(item, TextDelta):
            texts.append(item.text)
        else:
            return texts, item
    raise AssertionError("the stream ended without a reply")


def reply(vendor: Vendor, mode: str, text: str) -> Respond | Stream:
    return vendor.ok(text) if mode == "complete" else Stream(vendor.text_events([text]))


both_modes = pytest.mark.parametrize("mode", ["complete", "stream"])


@pytest.fixture(params=ALL_VENDORS, ids=lambda vendor: vendor.name)
def vendor(request: pytest.FixtureRequest) -> Vendor:
    """Each wire format in turn, the Responses API included."""
    chosen: Vendor = request.param
    return chosen


@both_modes
async def test_429_is_retried_after_the_time_the_server_asked_for(
    server: FakeServer, vendor: Vendor, mode: str
) -> None:
    # 0.8 s is longer than the client's own first backoff (at most 0.5 s): only honouring
    # Retry-After makes the retry wait that long.
    server.enqueue(Respond(429, vendor.rate_limit_error, {"Retry-After": "0.8"}))
    server.enqueue(reply(vendor, mode, "after the wait"))
    _, response = await call(vendor.provider(server.url, max_retries=1), mode)
    assert response.content == "after the wait"
    first, second = server.requests
    assert first.answered_at is not None
    assert second.received_at - first.answered_at >= 0.8
    assert second.headers.get("x-stainless-retry-count") == "1"
    assert second.body == first.body


@both_modes
async def test_429_when_retries_run_out(server: FakeServer, vendor: Vendor, mode: str) -> None:
    server.enqueue(*[Respond(429, vendor.rate_limit_error, {"Retry-After": "0.01"})] * 3)
    with pytest.raises(RateLimitError) as info:
        await call(vendor.provider(server.url, max_retries=2), mode)
    assert len(server.requests) == 3  # bounded: one call and two retries, no more
    error = info.value
    assert error.retry_after == 0.01
    assert error.status_code == 429
    assert error.provider == vendor.name
    assert "rate limit" in str(error).lower()


async def test_429_reports_retry_after_without_retrying(server: FakeServer, vendor: Vendor) -> None:
    server.enqueue(Respond(429, vendor.rate_limit_error, {"Retry-After": "7"}))
    with pytest.raises(RateLimitError) as info:
        await vendor.provider(server.url, max_retries=0).complete(REQUEST)
    assert info.value.retry_after == 7.0
    assert len(server.requests) == 1


@both_modes
@pytest.mark.parametrize("status", [500, 502, 503])
async def test_server_errors_are_retried(
    server: FakeServer, vendor: Vendor, mode: str, status: int
) -> None:
    server.enqueue(Respond(status, vendor.server_error, FAST_RETRY), reply(vendor, mode, "ok"))
    _, response = await call(vendor.provider(server.url, max_retries=1), mode)
    assert response.content == "ok"
    assert len(server.requests) == 2


@both_modes
async def test_server_errors_when_retries_run_out(
    server: FakeServer, vendor: Vendor, mode: str
) -> None:
    server.enqueue(*[Respond(500, vendor.server_error, FAST_RETRY)] * 2)
    with pytest.raises(ProviderError) as info:
        await call(vendor.provider(server.url, max_retries=1), mode)
    assert type(info.value) is ProviderError
    assert info.value.status_code == 500
    assert info.value.body is not None
    assert len(server.requests) == 2


@both_modes
async def test_401_names_the_variable_and_hides_the_key(
    server: FakeServer, vendor: Vendor, mode: str
) -> None:
    server.enqueue(Respond(401, vendor.auth_error))  # this server even echoes the key back
    with pytest.raises(AuthenticationError) as info:
        await call(vendor.provider(server.url, max_retries=3), mode)
    error = info.value
    assert len(server.requests) == 1  # not retried
    assert error.env_var == vendor.env_var
    assert vendor.env_var in str(error)
    assert error.status_code == 401
    for text in (str(error), repr(error), repr(error.body), repr(error.args)):
        assert API_KEY not in text


@both_modes
async def test_context_window_exceeded(server: FakeServer, vendor: Vendor, mode: str) -> None:
    server.enqueue(Respond(400, vendor.context_error))
    with pytest.raises(ContextWindowExceededError) as info:
        await call(vendor.provider(server.url, max_retries=2), mode)
    assert info.value.status_code == 400
    assert len(server.requests) == 1


async def test_other_bad_requests(server: FakeServer, vendor: Vendor) -> None:
    body = {"error": {"type": "invalid_request_error", "message": "temperature: out of range"}}
    server.enqueue(Respond(400, body), Respond(404, {"error": {"message": "no such model"}}))
    p = vendor.provider(server.url)
    with pytest.raises(BadRequestError) as info:
        await p.complete(REQUEST)
    assert type(info.value) is BadRequestError
    assert "temperature: out of range" in str(info.value)
    with pytest.raises(BadRequestError, match="no such model"):
        await p.complete(REQUEST)


@both_modes
async def test_no_answer_in_time(server: FakeServer, vendor: Vendor, mode: str) -> None:
    server.enqueue(Stall())
    with pytest.raises(ProviderTimeoutError) as info:
        await call(vendor.provider(server.url, timeout=0.2), mode)
    assert "timeout=" in str(info.value)


@both_modes
async def test_a_timeout_is_retried(server: FakeServer, vendor: Vendor, mode: str) -> None:
    server.enqueue(Stall(), reply(vendor, mode, "second try"))
    _, response = await call(vendor.provider(server.url, timeout=0.5, max_retries=1), mode)
    assert response.content == "second try"
    assert len(server.requests) == 2


@both_modes
async def test_a_connection_dropped_before_any_answer(
    server: FakeServer, vendor: Vendor, mode: str
) -> None:
    server.enqueue(Drop())
    with pytest.raises(ProviderConnectionError, match="before the whole reply arrived"):
        await call(vendor.provider(server.url), mode)
    server.enqueue(Drop(), reply(vendor, mode, "reconnected"))
    _, response = await call(vendor.provider(server.url, max_retries=1), mode)
    assert response.content == "reconnected"


async def test_connection_refused(vendor: Vendor) -> None:
    port = await closed_port()
    with pytest.raises(ProviderConnectionError) as info:
        await vendor.provider(f"http://127.0.0.1:{port}").complete(REQUEST)
    assert f"127.0.0.1:{port}" in str(info.value)
    assert info.value.__cause__ is not None


async def test_a_reply_that_is_not_json(server: FakeServer, vendor: Vendor) -> None:
    server.enqueue(Respond(200, "<html>gateway says hi</html>"))
    with pytest.raises(ProviderError, match="not valid JSON"):
        await vendor.provider(server.url).complete(REQUEST)


async def test_a_reply_of_another_shape(server: FakeServer, vendor: Vendor) -> None:
    server.enqueue(Respond(200, {"result": "hello"}))
    with pytest.raises(ProviderError, match="documented shape") as info:
        await vendor.provider(server.url).complete(REQUEST)
    assert info.value.body == {"result": "hello"}


async def assert_interrupted(p: Provider, texts_before: list[str]) -> StreamInterruptedError:
    seen: list[str] = []
    with pytest.raises(StreamInterruptedError) as info:
        async for item in p.stream(REQUEST):
            assert isinstance(item, TextDelta), "no final reply may come from a broken stream"
            seen.append(item.text)
    assert seen == texts_before
    return info.value


async def test_a_stream_cut_off_mid_body(server: FakeServer, vendor: Vendor) -> None:
    server.enqueue(Stream(vendor.first_events(["Once ", "upon ", "a time"], 1), end="drop"))
    error = await assert_interrupted(vendor.provider(server.url, max_retries=3), ["Once "])
    assert "connection dropped" in str(error)
    assert len(server.requests) == 1  # a stream already under way is not retried by the client


async def test_a_stream_that_ends_without_its_end_marker(
    server: FakeServer, vendor: Vendor
) -> None:
    server.enqueue(Stream(vendor.unfinished_events(["half ", "an answer"])))
    error = await assert_interrupted(vendor.provider(server.url), ["half ", "an answer"])
    assert "ended" in str(error)
    assert error.provider == vendor.name


async def test_a_stream_that_stalls_part_way(server: FakeServer, vendor: Vendor) -> None:
    server.enqueue(Stream(vendor.first_events(["Once ", "upon"], 1), end="stall"))
    error = await assert_interrupted(vendor.provider(server.url, timeout=0.5), ["Once "])
    assert "timeout" in str(error)


@pytest.mark.parametrize(
    "bad",
    [
        "data: {not json\n\n",
        sse({"choices": "nope", "type": "content_block_delta", "index": 0, "delta": 5}),
    ],
    ids=["invalid JSON", "wrong shape"],
)
async def test_a_malformed_event(server: FakeServer, vendor: Vendor, bad: str) -> None:
    events = vendor.text_events(["Once ", "upon"])
    if vendor.name == "anthropic":
        bad = "event: content_block_delta\n" + bad
    elif vendor.name == "openai-responses" and "choices" in bad:
        bad = sse({"type": "response.output_text.delta", "delta": 5})
    cut = vendor.text_prefix + 1
    server.enqueue(Stream([*events[:cut], bad, *events[cut:]]))
    error = await assert_interrupted(vendor.provider(server.url), ["Once "])
    assert "malformed" in str(error)


async def test_an_error_sent_part_way(server: FakeServer, vendor: Vendor) -> None:
    if vendor.name == "anthropic":
        error_event = sse(
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            event="error",
        )
    else:
        error_event = sse({"error": {"message": "Overloaded", "type": "server_error"}})
    server.enqueue(Stream([*vendor.first_events(["Once ", "upon"], 1), error_event]))
    error = await assert_interrupted(vendor.provider(server.url), ["Once "])
    assert "Overloaded" in str(error)
    assert error.body is not None


@both_modes
async def test_every_failure_keeps_the_client_error_as_cause(
    server: FakeServer, vendor: Vendor, mode: str
) -> None:
    failures: list[Any] = [
        Respond(401, vendor.auth_error),
        Respond(429, vendor.rate_limit_error),
        Respond(400, vendor.context_error),
        Respond(503, vendor.server_error),
        Drop(),
    ]
    p = vendor.provider(server.url)
    for failure in failures:
        server.enqueue(failure)
        with pytest.raises(AnikiError) as info:
            await call(p, mode)
        cause = info.value.__cause__
        assert cause is not None
        assert type(cause).__module__.split(".")[0] == vendor.name.split("-")[0]
