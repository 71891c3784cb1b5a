"""The one driver of flows (``aniki.sessions._driver``): the same generator run from sync
code, from async code, and by a wrapper that learns which from its store's first reply."""

from __future__ import annotations

import asyncio
from collections.abc import Generator
from typing import Any

import pytest

from aniki.sessions._driver import adrive, drive, drive_either


def _sum_of_squares(numbers: list[int]) -> Generator[int, int, int]:
    """Asks for the square of each number; returns their sum."""
    total = 0
    for number in numbers:
        total += yield number
    return total


def _square(number: int) -> int:
    return number * number


async def _square_later(number: int) -> int:
    await asyncio.sleep(0)
    return number * number


def test_drive_answers_every_request_and_returns_the_flows_result() -> None:
    asked: list[int] = []

    def answer(number: int) -> int:
        asked.append(number)
        return _square(number)

    assert drive(_sum_of_squares([1, 2, 3]), answer) == 14
    assert asked == [1, 2, 3]
    assert drive(_sum_of_squares([]), answer) == 0  # a flow that asks nothing


def test_drive_resumes_a_flow_whose_first_request_was_taken_by_hand() -> None:
    flow = _sum_of_squares([4, 5])
    first = next(flow)
    assert drive(flow, _square, _square(first)) == 41


def test_adrive_awaits_the_replies_that_are_awaitable() -> None:
    assert asyncio.run(adrive(_sum_of_squares([1, 2, 3]), _square_later)) == 14
    assert asyncio.run(adrive(_sum_of_squares([1, 2, 3]), _square)) == 14


def test_drive_either_stays_sync_while_the_replies_are_plain() -> None:
    assert drive_either(_sum_of_squares([1, 2, 3]), _square) == 14


def test_drive_either_switches_to_async_at_the_first_awaitable_reply() -> None:
    def mixed(number: int) -> Any:
        return _square(number) if number < 3 else _square_later(number)

    result = drive_either(_sum_of_squares([1, 2, 3, 4]), mixed)
    assert asyncio.iscoroutine(result)
    assert asyncio.run(result) == 30


def test_an_error_in_an_answer_reaches_the_caller() -> None:
    def failing(number: int) -> int:
        raise KeyError(number)

    with pytest.raises(KeyError):
        drive(_sum_of_squares([1]), failing)
    with pytest.raises(KeyError):
        drive_either(_sum_of_squares([1]), failing)

    async def failing_later(number: int) -> int:
        raise KeyError(number)

    with pytest.raises(KeyError):
        asyncio.run(adrive(_sum_of_squares([1]), failing_later))
