"""Cutting the strings of a JSON message while it is read (pure): the result is valid JSON
with the same shape, whatever the chunks, escapes and characters."""

from __future__ import annotations

import json
import random

import pytest

from aniki.mcp._clip import SLACK, SMALL, Clip, Overflow, cut_note


def clipped(text: bytes, limit: int, chunk: int, *, events: bool = False) -> tuple[bytes, bool]:
    clip = Clip(limit, events=events)
    out = b"".join(clip.feed(text[i : i + chunk]) for i in range(0, len(text), chunk))
    return out, clip.cut


def test_a_message_within_the_limit_passes_unchanged() -> None:
    raw = json.dumps({"id": 1, "result": {"text": 'a "quoted" \\ é \u2028 😀'}}).encode()
    assert clipped(raw, 1000, 3) == (raw, False)


def test_a_long_string_is_cut_with_a_note_and_short_ones_are_kept() -> None:
    raw = json.dumps({"content": [{"type": "text", "text": "x" * 5000}], "isError": False})
    out, cut = clipped(raw.encode(), 1000, 64)
    message = json.loads(out)
    assert cut and message["isError"] is False and message["content"][0]["type"] == "text"
    # The keys and short values count against the limit too.
    assert message["content"][0]["text"] == "x" * (1000 - len("contenttypetexttext")) + cut_note(
        1000
    )


def test_a_string_keeps_a_few_hundred_bytes_whatever_the_limit() -> None:
    out, cut = clipped(json.dumps({"text": "x" * 5000}).encode(), 10, 7)
    assert cut and json.loads(out)["text"] == "x" * SMALL + cut_note(10)


@pytest.mark.parametrize("seed", range(5))
def test_any_cut_is_valid_json_of_the_same_shape(seed: int) -> None:
    pick = random.Random(seed)
    for _ in range(200):
        text = "".join(pick.choice('aé\\"\n\u1234😀') for _ in range(pick.randint(0, 900)))
        message = {"k": text, "l": [text, {"x": text}], "n": 5}
        out, _ = clipped(
            json.dumps(message).encode(), pick.randint(0, 900), pick.choice([1, 3, 64])
        )
        kept = json.loads(out)
        assert set(kept) == {"k", "l", "n"} and kept["n"] == 5
        assert all(len(s) <= max(900, SMALL) + 200 for s in (kept["k"], kept["l"][0]))


def test_each_event_of_a_stream_has_its_own_budget() -> None:
    event = b"event: message\ndata: " + json.dumps({"text": "y" * 300}).encode() + b"\n\n"
    out, cut = clipped(event * 3, 1000, 50, events=True)
    assert out == event * 3 and not cut


def test_a_message_too_large_outside_long_strings_overflows() -> None:
    raw = b"[" + b"1," * (SLACK // 2 + 10) + b"1]"
    with pytest.raises(Overflow):
        clipped(raw, 10, 65536)
