"""What a run makes of a hostile or broken server, for every wire format, over real HTTP.

A reply that repeats a tool call's id, reports impossible token counts, is cut off after the
connection was made, or fails with a long explanation: each reaches the caller as something
true and usable, never as a history that no provider accepts afterwards.
"""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

from aniki import (
    Agent,
    BadRequestError,
    Message,
    ModelRequest,
    ProviderConnectionError,
    ProviderError,
    RunCompleted,
    Runner,
    RunResult,
    ToolCall,
    Usage,
    tool,
)
from aniki.testing import MockProvider

from .fake_server import FakeServer, RecordedRequest, Respond, Stream, closed_port
from .vendors import ALL_VENDORS, API_KEY, OPENAI, RESPONSES, Vendor

REQUEST = ModelRequest(model="m", messages=(Message("user", "Hi"),))


@pytest.fixture(params=ALL_VENDORS, ids=lambda vendor: vendor.name)
def vendor(request: pytest.FixtureRequest) -> Vendor:
    """Each wire format in turn, the Responses API included."""
    chosen: Vendor = request.param
    return chosen


def stored(agent: Agent) -> list[Message]:
    return list(agent.session.get_messages())  # type: ignore[union-attr]


async def drive(mode: str, agent: Agent, message: str) -> RunResult:
    runner = Runner()
    if mode == "run":
        return await runner.run(agent, message=message)
    events = [event async for event in runner.stream(agent, message=message)]
    assert isinstance(events[-1], RunCompleted)
    return events[-1].result


def sent_call_ids(vendor: Vendor, request: RecordedRequest) -> tuple[list[str], list[str]]:
    """The tool call ids a request sends back: those called, and those answered."""
    body = request.json()
    if vendor.name == "openai-responses":
        items = body["input"]
        called = [i["call_id"] for i in items if i.get("type") == "function_call"]
        answered = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
        return called, answered
    if vendor.name == "anthropic":
        blocks = [
            block
            for message in body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
        ]
        called = [b["id"] for b in blocks if b["type"] == "tool_use"]
        answered = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        return called, answered
    messages = body["messages"]
    called = [c["id"] for m in messages for c in m.get("tool_calls") or []]
    answered = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    return called, answered


# A reply that names two tool calls with one id ---------------------------------------------


@pytest.mark.parametrize("mode", ["run", "stream"])
async def test_a_repeated_tool_call_id_gets_a_fresh_one_before_anything_runs(
    server: FakeServer, vendor: Vendor, mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []

    @tool
    def record(n: int) -> str:
        """Record a number.

        Args:
            n: The number.
        """
        ran.append(n)
        return f"recorded {n}"

    calls = [("call_same", "record", {"n": 1}), ("call_same", "record", {"n": 2})]
    streaming = mode == "stream"
    server.enqueue(
        Stream(vendor.tool_events(calls)) if streaming else Respond(200, vendor.tool_reply(calls)),
        Stream(vendor.text_events(["done"])) if streaming else vendor.ok("done"),
    )
    agent = Agent("A", model="m", provider=vendor.provider(server.url), tools=[record])
    with caplog.at_level(logging.WARNING, logger="aniki"):
        result = await drive(mode, agent, "record 1 and 2")
    assert result.content == "done"
    assert sorted(ran) == [1, 2]  # each call ran once

    _, assistant, *answers, _ = stored(agent)
    ids = [call.id for call in assistant.tool_calls]
    assert ids[0] == "call_same" and ids[1] != "call_same" and ids[1]
    by_id = {answer.tool_call_id: answer.content for answer in answers}
    assert by_id == {ids[0]: "recorded 1", ids[1]: "recorded 2"}

    called, answered = sent_call_ids(vendor, server.requests[1])
    assert called == ids and sorted(answered) == sorted(ids)  # a history the server accepts
    assert any("call_same" in record.getMessage() for record in caplog.records)


async def test_every_provider_gets_the_same_repair() -> None:
    same = ToolCall(id="c1", name="missing", arguments="{}")
    provider = MockProvider()
    provider.enqueue_response(tool_calls=[same, same, same])
    provider.enqueue_response(content="ok")
    agent = Agent("A", model="m", provider=provider)
    await Runner().run(agent, message="hi")
    _, assistant, *answers, _ = stored(agent)
    ids = [call.id for call in assistant.tool_calls]
    assert len(set(ids)) == 3 and ids[0] == "c1"
    assert [answer.tool_call_id for answer in answers] == ids


# Token counts that cannot be ------------------------------------------------------------------


def with_usage(vendor: Vendor, **counts: Any) -> dict[str, Any]:
    body = vendor.text_reply("counted")
    body["usage"].update(counts)
    return body


IMPOSSIBLE = {
    "openai": [
        {"prompt_tokens": -100},
        {"completion_tokens": -1},
        {"prompt_tokens": 10, "prompt_tokens_details": {"cached_tokens": 50}},
    ],
    "anthropic": [
        {"input_tokens": -100},
        {"output_tokens": -5},
        {"input_tokens": -100, "cache_read_input_tokens": 150},
    ],
    "openai-responses": [
        {"input_tokens": -100},
        {"output_tokens": True},
        {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 50}},
    ],
}


@pytest.mark.parametrize("case", [0, 1, 2])
async def test_impossible_usage_counts_as_not_reported(
    server: FakeServer, vendor: Vendor, case: int, caplog: pytest.LogCaptureFixture
) -> None:
    server.enqueue(Respond(200, with_usage(vendor, **IMPOSSIBLE[vendor.name][case])))
    agent = Agent("A", model="m", provider=vendor.provider(server.url))
    with caplog.at_level(logging.WARNING, logger="aniki"):
        result = await Runner().run(agent, message="hi")
    assert result.content == "counted"
    assert result.usage == Usage(requests=1, unreported_requests=1)
    assert stored(agent)[-1].usage is None
    assert Message.from_dict(stored(agent)[-1].to_dict()) == stored(agent)[-1]
    assert any("usage" in record.getMessage() for record in caplog.records)


async def test_possible_usage_is_kept_as_reported(server: FakeServer, vendor: Vendor) -> None:
    server.enqueue(vendor.ok("counted"))
    agent = Agent("A", model="m", provider=vendor.provider(server.url))
    result = await Runner().run(agent, message="hi")
    assert result.usage.requests == 1 and result.usage.unreported_requests == 0
    assert result.usage.input_tokens > 0 and stored(agent)[-1].usage == result.usage


# A reply cut off after the connection was made --------------------------------------------


async def test_a_body_cut_off_is_not_reported_as_a_failure_to_connect(
    server: FakeServer, vendor: Vendor
) -> None:
    server.enqueue(Respond(200, vendor.text_reply("a whole reply"), cut_at=40))
    with pytest.raises(ProviderConnectionError) as info:
        await vendor.provider(server.url).complete(REQUEST)
    message = str(info.value)
    assert "could not connect" not in message
    assert "connected to" in message and "before the whole reply arrived" in message
    assert "received 40 bytes" in message  # what the client saw, in its words


async def test_a_refused_connection_still_says_it_could_not_connect(vendor: Vendor) -> None:
    port = await closed_port()
    with pytest.raises(ProviderConnectionError, match="could not connect"):
        await vendor.provider(f"http://127.0.0.1:{port}").complete(REQUEST)


# A server's explanation, kept whole enough to act on ------------------------------------------

LINE = "messages.0.content: Input should be a valid string"


@pytest.mark.parametrize(
    "body",
    [
        {
            "detail": [
                {
                    "type": "string_type",
                    "loc": ["body", "messages", 0, "content"],
                    "msg": "Input should be a valid string",
                    "input": "x" * 900,
                }
            ]
        },
        {"detail": "Traceback (most recent call last):\n" + "  frame\n" * 150 + LINE},
        {"error": {"message": "validation failed: " + "y" * 1500 + "; " + LINE}},
        "Internal Server Error\n" + "z" * 1200 + "\n" + LINE,
    ],
    ids=["fastapi detail list", "detail text", "long message", "plain text"],
)
async def test_the_servers_explanation_is_kept(
    server: FakeServer, vendor: Vendor, body: Any
) -> None:
    server.enqueue(Respond(500, body))
    with pytest.raises(ProviderError) as info:
        await vendor.provider(server.url).complete(REQUEST)
    message = str(info.value)
    assert "messages" in message and "Input should be a valid string" in message
    assert len(message) < 5_000


async def test_a_huge_explanation_keeps_its_start_and_its_end(
    server: FakeServer, vendor: Vendor
) -> None:
    text = "START " + "w" * 50_000 + " " + LINE
    server.enqueue(Respond(500, {"error": {"message": text}}))
    with pytest.raises(ProviderError) as info:
        await vendor.provider(server.url).complete(REQUEST)
    message = str(info.value)
    assert "START" in message and LINE in message
    assert len(message) < 5_000
    assert f"{len(text):,}" in message  # says how long the whole text was


async def test_secrets_are_scrubbed_from_the_explanation(
    server: FakeServer, vendor: Vendor
) -> None:
    other = "tok-9f8e7d6c5b4a39281706"
    text = (
        f"{'v' * 2000} request headers: Authorization: Bearer {API_KEY}, "
        f"x-upstream: Bearer {other}; api_key={other} {LINE}"
    )
    server.enqueue(Respond(500, {"detail": text}))
    with pytest.raises(ProviderError) as info:
        await vendor.provider(server.url).complete(REQUEST)
    message = str(info.value)
    assert API_KEY not in message and other not in message
    assert LINE in message


# A 404: the base URL may lack /v1 ------------------------------------------------------------


@pytest.mark.parametrize("chosen", [OPENAI, RESPONSES], ids=lambda v: v.name)
async def test_a_404_without_v1_says_where_openai_compatible_servers_answer(
    server: FakeServer, chosen: Vendor
) -> None:
    server.enqueue(Respond(404, "404 page not found"))
    provider = chosen.make(api_key=API_KEY, base_url=server.url, max_retries=0)
    with pytest.raises(BadRequestError) as info:
        await provider.complete(REQUEST)
    assert info.value.status_code == 404
    assert "/v1" in str(info.value) and f"base_url='{server.url}/v1'" in str(info.value)


async def test_a_404_under_v1_has_no_such_hint(server: FakeServer, vendor: Vendor) -> None:
    server.enqueue(Respond(404, {"error": {"message": "The model `m` does not exist."}}))
    with pytest.raises(BadRequestError) as info:
        await vendor.provider(server.url).complete(REQUEST)
    assert "/v1" not in str(info.value)  # Anthropic's base URL has no /v1 either


async def test_the_servers_sentence_is_not_given_a_second_period(
    server: FakeServer, vendor: Vendor
) -> None:
    said = "You must provide a model parameter for this completion."
    server.enqueue(Respond(400, {"error": {"message": said, "type": "invalid_request_error"}}))
    with pytest.raises(BadRequestError) as info:
        await vendor.provider(server.url).complete(REQUEST)
    message = str(info.value)
    assert said in message
    assert re.search(r"(?<!\.)\.\.(?!\.)", message) is None, message
