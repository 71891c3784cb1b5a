"""Which model the examples talk to: a real one when configured, else a scripted stand-in.

Set OPENAI_API_KEY (optionally OPENAI_BASE_URL and ANIKI_MODEL) or ANTHROPIC_API_KEY to run
the examples live; without them every example runs offline, and says so.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from aniki import ModelRequest, Provider
from aniki.testing import MockProvider, MockReply

Script = Callable[[ModelRequest], "MockReply | str"]


def model_and_provider(script: Script) -> tuple[str, Provider | str]:
    """``(model, provider)``: live when a key is set, else ``script`` answers every call."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        return os.environ.get("ANIKI_MODEL", "gpt-4o-mini"), "openai"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return os.environ.get("ANIKI_MODEL", "claude-sonnet-4-5"), "anthropic"
    print("(offline: a scripted model answers; set OPENAI_API_KEY to use a real one)\n")
    return "scripted", MockProvider(handler=script)
