"""What openai-agents sends when its session history is cut through a tool exchange.

An agent with one tool talks over several turns, each turn one to three tool calls and an
answer, kept in the SDK's ``SQLiteSession``; each run reads the last ``limit`` stored items
(``SessionSettings(limit=...)``), so the window often begins part-way through a turn's tool
calls and outputs. The model is the SDK's own OpenAI model class (Chat Completions and
Responses) pointed at a loopback HTTP server that scripts the replies and keeps every request
body. The script counts, in what was sent: tool outputs whose call is not in the request
(orphaned outputs) and tool calls with no output after them.

Offline: only 127.0.0.1 is contacted. Run it with
``.venv/bin/python bench/peers/orphans.py`` (the bench requirements installed).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import sys
from typing import Any

LIMITS = range(18, 23)
CALLS = (2, 1, 3, 3, 1, 2, 2, 3, 1, 1, 2, 3)
"""The tool calls the model asks for in each turn of a conversation: a turn stores 4, 6 or 8
items, so the windows of the limits above begin at many different places."""


class ScriptedServer:
    """Answers Chat Completions and Responses requests on 127.0.0.1: tool calls after a user
    message, a text answer after tool output. Keeps every request's JSON body."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.turn = 0
        self._server: asyncio.Server | None = None
        self._handlers: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._server is not None
        self._server.close()
        for handler in self._handlers:  # connections the client kept open
            handler.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}/v1"

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            while True:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
                lines = head.decode().split("\r\n")
                sizes = [
                    int(h.split(":")[1]) for h in lines if h.lower().startswith("content-length")
                ]
                body = json.loads(await reader.readexactly(sizes[0]))
                self.bodies.append(body)
                reply = json.dumps(self._reply(lines[0].split()[1], body)).encode()
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                    + b"content-length: %d\r\n\r\n" % len(reply)
                    + reply
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client closed the connection, or the server is closing
        finally:
            writer.close()
            self._handlers.discard(task)

    def _reply(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path.endswith("/chat/completions"):
            asked = body["messages"][-1].get("role") == "user"
            return _completion(self._calls() if asked else [])
        last = body["input"][-1]
        asked = last.get("type", "message") == "message" and last.get("role") == "user"
        return _response(self._calls() if asked else [])

    def _calls(self) -> list[str]:
        self.turn += 1
        return [f"call_{self.turn}_{i}" for i in range(CALLS[(self.turn - 1) % len(CALLS)])]


def _completion(calls: list[str]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None if calls else "4 degrees."}
    if calls:
        message["tool_calls"] = [
            {"id": c, "type": "function", "function": {"name": "weather", "arguments": "{}"}}
            for c in calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def _response(calls: list[str]) -> dict[str, Any]:
    text = {"type": "output_text", "text": "4 degrees.", "annotations": []}
    output: list[dict[str, Any]] = [
        {"type": "function_call", "id": f"fc_{c}", "call_id": c, "name": "weather"}
        | {"arguments": "{}", "status": "completed"}
        for c in calls
    ] or [
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed"}
        | {"content": [text]}
    ]
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    usage |= {"input_tokens_details": {"cached_tokens": 0}}
    usage |= {"output_tokens_details": {"reasoning_tokens": 0}}
    return {"id": "resp_1", "object": "response", "created_at": 0, "status": "completed"} | {
        "model": "m",
        "output": output,
        "usage": usage,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    }


def exchanges(body: dict[str, Any]) -> tuple[set[str], list[str]]:
    """The call ids of a request's tool calls, and those its tool outputs answer, in order."""
    calls: set[str] = set()
    outputs: list[str] = []
    for item in body.get("messages") or []:
        calls |= {call["id"] for call in item.get("tool_calls") or []}
        if item.get("role") == "tool":
            outputs.append(item["tool_call_id"])
    for item in body.get("input") or []:
        if item.get("type") == "function_call":
            calls.add(item["call_id"])
        elif item.get("type") == "function_call_output":
            outputs.append(item["call_id"])
    return calls, outputs


def cut_through(items: list[Any], limit: int) -> bool:
    """Whether the last ``limit`` stored items hold a tool output whose call is left out."""
    window = [i if isinstance(i, dict) else i.model_dump() for i in items[-limit:]]
    calls = {i["call_id"] for i in window if i.get("type") == "function_call"}
    return any(
        i.get("type") == "function_call_output" and i["call_id"] not in calls for i in window
    )


async def measure(api: str, limit: int) -> dict[str, int]:
    """One conversation, a turn per :data:`CALLS` item, read with ``limit``: its counts."""
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        OpenAIResponsesModel,
        RunConfig,
        Runner,
        SessionSettings,
        SQLiteSession,
        function_tool,
    )
    from openai import AsyncOpenAI

    @function_tool
    def weather() -> str:
        """The weather."""
        return "4 degrees"

    counts = {"requests": 0, "cut windows": 0, "orphaned outputs": 0, "calls without output": 0}
    async with ScriptedServer() as server:
        client = AsyncOpenAI(base_url=server.url, api_key="not-a-key", max_retries=0)
        kind = OpenAIChatCompletionsModel if api == "chat" else OpenAIResponsesModel
        agent = Agent(name="a", instructions="Answer.", model=kind("m", client), tools=[weather])
        session = SQLiteSession(f"{api}-{limit}")
        config = RunConfig(session_settings=SessionSettings(limit=limit))
        for turn in range(len(CALLS)):
            counts["cut windows"] += cut_through(await session.get_items(), limit)
            await Runner.run(agent, f"Weather, take {turn}?", session=session, run_config=config)
        for body in server.bodies:
            calls, outputs = exchanges(body)
            counts["requests"] += 1
            counts["orphaned outputs"] += sum(1 for c in outputs if c not in calls)
            counts["calls without output"] += len(calls - set(outputs))
        session.close()
        await client.close()  # before the server closes: its connections end at EOF
    return counts


async def main() -> None:
    from agents import set_tracing_disabled

    set_tracing_disabled(True)
    versions = {name: importlib.metadata.version(name) for name in ("openai-agents", "openai")}
    print("python", sys.version.split()[0], *(f"{k} {v}" for k, v in versions.items()))
    print(
        "| API | limit | requests | windows cut through a tool exchange "
        "| orphaned outputs sent | calls sent without output |"
    )
    print("|---|---|---|---|---|---|")
    for api in ("chat", "responses"):
        for limit in LIMITS:
            c = await measure(api, limit)
            print(
                f"| {api} | {limit} | {c['requests']} | {c['cut windows']} "
                f"| {c['orphaned outputs']} | {c['calls without output']} |"
            )


if __name__ == "__main__":
    asyncio.run(main())
