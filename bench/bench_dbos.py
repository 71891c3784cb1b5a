"""Benchmark aniki.durable (docs/durable.md): what a run costs as a DBOS workflow, and how
queued runs scale across worker processes.

1. Per run: ``DurableAgent.run`` vs a plain ``Runner.run`` of the same agent (the model
   asks for one tool, then answers), each opening the run's session from the same store URL
   and closing it afterwards. SQLite system database and SQLite store in a temporary folder,
   then a fresh PostgreSQL system database (created and dropped) with the store on the test
   database. Target: DBOS/plain <= 2. For scale, DBOS's own floor: a workflow of as many
   empty steps as the durable run takes (two model calls, one tool call, three session
   writes each after a length step: 9), on the same system database.
2. Throughput: N runs put on one DBOS queue, run by 1 worker process, then by 3 worker
   processes sharing the system database (each worker runs up to 8 at a time; the tool
   sleeps 5 ms to stand for I/O). Runs per second from the first enqueue to the last run
   done, and the ratio 3 workers / 1 worker.

Each measurement runs in a child process, since DBOS holds one configuration per process.

Run: ``python bench/bench_dbos.py`` (``--quick``, ``--smoke``: fewer runs). Prints a Markdown
table; figures are medians of interleaved rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aniki import Agent, Runner
from aniki.messages import ToolCall
from aniki.providers.base import ModelRequest, ModelResponse
from aniki.sessions import open_session
from aniki.testing import MockProvider

POSTGRES = os.environ.get("ANIKI_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
QUEUE = "aniki-bench"
SLEEP_ENV = "ANIKI_BENCH_TOOL_SLEEP"
FLOOR_STEPS = 9
"""The DBOS steps of one durable run of the bench's agent."""


def _reply(request: ModelRequest) -> ModelResponse:
    """Ask for ``fetch`` after the user's message, then answer ``Done.``."""
    if request.messages[-1].role == "tool":
        return ModelResponse(content="Done.")
    return ModelResponse(tool_calls=(ToolCall("call_1", "fetch", json.dumps({"order": "42"})),))


async def fetch(order: str) -> str:
    """Fetch an order (sleeps ``ANIKI_BENCH_TOOL_SLEEP`` seconds, standing for I/O)."""
    await asyncio.sleep(float(os.environ.get(SLEEP_ENV, "0")))
    return f"order {order}: shipped"


def _agent() -> Agent[Any]:
    return Agent("Bench", model="bench", provider=MockProvider(handler=_reply), tools=[fetch])


def _launch(system_db: str, executor: str, *, listen: bool) -> None:
    from dbos import DBOS

    config: Any = {
        "name": "aniki-bench",
        "system_database_url": system_db,
        "executor_id": executor,
        "application_version": "aniki-bench",
        "log_level": "ERROR",
    }
    DBOS(config=config)
    if not listen:
        DBOS.listen_queues([])
    DBOS.launch()


# -- children -------------------------------------------------------------------------------


async def _latency(system_db: str, store: str, runs: int, rounds: int) -> dict[str, float]:
    """Median ms of a plain run, of ``DurableAgent.run`` and of the same workflow awaited on
    the handle that started it; batches interleaved round by round."""
    from dbos import DBOS

    from aniki.durable import DurableAgent

    agent = _agent()
    durable = DurableAgent(agent, store)
    runner = Runner()

    async def plain(session_id: str) -> None:
        session: Any = open_session(store, session_id, asynchronous=True)
        try:
            await runner.run(agent, message="ship", session=session)
        finally:
            await session.aclose()

    async def dbos(session_id: str) -> None:
        await durable.run("ship", session_id=session_id)

    async def handle(session_id: str) -> None:
        started = await DBOS.start_workflow_async(durable._workflow, "ship", session_id)
        await started.get_result()

    async def empty() -> None:
        return None

    @DBOS.workflow(name="aniki-bench-floor")
    async def floor_workflow() -> None:
        for _ in range(FLOOR_STEPS):
            await DBOS.run_step_async({"name": "empty"}, empty)

    async def floor(session_id: str) -> None:
        await (await DBOS.start_workflow_async(floor_workflow)).get_result()

    calls = {"plain": plain, "dbos": dbos, "handle": handle, "floor": floor}
    _launch(system_db, "bench-latency", listen=False)
    times: dict[str, list[float]] = {name: [] for name in calls}
    for round_number in range(rounds + 1):  # round 0 (one run each) is a warm-up
        for name, call in calls.items():
            batch = []
            for _ in range(runs if round_number else 1):
                session_id = f"{name}-{uuid.uuid4().hex}"
                start = time.perf_counter()
                await call(session_id)
                batch.append(time.perf_counter() - start)
            if round_number:
                times[name].append(statistics.median(batch) * 1000)
    return {name: statistics.median(values) for name, values in times.items()}


def _worker(system_db: str, store: str, executor: str, ready: str) -> None:
    """One worker process: run queued runs until killed."""
    from dbos import DBOS

    from aniki.durable import DurableAgent

    DurableAgent(_agent(), store)
    _launch(system_db, executor, listen=True)
    DBOS.register_queue(QUEUE, worker_concurrency=8, polling_interval_sec=0.05)
    Path(ready).touch()
    while True:
        time.sleep(3600)


def _start_workers(system_db: str, store: str, count: int, folder: Path) -> list[Any]:
    """``count`` worker processes, returned once each has launched DBOS."""
    workers, flags = [], []
    for slot in range(count):
        flag = folder / f"ready-{uuid.uuid4().hex}"
        command = [sys.executable, __file__, "--worker", f"bench-worker-{slot}"]
        command += ["--system-db", system_db, "--store", store, "--ready", str(flag)]
        workers.append(subprocess.Popen(command, env=os.environ.copy()))
        flags.append(flag)
    deadline = time.monotonic() + 60
    while not all(flag.exists() for flag in flags):
        if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
            _stop(workers)
            raise RuntimeError("a worker process did not start")
        time.sleep(0.02)
    return workers


def _stop(workers: list[Any]) -> None:
    for process in workers:
        process.kill()
        process.wait()


async def _throughput(system_db: str, store: str, runs: int, count: int) -> dict[str, float]:
    """Runs per second of ``runs`` queued runs done by ``count`` worker processes."""
    from dbos import DBOS

    from aniki.durable import DurableAgent

    durable = DurableAgent(_agent(), store)
    _launch(system_db, "bench-parent", listen=False)
    queue = await DBOS.register_queue_async(QUEUE, worker_concurrency=8)
    with tempfile.TemporaryDirectory(prefix="aniki-bench-") as tmp:
        workers = _start_workers(system_db, store, count, Path(tmp))
        try:
            start = time.perf_counter()
            left = [
                await durable.enqueue(queue, "ship", session_id=f"s-{uuid.uuid4().hex}")
                for _ in range(runs)
            ]
            deadline = time.monotonic() + 300
            while left and time.monotonic() < deadline:
                statuses = await DBOS.list_workflows_async(workflow_ids=left)
                done = {s.workflow_id for s in statuses if s.status == "SUCCESS"}
                left = [r for r in left if r not in done]
                if left:
                    await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - start
        finally:
            _stop(workers)
    if left:
        raise RuntimeError(f"{len(left)} of {runs} runs did not finish")
    return {"per_second": runs / elapsed}


def _child(args: argparse.Namespace) -> int:
    """Run one measurement in this process and print it as JSON."""
    from dbos import DBOS

    try:
        if args.child == "latency":
            figures = asyncio.run(_latency(args.system_db, args.store, args.runs, args.rounds))
        else:
            figures = asyncio.run(_throughput(args.system_db, args.store, args.runs, args.workers))
    finally:
        DBOS.destroy()
    print(json.dumps(figures))
    return 0


# -- parent ---------------------------------------------------------------------------------


def _measure(kind: str, system_db: str, store: str, **options: int) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", kind, "--system-db", system_db]
    command += ["--store", store]
    for key, value in options.items():
        command += [f"--{key}", str(value)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} on {system_db} failed:\n{done.stderr[-3000:]}")
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _postgres_database() -> tuple[str, Any]:
    """A fresh database on the PostgreSQL server, and a callable that drops it."""
    import psycopg

    name = f"aniki_bench_{uuid.uuid4().hex[:10]}"
    admin = POSTGRES.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return POSTGRES.rsplit("/", 1)[0] + "/" + name, drop


def _row(figure: str, database: str, value: float, target: str = "") -> None:
    print(f"| {figure} | {database} | {value:.2f} | {target} |")


def _report(database: str, system_db: str, store: str, sizes: dict[str, int]) -> None:
    """Measure and print every figure for one kind of system database."""
    latency = _measure("latency", system_db, store, runs=sizes["runs"], rounds=sizes["rounds"])
    os.environ[SLEEP_ENV] = "0.005"
    try:
        one: list[float] = []
        three: list[float] = []
        for _ in range(sizes["throughput_rounds"]):  # interleaved, so a busy spell hits both
            for count, into in ((1, one), (3, three)):
                figures = _measure(
                    "throughput", system_db, store, runs=sizes["queued"], workers=count
                )
                into.append(figures["per_second"])
    finally:
        del os.environ[SLEEP_ENV]
    plain, dbos = latency["plain"], latency["dbos"]
    _row("per run, plain Runner.run (ms)", database, plain)
    _row("per run, DurableAgent.run (ms)", database, dbos)
    _row("per run, DurableAgent.run / plain", database, dbos / plain, "<= 2")
    _row("per run, workflow awaited on its start handle (ms)", database, latency["handle"])
    _row("per run, start handle / plain", database, latency["handle"] / plain, "<= 2")
    _row(f"per run, DBOS floor: {FLOOR_STEPS} empty steps (ms)", database, latency["floor"])
    _row("per run, DurableAgent.run over the floor (ms)", database, dbos - latency["floor"])
    a, b = statistics.median(one), statistics.median(three)
    queued = sizes["queued"]
    _row(f"throughput, {queued} queued runs, 1 worker (runs/s)", database, a)
    _row(f"throughput, {queued} queued runs, 3 workers (runs/s)", database, b)
    _row("throughput, 3 workers / 1 worker", database, b / a)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--child", choices=["latency", "throughput"], help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--system-db", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    parser.add_argument("--ready", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.system_db, args.store, args.worker, args.ready)
        return 0
    if args.child:
        return _child(args)
    runs, rounds, queued, throughput_rounds = (
        (3, 1, 10, 1) if args.smoke else (10, 2, 40, 1) if args.quick else (20, 3, 200, 1)
    )
    sizes = {
        "runs": runs,
        "rounds": rounds,
        "queued": queued,
        "throughput_rounds": throughput_rounds,
    }
    print("| figure | system database | value | target |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="aniki-bench-") as tmp:
        _report("sqlite", f"sqlite:///{tmp}/dbos.sqlite", f"sqlite:///{tmp}/store.db", sizes)
    system_db, drop = _postgres_database()
    try:
        _report("postgres", system_db, POSTGRES, sizes)
    finally:
        drop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
