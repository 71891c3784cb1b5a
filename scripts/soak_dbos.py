"""Soak test of aniki.durable: worker processes sharing one DBOS system database run queued
runs while they are killed with SIGKILL at random and restarted.

Each run asks the model once for the tool ``note``, which appends one line to a side-effect
log, then answers in text. At the end every run must have completed, each tool call must
appear in the log exactly once, and each run's stored history must equal a plain run's.

    python scripts/soak_dbos.py --db sqlite --runs 200 --workers 3
    python scripts/soak_dbos.py --db postgres --runs 200 --workers 3

Prints the figures (runs, kills, time, duplicates); exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from dbos import DBOS

from aniki import Agent, Message, Runner
from aniki.durable import DurableAgent
from aniki.messages import ToolCall
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import open_session
from aniki.testing import MockProvider

QUEUE = "aniki-soak"
POSTGRES = os.environ.get("ANIKI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
LOG_ENV = "ANIKI_SOAK_LOG"


def _reply(request: ModelRequest) -> ModelResponse:
    """Ask for ``note`` with the user's text, then answer ``done``."""
    if any(m.role == "tool" for m in request.messages):
        return ModelResponse(content="done")
    text = request.messages[-1].content
    return ModelResponse(tool_calls=(ToolCall(f"call_{text}", "note", json.dumps({"text": text})),))


def note(text: str) -> str:
    """Append ``text`` to the side-effect log unless it is there already (``text`` is the
    idempotency key); log every execution to the attempts log."""
    time.sleep(random.uniform(0.0, 0.05))  # widen the window a kill can land in
    path = Path(os.environ[LOG_ENV])
    _append(path.with_suffix(".attempts"), text)
    if text not in _lines(path):
        _append(path, text)
    return f"noted {text}"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _append(path: Path, line: str) -> None:
    with open(path, "a", encoding="utf-8") as log:
        log.write(line + "\n")
        log.flush()
        os.fsync(log.fileno())


def _agent() -> Agent[Any]:
    return Agent("Soak", model="m", provider=MockProvider(handler=_reply), tools=[note])


def _launch(system_db: str, executor: str, *, listen: bool) -> None:
    DBOS(
        config={
            "name": "aniki-soak",
            "system_database_url": system_db,
            "executor_id": executor,
            "application_version": "aniki-soak",
            "log_level": "ERROR",
        }
    )
    if not listen:
        DBOS.listen_queues([])
    DBOS.launch()


def worker(system_db: str, store: str, executor: str) -> None:
    """One worker process: run queued runs (and recover this executor's) until killed."""
    DurableAgent(_agent(), store)
    _launch(system_db, executor, listen=True)
    DBOS.register_queue(QUEUE, worker_concurrency=8, polling_interval_sec=0.2)
    while True:
        time.sleep(3600)


def _spawn(
    args: argparse.Namespace, system_db: str, store: str, slot: int
) -> subprocess.Popen[bytes]:
    command = [sys.executable, __file__, "--worker", f"soak-worker-{slot}"]
    command += ["--system-db", system_db, "--store", store]
    return subprocess.Popen(command, env=os.environ.copy(), stderr=subprocess.DEVNULL)


async def _wait_all(run_ids: list[str], deadline: float) -> list[str]:
    """The runs not yet SUCCESS (empty when all are) once done or past ``deadline``."""
    left = list(run_ids)
    while left and time.monotonic() < deadline:
        statuses = await DBOS.list_workflows_async(workflow_ids=left)
        done = {s.workflow_id for s in statuses if s.status == "SUCCESS"}
        left = [r for r in left if r not in done]
        await asyncio.sleep(0.5)
    return left


def _killer(
    args: argparse.Namespace,
    workers: list[Any],
    system_db: str,
    store: str,
    stop: Any,
    kills: list[int],
) -> None:
    """Kill a random worker every so often and restart it under the same executor id."""
    rng = random.Random(args.seed)
    while not stop.wait(rng.uniform(args.kill_min, args.kill_max)):
        slot = rng.randrange(len(workers))
        workers[slot].send_signal(signal.SIGKILL)
        workers[slot].wait()
        kills[0] += 1
        workers[slot] = _spawn(args, system_db, store, slot)


async def _plain(text: str) -> tuple[Message, ...]:
    session = open_session("memory:", "plain")
    await Runner().run(_agent(), message=text, session=session)
    return tuple(session.get_messages())


async def soak(args: argparse.Namespace, system_db: str, store: str, log: Path) -> int:
    """Enqueue the runs, kill workers while they run, check the outcome; the exit code."""
    import threading

    durable = DurableAgent(_agent(), store)
    _launch(system_db, "soak-parent", listen=False)
    queue = await DBOS.register_queue_async(QUEUE, worker_concurrency=8, polling_interval_sec=0.2)
    workers = [_spawn(args, system_db, store, slot) for slot in range(args.workers)]
    started = time.monotonic()
    tag = uuid.uuid4().hex[:6]
    texts = [f"{tag}-{i}" for i in range(args.runs)]
    run_ids = [
        await durable.enqueue(queue, text, session_id=f"s-{text}", run_id=f"run-{text}")
        for text in texts
    ]
    stop, kills = threading.Event(), [0]
    killer = threading.Thread(target=_killer, args=(args, workers, system_db, store, stop, kills))
    killer.start()
    left = await _wait_all(run_ids, started + args.timeout)
    stop.set()
    killer.join()
    elapsed = time.monotonic() - started
    for process in workers:
        process.send_signal(signal.SIGKILL)
        process.wait()
    return await _check(store, texts, left, log, kills[0], elapsed)


async def _check(
    store: str, texts: list[str], left: list[str], log: Path, kills: int, elapsed: float
) -> int:
    """Print the figures; 0 when every check holds."""
    effects = Counter(_lines(log))
    attempts = len(_lines(log.with_suffix(".attempts")))
    duplicates = sum(n - 1 for n in effects.values() if n > 1)
    missing = [t for t in texts if effects[t] == 0]
    differing = 0
    for text in texts:
        if f"run-{text}" in left:
            continue
        stored = tuple(open_session(store, f"s-{text}").get_messages())
        if stored != await _plain(text):
            differing += 1
            if os.environ.get("ANIKI_SOAK_DEBUG"):
                print(text, [(m.role, m.content[:20]) for m in stored], effects[text])
    print(
        f"runs={len(texts)} completed={len(texts) - len(left)} kills={kills} "
        f"time={elapsed:.1f}s side_effects={sum(effects.values())} duplicates={duplicates} "
        f"tool_executions={attempts} repeated_tool_executions={attempts - len(texts)} "
        f"missing={len(missing)} histories_differing={differing}"
    )
    return 0 if not left and not duplicates and not missing and not differing else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--kill-min", type=float, default=0.5)
    parser.add_argument("--kill-max", type=float, default=2.0)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--system-db", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.system_db, args.store, args.worker)
        return 0
    with tempfile.TemporaryDirectory(prefix="aniki-soak-") as tmp:
        log = Path(tmp) / "effects.log"
        os.environ[LOG_ENV] = str(log)
        if args.db == "sqlite":
            system_db, store = f"sqlite:///{tmp}/dbos.sqlite", f"sqlite:///{tmp}/store.db"
            return _run(args, system_db, store, log)
        return _on_postgres(args, log)


def _run(args: argparse.Namespace, system_db: str, store: str, log: Path) -> int:
    try:
        return asyncio.run(soak(args, system_db, store, log))
    finally:
        DBOS.destroy()


def _on_postgres(args: argparse.Namespace, log: Path) -> int:
    """The soak on a fresh database (system database and store), dropped afterwards."""
    import psycopg

    name = f"aniki_soak_{uuid.uuid4().hex[:10]}"
    admin = POSTGRES.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = POSTGRES.rsplit("/", 1)[0] + "/" + name
    try:
        return _run(args, url, url, log)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
