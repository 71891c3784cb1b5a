"""``within_about``: the bound of every store call, sharing one timer per tick of the loop."""

from __future__ import annotations

import asyncio
import sys
import time

import pytest

from aniki import _aio
from aniki._aio import GRAIN, within_about

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason="before 3.11 within_about is within (asyncio.wait_for)"
)


@pytest.fixture(autouse=True)
def _coarse_from_a_tenth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_aio, "_COARSE_FROM", 0.1)  # the tests wait tenths, not seconds


async def _sleep_then(value: str, seconds: float) -> str:
    await asyncio.sleep(seconds)
    return value


def test_a_call_in_time_returns_its_result() -> None:
    assert asyncio.run(within_about(0.5, _sleep_then("done", 0.01))) == "done"


def test_a_late_call_is_cancelled_with_timeout_error_at_most_a_grain_late() -> None:
    cancelled = []

    async def slow() -> None:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def main() -> float:
        start = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await within_about(0.2, slow())
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0  # its cancellation taken back
        return time.monotonic() - start

    took = asyncio.run(main())
    assert cancelled == [True]
    assert 0.2 <= took < 0.2 + GRAIN + 0.15  # the slack: a loaded machine's scheduling


def test_many_calls_at_once_share_a_timer_and_each_times_out() -> None:
    async def main() -> tuple[int, list[object]]:
        loop = asyncio.get_running_loop()
        before = len(loop._scheduled)  # type: ignore[attr-defined]
        never = asyncio.Event()  # waits with no timer of its own, unlike asyncio.sleep
        calls = [asyncio.ensure_future(within_about(0.2, never.wait())) for _ in range(200)]
        await asyncio.sleep(0)  # each call has begun and registered its bound
        timers = len(loop._scheduled) - before  # type: ignore[attr-defined]
        outcomes = await asyncio.gather(*calls, return_exceptions=True)
        return timers, outcomes

    timers, outcomes = asyncio.run(main())
    assert timers <= 2  # 200 bounds, one tick (two if the calls straddle one)
    assert all(isinstance(outcome, asyncio.TimeoutError) for outcome in outcomes)


def test_a_cancellation_from_outside_stays_a_cancellation() -> None:
    async def main() -> None:
        call = asyncio.ensure_future(within_about(5.0, asyncio.sleep(10)))
        await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call

    asyncio.run(main())


def test_an_outer_shorter_timeout_is_the_outer_ones() -> None:
    async def main() -> None:
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.05):
                await within_about(5.0, asyncio.sleep(10))
        task = asyncio.current_task()
        assert task is not None and task.cancelling() == 0

    asyncio.run(main())


def test_work_that_swallows_the_cancellation_leaves_its_task_uncancelled() -> None:
    async def stubborn() -> str:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            return "finished anyway"
        return "slept"

    async def main() -> tuple[str, int]:
        result = await within_about(0.15, stubborn())
        task = asyncio.current_task()
        assert task is not None
        return result, task.cancelling()

    assert asyncio.run(main()) == ("finished anyway", 0)


def test_a_short_bound_is_kept_exactly() -> None:
    async def main() -> float:
        start = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await within_about(0.02, asyncio.sleep(10))  # under _COARSE_FROM: exact
        return time.monotonic() - start

    assert asyncio.run(main()) < 0.02 + GRAIN


def test_a_call_that_ended_in_time_never_cancels_its_task_later() -> None:
    async def main() -> str:
        await within_about(0.15, asyncio.sleep(0.01))
        await asyncio.sleep(0.15 + 2 * GRAIN)  # past the tick the call's bound fell in
        return "not cancelled"

    assert asyncio.run(main()) == "not cancelled"
