"""Benchmark ``Runner.run_sync`` against ``await Runner.run``: what a synchronous view pays.

A synchronous web view (Flask, Django) calls ``run_sync`` once per request. This measures
the median time of one call, one user message and one reply on a fresh in-memory session,
three ways:

- ``await runner.run(...)`` on one long-lived event loop (the cost to match);
- ``runner.run_sync(...)`` from a plain thread, as a view calls it;
- ``asyncio.run(runner.run(...))`` per call, what code without ``run_sync`` would do;

for two providers: the OpenAI provider over real HTTP to a Chat Completions server on
127.0.0.1 (a separate process answering at once, so the figures are the SDK's and the
HTTP client's), and ``MockProvider`` (no I/O at all: what is left is the hop between threads
itself). Target: ``run_sync`` within 2x of ``await run``.

Run: ``python bench/bench_run_sync.py`` (``--quick``, ``--smoke``: fewer calls).
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from aniki import Agent, InMemorySession, Runner
from aniki.providers import OpenAIProvider
from aniki.testing import MockProvider

_SERVER = r"""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BODY = json.dumps({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "bench",
    "choices": [{"index": 0, "finish_reason": "stop",
                 "message": {"role": "assistant", "content": "Noted."}}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 14},
}).encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once, not 40 ms apart

    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
print("ready", flush=True)
server.serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def _completions_server() -> Iterator[str]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(port)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait(10)


def _http_agent(url: str) -> Agent:
    provider = OpenAIProvider(api_key="sk-bench", base_url=url, max_retries=0)
    return Agent("Bench", "Answer briefly.", model="bench", provider=provider)


def _mock_agent() -> Agent:
    return Agent(
        "Bench", "Answer briefly.", model="bench", provider=MockProvider(handler=lambda _: "Noted.")
    )


def _median_ms(times: list[float]) -> float:
    return statistics.median(times[len(times) // 5 :]) * 1000  # the first fifth warms up


def _measure(agent: Agent, calls: int) -> dict[str, float]:
    runner = Runner()

    async def awaited() -> list[float]:
        times = []
        for number in range(calls):
            start = time.perf_counter()
            await runner.run(agent, message=f"call {number}", session=InMemorySession())
            times.append(time.perf_counter() - start)
        return times

    def synchronous() -> list[float]:
        times = []
        for number in range(calls):
            start = time.perf_counter()
            runner.run_sync(agent, message=f"call {number}", session=InMemorySession())
            times.append(time.perf_counter() - start)
        return times

    def fresh_loops() -> list[float]:
        times = []
        for number in range(calls):
            start = time.perf_counter()
            asyncio.run(runner.run(agent, message=f"call {number}", session=InMemorySession()))
            times.append(time.perf_counter() - start)
        return times

    ways: dict[str, Callable[[], list[float]]] = {
        "await run": lambda: asyncio.run(awaited()),
        "run_sync": synchronous,
        "asyncio.run per call": fresh_loops,
    }
    figures: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(3):  # interleaved, so that a busy spell of the machine hits every way
        for name, way in ways.items():
            figures[name].append(_median_ms(way()))
    return {name: statistics.median(values) for name, values in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 calls per way")
    parser.add_argument("--smoke", action="store_true", help="10 calls per way")
    args = parser.parse_args()
    calls = 10 if args.smoke else 100 if args.quick else 500
    rows: list[tuple[str, str, float, float]] = []
    with _completions_server() as url:
        http = _measure(_http_agent(url), calls)
    mock = _measure(_mock_agent(), calls)
    for provider, figures in (("OpenAI over HTTP", http), ("MockProvider", mock)):
        base = figures["await run"]
        rows += [(provider, way, ms, ms / base) for way, ms in figures.items()]
    print(f"One call (a user message and a reply), median ms of {calls} calls, 3 rounds")
    print("| provider | way | ms per call | / await run |\n|---|---|---|---|")
    for provider, way, ms, ratio in rows:
        print(f"| {provider} | {way} | {ms:.3f} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
