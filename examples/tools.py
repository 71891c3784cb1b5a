"""Tools and structured output: typed functions, and a validated answer (docs/tools.md,
docs/structured-output.md)."""

from __future__ import annotations

import asyncio
import json

import pydantic
from _model import model_and_provider

from aniki import Agent, ModelRequest, Runner, ToolCall, tool
from aniki.testing import MockReply


@tool
def get_weather(city: str) -> dict[str, object]:
    """Look up the current weather.

    Args:
        city: The city to look up.
    """
    return {"city": city, "temperature_c": 4, "conditions": "light rain"}


class Forecast(pydantic.BaseModel):
    city: str
    summary: str
    temperature_c: float


def script(request: ModelRequest) -> MockReply:
    last = request.messages[-1]
    if last.role == "user":
        call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Oslo"}')
        return MockReply(tool_calls=(call,))
    weather = json.loads(last.content)
    answer = {
        "city": weather["city"],
        "summary": "Cold and wet",
        "temperature_c": weather["temperature_c"],
    }
    return MockReply(content=json.dumps(answer))


async def main() -> None:
    model, provider = model_and_provider(script)
    agent = Agent(
        "Forecaster",
        "Use the tool, then answer with the forecast.",
        model=model,
        provider=provider,
        tools=[get_weather],
        output_schema=Forecast,
    )
    result = await Runner().run(agent, message="What's the weather in Oslo?")
    for message in result.messages:
        calls = [f"{c.name}({c.arguments})" for c in message.tool_calls]
        print(f"{message.role:>9}: {message.content or ', '.join(calls)}")
    forecast: Forecast = result.output
    print(f"\nvalidated output: {forecast!r}")


if __name__ == "__main__":
    asyncio.run(main())
