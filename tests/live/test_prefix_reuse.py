"""What each history policy costs a real server: how much of each prompt its KV cache holds.

llama.cpp keeps the tokens it evaluated last and reuses the longest prefix the next prompt
shares with them; its log says, per request, how many tokens it reused and how many it had
to evaluate. A history that only grows is served almost wholly from that cache; a window
that slides by one message every turn changes the prompt right after the system prompt, so
every turn is evaluated again; aniki's default window keeps its start between cuts.
"""

from __future__ import annotations

import inspect
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from aniki import SQLiteSession
from aniki.sessions import WindowedSession

from .helpers import Recorder, Turn, converse, describe, kept_prefix, make_agent, reuse_share

pytestmark = pytest.mark.live

TURNS = range(1, 9)


async def _conversation(llama: Any, provider: Any, session: Any) -> list[Turn]:
    recorder = Recorder()
    return await converse(llama, make_agent(provider, session, recorder), TURNS, recorder)


def _store(tmp_path: Path, name: str) -> SQLiteSession:
    return SQLiteSession(name, tmp_path / "chat.db")


def _needs_trim_to() -> None:
    if "trim_to" not in inspect.signature(WindowedSession).parameters:
        pytest.skip("WindowedSession has no trim_to= yet")


def _reports_agree(turns: list[Turn]) -> None:
    """aniki's own context report says, per call, whether the prefix was kept: so did the
    requests it sent."""
    for previous, turn in pairwise(turns):
        [report] = turn.result.context_reports
        assert report.prefix_kept == kept_prefix(previous, turn), f"turn {turn.number}"


@pytest.fixture(scope="module")
def ran() -> dict[str, list[Turn]]:
    """Conversations already run in this module, by name: two tests read the sliding one."""
    return {}


async def _sliding(
    llama: Any, provider: Any, tmp_path: Path, ran: dict[str, list[Turn]]
) -> list[Turn]:
    _needs_trim_to()
    if "slide" not in ran:
        store = _store(tmp_path, "slide")
        ran["slide"] = await _conversation(llama, provider, WindowedSession(store, 6, trim_to=6))
    return ran["slide"]


async def test_growing_history_is_served_from_the_cache(
    llama: Any, provider: Any, tmp_path: Path
) -> None:
    turns = await _conversation(llama, provider, _store(tmp_path, "plain"))

    later = turns[1:]
    _reports_agree(turns)
    assert reuse_share(later) >= 0.8, describe(turns)
    for previous, turn in pairwise(turns):
        assert kept_prefix(previous, turn)
        assert turn.reused_tokens >= previous.prompt_tokens, describe(turns)


async def test_a_window_sliding_every_turn_is_evaluated_every_turn(
    llama: Any, provider: Any, tmp_path: Path, ran: dict[str, list[Turn]]
) -> None:
    turns = await _sliding(llama, provider, tmp_path, ran)

    _reports_agree(turns)
    sliding = [t for p, t in pairwise(turns) if not kept_prefix(p, t)]
    assert len(sliding) >= 4, describe(turns)  # from turn 4 on, once 6 messages are full
    previous = {t.number: p for p, t in pairwise(turns)}
    for turn in sliding:
        # Only the system prompt (and the start of the first message) survives.
        assert turn.reused_tokens < previous[turn.number].prompt_tokens / 2, describe(turns)
    assert reuse_share(sliding) <= 0.5, describe(turns)


async def test_the_default_window_keeps_its_start_between_cuts(
    llama: Any, provider: Any, tmp_path: Path, ran: dict[str, list[Turn]]
) -> None:
    sliding = await _sliding(llama, provider, tmp_path, ran)
    stepped = await _conversation(llama, provider, WindowedSession(_store(tmp_path, "step"), 6))

    _reports_agree(stepped)
    pairs = list(pairwise(stepped))
    kept = [(p, t) for p, t in pairs if kept_prefix(p, t)]
    assert len(kept) >= len(pairs) / 2, describe(stepped)  # cuts come every other turn at most
    for previous, turn in kept:
        assert turn.reused_tokens >= previous.prompt_tokens, describe(stepped)
    # Over the whole conversation the server evaluates far fewer tokens than for the slide.
    evaluated = sum(t.served.evaluated_tokens for t in stepped[1:])
    evaluated_sliding = sum(t.served.evaluated_tokens for t in sliding[1:])
    assert evaluated <= 0.6 * evaluated_sliding, (
        f"stepped:\n{describe(stepped)}\nsliding:\n{describe(sliding)}"
    )
