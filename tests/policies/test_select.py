"""The pure selection logic shared by every policy."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from aniki import Message
from aniki.sessions.policies._select import cut_points, select_start, unit_cost

from .histories import (
    allowed,
    assert_provider_valid,
    assistant,
    expected_start,
    histories,
    result,
    user,
    word_cost,
)

EXCHANGE = [
    user("q"),
    assistant("", "a", "b"),
    result("b"),
    result("a"),
    assistant("done"),
]


def test_empty_history_keeps_nothing() -> None:
    assert select_start([], 5) == 0


def test_plain_conversation_keeps_the_last_messages() -> None:
    history = [user(f"m{i}") for i in range(10)]
    assert select_start(history, 3) == 7


def test_the_cut_moves_forward_past_results_of_a_dropped_call() -> None:
    # The last 3 messages would start on the result for "a": the window shrinks to 1.
    assert select_start(EXCHANGE, 3) == 4


def test_a_window_may_start_on_the_assistant_call() -> None:
    assert select_start(EXCHANGE, 4) == 1


def test_an_exchange_longer_than_the_limit_is_kept_whole_mid_run() -> None:
    mid_run = EXCHANGE[:4]  # ends with tool results: the run is still going
    assert select_start(mid_run, 1) == 1
    assert select_start(mid_run, 2) == 1


def test_a_pending_call_without_results_yet_is_kept() -> None:
    pending = [user("q"), assistant("", "a")]
    assert select_start(pending, 1) == 1


def test_a_result_whose_call_is_nowhere_does_not_pin_the_whole_history() -> None:
    history = [user("a"), user("b"), user("c"), result("ghost")]
    assert select_start(history, 2) == 2


def test_partial_window_asks_for_more_only_when_the_answer_is_not_in_it() -> None:
    tail = EXCHANGE[2:]  # starts on results whose call is earlier
    assert select_start(tail, 2, complete=False) == 2
    assert select_start(tail, 10, complete=False) is None


def test_costs_are_weighed() -> None:
    history = [user("x" * 10), user("y"), user("z")]
    assert select_start(history, 3, lambda m: len(m.content)) == 1


def test_cut_points() -> None:
    assert cut_points([]) == [0]
    assert cut_points(EXCHANGE) == [0, 1, 4, 5]


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=12))
def test_window_rules_hold_at_every_cut(history: list[Message], limit: int) -> None:
    for end in range(len(history) + 1):
        prefix = history[:end]
        start = select_start(prefix, limit)
        assert start == expected_start(prefix, limit, unit_cost)
        assert allowed(prefix, start)
        assert_provider_valid(prefix[start:])
        if prefix:
            assert start < len(prefix)


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=200))
def test_budget_rules_hold_at_every_cut(history: list[Message], budget: int) -> None:
    for end in range(len(history) + 1):
        prefix = history[:end]
        start = select_start(prefix, budget, word_cost)
        assert start == expected_start(prefix, budget, word_cost)


@settings(max_examples=100, deadline=None)
@given(histories(), st.integers(min_value=1, max_value=100), st.integers(min_value=0, max_value=60))
def test_a_partial_window_agrees_with_the_whole_history(
    history: list[Message], budget: int, shown: int
) -> None:
    window = history[-shown:] if shown else []
    start = select_start(window, budget, word_cost, complete=len(window) == len(history))
    if start is not None:
        assert len(history) - len(window) + start == select_start(history, budget, word_cost)


@settings(max_examples=100, deadline=None)
@given(histories())
def test_cut_points_are_exactly_the_allowed_starts(history: list[Message]) -> None:
    assert cut_points(history) == [s for s in range(len(history) + 1) if allowed(history, s)]
