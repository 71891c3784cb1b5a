"""What the live tests share: the server launcher and a driver that runs a conversation turn
by turn, pairing each turn with what aniki sent and what the server logged for it."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from aniki import Agent, Context, Message, ModelRequest, ModelResponse, Runner, RunResult

ON_CI = os.environ.get("CI") == "true"
LAUNCHER_PATH = Path(__file__).resolve().parents[2] / "scripts" / "live_server.py"


def _load_launcher() -> ModuleType:
    # scripts/ is not a package; bench/ loads the same file the same way.
    name = "aniki_live_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, LAUNCHER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


live_server = _load_launcher()
LlamaServer = live_server.LlamaServer
PromptEval = live_server.PromptEval

INSTRUCTIONS = "You are a terse assistant. Answer every question in one short sentence."
SETTINGS: dict[str, Any] = {"max_tokens": 16, "temperature": 0}
"""Short, repeatable replies: the tier is about mechanics, never about what the model says."""


def question(turn: int) -> str:
    return f"Turn {turn}: name one fact about the number {turn}."


class Recorder:
    """Middleware keeping every request aniki sends to the model."""

    def __init__(self) -> None:
        self.requests: list[ModelRequest] = []

    async def __call__(
        self,
        ctx: Context,
        request: ModelRequest,
        call_next: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        self.requests.append(request)
        return await call_next(request)


def make_agent(provider: Any, session: Any, recorder: Recorder | None = None) -> Agent:
    return Agent(
        "Live",
        INSTRUCTIONS,
        model=live_server.MODEL_NAME,
        provider=provider,
        session=session,
        settings=SETTINGS,  # type: ignore[arg-type]
        middleware=[recorder] if recorder else (),
    )


@dataclass
class Turn:
    """One turn of a conversation: one model call here (no tools)."""

    number: int
    result: RunResult
    served: PromptEval
    """What the server logged for this turn's request."""
    history: Sequence[Message] = field(default_factory=tuple)
    """The history aniki sent (the request's messages after the system prompt)."""

    @property
    def prompt_tokens(self) -> int:
        tokens = self.served.prompt_tokens
        assert tokens is not None, f"turn {self.number}: the server did not log a prompt length"
        return int(tokens)

    @property
    def reused_tokens(self) -> int:
        reused = self.served.reused_tokens
        return self.prompt_tokens if reused is None else int(reused)


async def converse(server: Any, agent: Agent, turns: range, recorder: Recorder) -> list[Turn]:
    """Run one turn per number in ``turns``, each a single model call, and pair each with
    the server's log record of its request."""
    runner = Runner()
    made: list[Turn] = []
    for number in turns:
        logged = len(server.prompt_evals())
        sent = len(recorder.requests)
        result = await runner.run(agent, message=question(number))
        assert len(recorder.requests) == sent + 1, "a turn without tools is one model call"
        served = server.wait_prompt_evals(logged + 1)[logged]
        history = recorder.requests[-1].messages[1:]
        made.append(Turn(number, result, served, history))
    return made


def reuse_share(turns: Sequence[Turn]) -> float:
    """Of all prompt tokens in ``turns``, the share the server took from its KV cache."""
    prompt = sum(t.prompt_tokens for t in turns)
    return sum(t.reused_tokens for t in turns) / prompt


def kept_prefix(previous: Turn, turn: Turn) -> bool:
    """Whether ``turn`` sent ``previous``'s history unchanged, with only new messages after."""
    before = list(previous.history)
    return list(turn.history[: len(before)]) == before


def describe(turns: Sequence[Turn]) -> str:
    """A per-turn table for assertion messages."""
    return "\n".join(
        f"  turn {t.number}: {len(t.history)} messages sent, prompt {t.prompt_tokens} tokens, "
        f"reused {t.reused_tokens}, evaluated {t.served.evaluated_tokens}"
        for t in turns
    )
