"""The single-purpose benchmark scripts keep working: each runs at its smoke size against the
test servers and prints a row for every store and way of holding a session it measures (and
for openai-agents' sessions when it is installed). Speed is read from their output, never
asserted."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.servers import postgres_dsn, redis_url

BENCH = Path(__file__).resolve().parents[2] / "bench"
PEERS = importlib.util.find_spec("agents") is not None


def _rows(script: str, tmp_path: Path) -> list[list[str]]:
    env = dict(
        os.environ,
        ANIKI_TEST_REDIS_URL=redis_url(),
        ANIKI_TEST_POSTGRES_DSN=postgres_dsn(),
        TMPDIR=str(tmp_path),
    )
    done = subprocess.run(
        [sys.executable, str(BENCH / script), "--smoke"],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    table = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in table[1:]]


def test_serving_reports_every_store_held_every_way(tmp_path: Path) -> None:
    rows = _rows("bench_serving.py", tmp_path)
    aniki = {(row[0], row[2]) for row in rows if row[1] == "aniki"}
    for store in ("sqlite", "file", "redis", "postgres"):
        for how in ("sync store", "async twin", "open_store (async)"):
            assert (store, how) in aniki, (store, how, rows)
    assert ("sqlite, lock held 0.2 s", "async twin") in aniki
    for row in rows:
        wall, ideal = (float(part.split()[0]) for part in row[3].split("/")[:2])
        assert wall >= ideal * 0.9, row  # the model's 50 ms per turn was really waited for
    peers = {row[2] for row in rows if row[1] == "openai-agents"}
    if PEERS:
        assert {"SQLiteSession", "AsyncSQLiteSession", "RedisSession"} <= peers, rows
    assert list(tmp_path.iterdir()) == [], "the benchmark left files behind"


def test_per_request_compares_each_handler_with_a_kept_object(tmp_path: Path) -> None:
    rows = _rows("bench_per_request.py", tmp_path)
    handlers = {(row[0], row[1]) for row in rows}
    for store in ("sqlite", "file", "redis", "postgres"):
        for how in ("aniki, kept object", "aniki, open_store", "aniki, new object"):
            assert (store, how) in handlers, (store, how, rows)
    assert all(float(row[2]) > 0 for row in rows), rows
    assert list(tmp_path.iterdir()) == [], "the benchmark left files behind"


def test_drivers_reports_each_client_of_each_server(tmp_path: Path) -> None:
    rows = _rows("bench_drivers.py", tmp_path)
    assert {(row[0], row[1]) for row in rows} == {
        ("postgres", "psycopg, AsyncConnectionPool"),
        ("postgres", "asyncpg, its pool"),
        ("postgres", "aniki, add_message"),
        ("redis", "redis-py, execute_command"),
        ("redis", "redis-py, a pooled connection"),
        ("redis", "aniki, add_message"),
    }, rows
    for row in rows:
        cpu, kernel, wall = (float(cell) for cell in row[2:5])
        assert cpu > 0 and 0 <= kernel <= cpu and wall > 0, row
    assert list(tmp_path.iterdir()) == [], "the benchmark left files behind"


def test_run_sync_is_compared_with_await_run_for_both_providers(tmp_path: Path) -> None:
    rows = _rows("bench_run_sync.py", tmp_path)
    ways = {(row[0], row[1]) for row in rows}
    for provider in ("OpenAI over HTTP", "MockProvider"):
        for way in ("await run", "run_sync", "asyncio.run per call"):
            assert (provider, way) in ways, (provider, way, rows)
    assert all(float(row[2]) > 0 for row in rows), rows


def test_attachments_compares_each_store_with_and_without_images(tmp_path: Path) -> None:
    rows = _rows("bench_attachments.py", tmp_path)
    kinds = {(row[0], row[1]) for row in rows}
    for store in ("sqlite", "file", "redis", "postgres"):
        assert (store, "text only") in kinds, rows
        assert (store, "every 5th with 200 KB") in kinds, rows
    assert list(tmp_path.iterdir()) == [], "the benchmark left files behind"


def test_inspect_times_every_page_in_every_store(tmp_path: Path) -> None:
    rows = _rows("bench_inspect.py", tmp_path)
    pages = {(row[0], row[1]) for row in rows}
    for store in ("sqlite", "file", "redis", "postgres"):
        for name in ("sessions list", "conversation, last page", "tokens and cache"):
            assert (store, name) in pages, (store, name, rows)
    assert all(float(row[2]) > 0 and float(row[3]) > 0 for row in rows), rows
    assert list(tmp_path.iterdir()) == [], "the benchmark left files behind"


def test_dbos_reports_per_run_cost_and_throughput_on_both_databases(tmp_path: Path) -> None:
    rows = _rows("bench_dbos.py", tmp_path)
    figures = {(row[0], row[1]): float(row[2]) for row in rows}
    expected = (
        "per run, plain Runner.run (ms)",
        "per run, DurableAgent.run (ms)",
        "per run, DurableAgent.run / plain",
        "per run, workflow awaited on its start handle (ms)",
        "per run, start handle / plain",
        "per run, DBOS floor: 9 empty steps (ms)",
        "throughput, 10 queued runs, 1 worker (runs/s)",
        "throughput, 10 queued runs, 3 workers (runs/s)",
        "throughput, 3 workers / 1 worker",
    )
    for database in ("sqlite", "postgres"):
        for figure in expected:
            assert figures.get((figure, database), 0.0) > 0, (figure, database, rows)
        over = figures[("per run, DurableAgent.run over the floor (ms)", database)]
        floor = figures[("per run, DBOS floor: 9 empty steps (ms)", database)]
        assert over == pytest.approx(
            figures[("per run, DurableAgent.run (ms)", database)] - floor, abs=0.02
        )
    assert len(rows) == 2 * (len(expected) + 1), rows
    assert list(tmp_path.iterdir()) == [], "the benchmark left files behind"


def test_retention_lists_prunes_and_deletes_in_every_store(tmp_path: Path) -> None:
    rows = _rows("bench_retention.py", tmp_path)
    stores = {row[0]: row for row in rows}
    assert set(stores) == {"sqlite", "file", "redis", "postgres"}, rows
    for row in rows:
        assert "skipped" not in row[1], row
        assert row[4].endswith("(100)"), row  # user-1 owns 100 of the smoke size's 300
        assert row[5].endswith("(200)") or row[5].endswith("(201)"), row  # (+ the writer's)
    assert list(tmp_path.iterdir()) == [], "the benchmark left files behind"


def test_tool_bills_prices_every_side_above_the_floor() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "bench_tool_bills.py"), "--quick", "--turns", "8"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    blocks = done.stdout.split("\n### ")[1:]
    names = [block.split(":")[0] for block in blocks]
    assert names == ["tool-heavy", "pauses", "tool-heavy with pauses"], done.stdout
    for name, block in zip(names, blocks, strict=True):
        table = [line for line in block.splitlines() if line.startswith("| ")]
        rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table]
        header, floor, sides = rows[0], rows[1], rows[2:]
        billed = [i for i, name in enumerate(header) if name.endswith("billed (input tokens)")]
        assert len(billed) == 3 and floor[0].startswith("floor"), rows  # three price rules
        labels = {row[0] for row in sides}
        assert {"no policy", "TokenBudgetSession(16,000)"} <= labels, rows
        if name != "tool-heavy with pauses":  # the window and the peers: without pauses
            assert "WindowedSession(40)" in labels, rows
            assert any(label.startswith("openai-agents") for label in labels) == PEERS, rows
        for row in sides:
            for column in billed:
                side, least = (float(cells[column].replace(",", "")) for cells in (row, floor))
                assert side > least, (row, floor)  # the floor is below every side
    assert "TokenBudgetSession(16,000, cache_ttl=300)" in blocks[1]
    assert "TokenBudgetSession(16,000, cache_ttl=300, clear_tool_results=True)" in blocks[2]
    assert "Targeted figures: tool-heavy" in done.stdout


def test_controls_times_a_run_with_and_without_middleware_and_guardrails(tmp_path: Path) -> None:
    rows = _rows("bench_controls.py", tmp_path)
    ways = {row[0]: float(row[1]) for row in rows}
    expected = {"none configured", "tool middleware", "guardrails", "sync guardrails", "all"}
    assert set(ways) == expected, rows
    assert all(ms > 0 for ms in ways.values()), rows
