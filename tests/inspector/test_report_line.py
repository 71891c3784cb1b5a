"""The inspector's one-line context report names what the policy did to the view."""

from __future__ import annotations

import pytest

from aniki import ContextReport, ContextTokens
from aniki.inspector._views import report_line


def _report(**fields: int) -> ContextReport:
    tokens = ContextTokens(instructions=10, tools=0, summary=0, history=90)
    return ContextReport(
        stored_messages=40, sent_messages=12, tokens=tokens, prefix_kept=True, **fields
    )


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"summarized_messages": 0}, "12 of 40 messages sent, ~100 tokens, prefix kept"),
        ({"summarized_messages": 20}, "12 of 40 messages sent, 20 summarized, ~100 tokens"),
        (
            {"summarized_messages": 0, "shortened_messages": 1},
            "12 of 40 messages sent, 1 shortened to fit, ~100 tokens",
        ),
    ],
)
def test_the_line_says_what_was_summarized_and_shortened(fields: dict[str, int], said: str) -> None:
    assert report_line(_report(**fields)).startswith(said)
