"""Talking to a real model: OpenAI, Anthropic, or any OpenAI-compatible server
(docs/providers.md). Without a key it explains how to set one up, and exits.
"""

from __future__ import annotations

import asyncio
import os

from aniki import Agent, Runner, TextDelta
from aniki.providers import AnthropicProvider, OpenAIProvider, Provider


def configured() -> tuple[str, Provider] | None:
    if os.environ.get("OPENAI_BASE_URL"):  # a local server: Ollama, vLLM, llama.cpp, LM Studio
        key = os.environ.get("OPENAI_API_KEY", "none")
        return os.environ.get("ANIKI_MODEL", "llama3.2"), OpenAIProvider(api_key=key)
    if os.environ.get("OPENAI_API_KEY"):
        return os.environ.get("ANIKI_MODEL", "gpt-4o-mini"), OpenAIProvider()
    if os.environ.get("ANTHROPIC_API_KEY"):
        return os.environ.get("ANIKI_MODEL", "claude-sonnet-4-5"), AnthropicProvider()
    return None


async def main() -> None:
    found = configured()
    if found is None:
        print(
            "No provider is configured. Set one of:\n"
            "  OPENAI_API_KEY                 OpenAI\n"
            "  ANTHROPIC_API_KEY              Anthropic\n"
            "  OPENAI_BASE_URL (+ ANIKI_MODEL) a local OpenAI-compatible server,\n"
            "                                 e.g. http://127.0.0.1:11434/v1 for Ollama"
        )
        return
    model, provider = found
    agent = Agent(
        "Assistant",
        "Answer in one sentence.",
        model=model,
        provider=provider,
        settings={"temperature": 0.2, "max_tokens": 100},
    )
    async for event in Runner().stream(agent, message="What is conversation memory?"):
        if isinstance(event, TextDelta):
            print(event.text, end="", flush=True)
    print()


if __name__ == "__main__":
    asyncio.run(main())
