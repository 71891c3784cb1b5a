"""The FastAPI example, served by uvicorn in its own process, holds 50 conversations at once.

Every conversation is driven over HTTP concurrently with the others, streamed and not, and
its stored history must be exactly its own turns, in order, each once: no reply lands in
another conversation, none is lost or stored twice. Over every store the example can open.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

import httpx2
import pytest

from tests.examples.test_examples import EXAMPLES, offline_env
from tests.servers import postgres_dsn, redis_url

CONVERSATIONS = 50
TURNS = 4
READY_WITHIN = 60.0
"""Seconds the server may take to start (imports included) before the test gives up."""


def reply_to(text: str, turn: int) -> str:
    """What the example's offline model answers to the ``turn``-th message (from 1)."""
    return f"Message {turn} was: {text}"


class Server:
    """``uvicorn fastapi_app:app`` on a free loopback port, its output in a file."""

    def __init__(self, store_url: str, workdir: Path) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}"
        self._log_path = workdir / "server.log"
        self._log: IO[str] = self._log_path.open("w", encoding="utf-8")
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "fastapi_app:app",
                "--app-dir",
                str(EXAMPLES),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--no-access-log",
            ],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**offline_env(), "ANIKI_STORE_URL": store_url},
        )

    def log(self) -> str:
        return self._log_path.read_text(encoding="utf-8")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + READY_WITHIN
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the server exited with {self.process.returncode}:\n{self.log()}")
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(f"{self.base_url}/chats", timeout=2).status_code == 200:
                    return
            time.sleep(0.1)
        pytest.fail(f"the server did not answer within {READY_WITHIN} s:\n{self.log()}")

    def stop(self) -> int:
        """Stop the server as a process manager does (SIGTERM); its exit code."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()
        return self.process.returncode


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[[str], Server]]:
    """Starts servers; whatever happens in the test, none outlives it."""
    started: list[Server] = []

    def start(store_url: str) -> Server:
        server = Server(store_url, tmp_path)
        started.append(server)
        server.wait_ready()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(
    params=[
        "sqlite",
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ]
)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'chat.db'}"
    return redis_url() if request.param == "redis" else postgres_dsn()


def forget(store_url: str, ids: list[str]) -> None:
    """Delete this test's conversations from a server store that other tests share."""
    from aniki.sessions import open_store

    with open_store(store_url) as store:
        for chat_id in ids:
            store.session(chat_id).clear()


async def converse(client: httpx2.AsyncClient, chat_id: str, streamed_first: bool) -> list[str]:
    """Run ``TURNS`` turns of one conversation, alternating the two endpoints; the replies."""
    replies = []
    for turn in range(TURNS):
        text = f"{chat_id} says {turn}"
        if (turn % 2 == 0) == streamed_first:
            async with client.stream(
                "POST", f"/chats/{chat_id}/stream", json={"message": text}
            ) as response:
                assert response.status_code == 200, await response.aread()
                replies.append("".join([piece async for piece in response.aiter_text()]))
        else:
            response = await client.post(f"/chats/{chat_id}", json={"message": text})
            assert response.status_code == 200, response.text
            replies.append(response.json()["reply"])
    return replies


async def test_fifty_concurrent_conversations_each_keep_their_own_history(
    serve: Callable[[str], Server], store_url: str
) -> None:
    run = uuid.uuid4().hex[:8]
    ids = [f"{run}-{n}" for n in range(CONVERSATIONS)]
    server = serve(store_url)
    try:
        async with httpx2.AsyncClient(
            base_url=server.base_url,
            timeout=60,
            limits=httpx2.Limits(max_connections=CONVERSATIONS),
        ) as client:
            replies = await asyncio.gather(
                *(converse(client, chat_id, n % 2 == 0) for n, chat_id in enumerate(ids))
            )
            histories = await asyncio.gather(*(client.get(f"/chats/{i}") for i in ids))
            listed = (await client.get("/chats")).json()
            refused = await client.get("/chats/not%20an%20id")

        for chat_id, got, stored in zip(ids, replies, histories, strict=True):
            texts = [f"{chat_id} says {turn}" for turn in range(TURNS)]
            # Each reply counts the user messages the model was sent: its own, all of them.
            assert got == [reply_to(text, turn + 1) for turn, text in enumerate(texts)]
            expected = []
            for turn, text in enumerate(texts):
                expected += [
                    {"role": "user", "content": text},
                    {"role": "assistant", "content": reply_to(text, turn + 1)},
                ]
            assert stored.status_code == 200
            records = stored.json()
            ids_seen = {record.pop("id") for record in records}
            assert len(ids_seen) == len(records)  # every message has its own id
            for index, record in enumerate(records):
                assert record.pop("created_at")
                if record["role"] == "assistant":  # the model that wrote it is kept
                    assert record.pop("model") == "scripted"
                    record.pop("usage", None)
                    # and what its call was sent: every message before it
                    assert record.pop("context")["sent_messages"] == index
            assert records == expected
        counts = {info["id"]: info["message_count"] for info in listed}
        assert {chat_id: counts.get(chat_id) for chat_id in ids} == dict.fromkeys(ids, 2 * TURNS)
        assert refused.status_code == 422

        # uvicorn shuts down gracefully on SIGTERM, then exits by the signal it was sent.
        assert server.stop() in (0, -signal.SIGTERM)
        log = server.log()
        assert "Application shutdown complete" in log  # the lifespan closed the store
        assert "Traceback" not in log and "ERROR" not in log, log
    finally:
        if not store_url.startswith("sqlite"):
            forget(store_url, ids)
