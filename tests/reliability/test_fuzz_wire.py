"""Malformed and truncated replies, fuzzed: a reply, or a provider error saying what broke.

Valid replies of both wire formats (a text stream, a tool-call stream, a whole reply) are
mutated at random: a value anywhere replaced by any JSON value, keys deleted, events dropped,
repeated or cut off. The reply parsers must then return a reply or raise ``MalformedReply``
(which the providers turn into ``StreamInterruptedError`` or ``ProviderError``), never
anything else. Then the same on the wire: server-sent-event bodies cut at a random point
(cleanly or by a reset) or with random characters overwritten, streamed over HTTP by the
real vendor clients, end in a reply or ``StreamInterruptedError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aniki import Message, ModelRequest, ModelResponse, StreamInterruptedError, TextDelta
from aniki import ValidationError as MessageValidationError
from aniki.providers._anthropic_wire import EventAccumulator, parse_message
from aniki.providers._openai_wire import ChunkAccumulator, parse_completion
from aniki.providers._stream import MalformedReply

from ..providers.fake_server import FakeServer, Stream
from ..providers.vendors import ANTHROPIC, OPENAI, VENDORS, Vendor
from .hostile import json_values

FUZZ = settings(
    deadline=timedelta(seconds=5),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
CALLS = [("call_1", "get_weather", {"city": "Oslo"}), ("call_2", "noop", {})]


def event_data(events: list[str]) -> list[Any]:
    """The JSON data of server-sent events (``[DONE]`` left out)."""
    data = []
    for event in events:
        for line in event.splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                data.append(json.loads(line[len("data: ") :]))
    return data


STREAMS: dict[str, tuple[type[Any], list[Any]]] = {
    f"{vendor.name} {kind}": (
        ChunkAccumulator if vendor is OPENAI else EventAccumulator,
        event_data(
            vendor.text_events(["Hello", ", world"])
            if kind == "text"
            else vendor.tool_events(CALLS)
        ),
    )
    for vendor in VENDORS
    for kind in ("text", "tools")
}
REPLIES: dict[str, tuple[Any, Any]] = {
    f"{vendor.name} {kind}": (
        parse_completion if vendor is OPENAI else parse_message,
        vendor.text_reply("Hello") if kind == "text" else vendor.tool_reply(CALLS),
    )
    for vendor in VENDORS
    for kind in ("text", "tools")
}


WRONG: list[Any] = [
    None,
    True,
    0,
    -1,
    2**64,
    1.5,
    "",
    "x",
    "\ud800",
    "\x00",
    [],
    [1],
    {},
    {"type": 1},
]
"""Values of the wrong type (or the right type, oddly filled) for any field."""


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path (a tuple of keys) of every value inside ``value``."""
    found: list[tuple[Any, ...]] = []
    keys = list(value) if isinstance(value, dict) else range(len(value))
    for key in keys:
        found.append((*prefix, key))
        if isinstance(value[key], (dict, list)):
            found += paths(value[key], (*prefix, key))
    return found


def single_faults(value: Any) -> list[Any]:
    """``value`` with one fault each: every field deleted, or replaced by each wrong value."""
    variants: list[Any] = []
    for path in paths(value):
        for replacement in [_DELETE, *WRONG]:
            copy = json.loads(json.dumps(value))
            node = copy
            for key in path[:-1]:
                node = node[key]
            if replacement is _DELETE:
                if not isinstance(node, dict):
                    continue
                del node[path[-1]]
            else:
                node[path[-1]] = replacement
            variants.append(copy)
    return variants


_DELETE = object()


def slots(value: Any) -> list[tuple[Any, Any]]:
    """Every (container, key) pair inside ``value``: the places a mutation can hit."""
    found: list[tuple[Any, Any]] = []
    pending = [value]
    while pending:
        node = pending.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node))
        for key in keys:
            found.append((node, key))
            if isinstance(node[key], (dict, list)):
                pending.append(node[key])
    return found


def mutate(data: st.DataObject, value: Any, rounds: int) -> Any:
    """``value`` (a JSON document) with ``rounds`` random changes made to it."""
    value = json.loads(json.dumps(value))
    for _ in range(rounds):
        places = slots(value)
        if not places:
            break
        node, key = data.draw(st.sampled_from(places))
        if isinstance(node, dict) and data.draw(st.booleans()):
            del node[key]
        else:
            node[key] = data.draw(json_values)
    return value


def outcome(parse: Any) -> ModelResponse | None:
    """Run ``parse``; ``None`` when it refused the reply as malformed."""
    try:
        response = parse()
    except MalformedReply as error:
        assert str(error)
        return None
    assert isinstance(response, ModelResponse)
    with contextlib.suppress(MessageValidationError):  # the Runner reports it as ProviderError
        response.to_message()
    return response


def feed(factory: type[Any], events: list[Any]) -> ModelResponse:
    accumulator = factory()
    for event in events:
        text = accumulator.feed(event)
        assert isinstance(text, str)
    response: ModelResponse = accumulator.finish()
    return response


@pytest.mark.parametrize("name", list(STREAMS))
def test_every_single_fault_in_a_stream_gives_a_reply_or_malformed_reply(name: str) -> None:
    factory, events = STREAMS[name]
    variants = single_faults(events)
    assert len(variants) > 500
    for variant in variants:
        outcome(lambda variant=variant: feed(factory, variant))
    for cut in range(len(events)):  # and the stream cut off after each event
        outcome(lambda cut=cut: feed(factory, events[:cut]))


@pytest.mark.parametrize("name", list(REPLIES))
def test_every_single_fault_in_a_reply_gives_a_reply_or_malformed_reply(name: str) -> None:
    parse, reply = REPLIES[name]
    for variant in single_faults(reply):
        outcome(lambda variant=variant: parse(variant))


@settings(FUZZ, max_examples=200)
@given(st.sampled_from(list(STREAMS)), st.data())
def test_mutated_stream_events_give_a_reply_or_malformed_reply(name: str, data: Any) -> None:
    factory, events = STREAMS[name]
    events = mutate(data, events, data.draw(st.integers(1, 4)))
    cut = data.draw(st.integers(0, len(events)))
    repeat = data.draw(st.booleans())
    if repeat and events:
        events = [*events, events[data.draw(st.integers(0, len(events) - 1))]]
    events = events[:cut] if data.draw(st.booleans()) else events
    outcome(lambda: feed(factory, events))


@settings(FUZZ, max_examples=150)
@given(st.sampled_from(list(REPLIES)), st.data())
def test_mutated_whole_replies_give_a_reply_or_malformed_reply(name: str, data: Any) -> None:
    parse, reply = REPLIES[name]
    mutated = mutate(data, reply, data.draw(st.integers(1, 4)))
    outcome(lambda: parse(mutated))


@settings(FUZZ, max_examples=100)
@given(st.sampled_from(list(REPLIES)), json_values)
def test_any_json_value_as_a_reply(name: str, value: Any) -> None:
    parse, _ = REPLIES[name]
    outcome(lambda: parse(value))
    factory = ChunkAccumulator if name.startswith("openai") else EventAccumulator
    outcome(lambda: (factory().feed(value), factory().finish())[1])


# --- the same on the wire, through the vendor clients ----------------------------------------

NOISE = st.one_of(
    st.sampled_from(
        ["", "\n", "\r", "\x00", '"', "{", "}", ":", ",", "[", "\\", "\ufffd", "\U0001f600"]
    ),
    st.characters(exclude_categories=["Cs"]),
)
"""What overwrites a character of an event body: structure, controls, or anything."""

REQUEST = ModelRequest(model="m", messages=(Message("user", "Hi"),))


async def stream_body(vendor: Vendor, body: str, end: str) -> ModelResponse | None:
    async with FakeServer() as server:
        server.enqueue(Stream([body], end=end))  # type: ignore[arg-type]
        provider: Any = vendor.provider(server.url, timeout=2.0)
        try:
            async for item in provider.stream(REQUEST):
                if not isinstance(item, TextDelta):
                    assert isinstance(item, ModelResponse)
                    return item
        except StreamInterruptedError as error:
            assert error.provider == vendor.name
            return None
        finally:
            await provider.aclose()
        raise AssertionError("the stream ended without a reply or an error")


@settings(FUZZ, max_examples=60)
@given(
    st.sampled_from([OPENAI, ANTHROPIC]),
    st.sampled_from(["text", "tools"]),
    st.data(),
)
def test_corrupted_event_bytes_give_a_reply_or_stream_interrupted(
    vendor: Vendor, kind: str, data: Any
) -> None:
    events = (
        vendor.text_events(["Hello", ", world"]) if kind == "text" else vendor.tool_events(CALLS)
    )
    body = list("".join(events))
    for _ in range(data.draw(st.integers(0, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(NOISE)
    cut = data.draw(st.integers(0, len(body)))
    end = data.draw(st.sampled_from(["finish", "drop"]))
    asyncio.run(stream_body(vendor, "".join(body[:cut]), end))
