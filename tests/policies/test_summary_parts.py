"""The pure parts of summarizing: fitting a summary, chunking, the record, the request."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Message
from aniki.sessions.policies._select import cut_points
from aniki.sessions.policies._summary import (
    Summary,
    chunk_ends,
    fit_text,
    message_digest,
    render_request,
)

from .histories import assistant, histories, result, user, word_cost


def words(text: str) -> int:
    return 3 + len(text.split())


def test_a_summary_that_fits_is_kept_whole() -> None:
    assert fit_text("short and sweet", 10, words) == "short and sweet"


def test_a_long_summary_is_cut_at_the_end_to_fit() -> None:
    text = " ".join(f"w{i}" for i in range(100))
    cut = fit_text(text, 20, words)
    assert cut.endswith(" [...]")
    assert words(cut) <= 20
    assert words(fit_text(text, 21, words)) == 21  # the longest prefix that fits
    assert text.startswith(cut.removesuffix(" [...]"))


@pytest.mark.parametrize("budget", [0, 1, 3, 4])
def test_when_nothing_fits_the_summary_is_empty(budget: int) -> None:
    assert fit_text("a b c d e f g", budget, words) == ""


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=300), st.integers(min_value=0, max_value=80))
def test_fit_text_always_ends(text: str, budget: int) -> None:
    fitted = fit_text(text, budget, words)
    assert fitted == "" or words(fitted) <= budget


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=120))
def test_chunks_cover_everything_and_end_between_exchanges(
    history: list[Message], budget: int
) -> None:
    ends = chunk_ends(history, word_cost, budget)
    allowed = set(cut_points(history))
    assert ends == sorted(set(ends))
    assert (ends[-1] if ends else 0) == len(history)
    start = 0
    for end in ends:
        assert end in allowed
        size = sum(word_cost(m) for m in history[start:end])
        # Over the budget only when the first exchange alone is.
        if size > budget:
            assert not [p for p in allowed if start < p < end]
        start = end


def test_the_record_round_trips_and_bad_records_are_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    last = assistant("done")
    summary = Summary.covering("text", 7, last)
    assert Summary.from_record(summary.to_record()) == summary
    assert summary.ends_with(Message(role="assistant", content="done"))
    assert not summary.ends_with(user("done"))
    assert Summary.from_record(None) is None
    with caplog.at_level(logging.WARNING, logger="aniki"):
        for bad in ("text", {"version": 99}, {**summary.to_record(), "covered": "7"}):
            assert Summary.from_record(bad) is None
    assert caplog.text.count("unreadable stored summary") == 3


def test_digests_tell_messages_apart() -> None:
    assert message_digest(user("a")) == message_digest(Message(role="user", content="a"))
    assert message_digest(user("a")) != message_digest(assistant("a"))
    assert message_digest(result("x", "1")) != message_digest(result("y", "1"))


def test_the_request_holds_the_prompt_the_summary_so_far_and_the_new_messages() -> None:
    messages = [user("hi"), assistant("", "c1"), result("c1", "42"), assistant("it is 42")]
    text = render_request("Summarize.", "earlier things", messages, 120)
    assert text.startswith("Summarize.\nKeep the summary under 120 words.")
    assert '<summary_so_far>\n"earlier things"\n</summary_so_far>' in text
    assert '\n[user] "hi"\n' in text
    assert '\n[assistant calls tool "tool_c1" with id "c1"] "{\\"q\\": 1}"\n' in text
    assert '\n[tool result for "c1"] "42"\n' in text
    assert "<summary_so_far>" not in render_request("Summarize.", None, messages, 120)
