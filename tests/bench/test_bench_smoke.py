"""The benchmark harness keeps working: every workload runs at smoke size, peers included
when they are installed. Nothing here asserts a speed; speed is what bench/run.py reports."""

from __future__ import annotations

import importlib.util
import os
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load_harness() -> ModuleType:
    spec = importlib.util.spec_from_file_location("aniki_bench_run", BENCH / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


harness = _load_harness()

from peers import ALL_PEERS, INSTRUCTIONS, StoreSpec  # noqa: E402  (bench/ is on the path once loaded)
from workloads import NAMES, billed_context, long_conversation  # noqa: E402
from workloads._common import (  # noqa: E402
    SCALES,
    Context,
    Row,
    Section,
    aniki_at_most,
    ratio_at_least,
    ratio_at_most,
)

INSTALLED = [peer.name for peer in ALL_PEERS if peer.available()]
ON_CI = os.environ.get("CI") == "true"


@pytest.fixture(scope="module")
def report() -> Any:
    import asyncio

    return asyncio.run(harness.run_benchmarks("smoke", log=lambda text: None))


def test_every_workload_reports_rows_with_aniki_figures(report: Any) -> None:
    assert [section.number for section in report.sections] == list(range(1, len(NAMES) + 1))
    for section in report.sections:
        if not section.rows and section.missing_servers and not ON_CI:
            continue  # a server this machine lacks (under CI, the next test fails instead)
        assert section.rows, f"workload {section.number} produced no rows"
        for row in section.rows:
            assert "aniki" in row.values, f"{section.number}: {row.measure} has no aniki figure"


@pytest.mark.parametrize("peer", [name for name in INSTALLED if name != "aniki"])
def test_installed_peers_are_measured_where_they_have_the_store(report: Any, peer: str) -> None:
    by_number = {section.number: section for section in report.sections}
    expected = {
        1: "total, 6 turns",
        3: "sqlite, 400 msgs: all, cold",
        4: "import",
        5: "memory: wall time",
        7: "TokenBudgetSession(800) vs peers' last-N windows: billed equivalent",
    }
    for number, measure in expected.items():
        row = next(r for r in by_number[number].rows if r.measure == measure)
        assert peer in row.values, f"workload {number}: {peer} missing from {measure!r}"


def test_servers_are_measured_on_ci(report: Any) -> None:
    missing = [text for section in report.sections for text in section.missing_servers]
    if missing and not ON_CI:
        pytest.skip(f"servers not running here: {missing}")
    assert not missing, f"Redis/PostgreSQL must be measured on CI: {missing}"
    stores = {row.measure for row in report.sections[4].rows}
    assert {"redis: wall time", "postgres: wall time"} <= stores


def test_concurrency_measures_the_bare_driver_beside_aniki(report: Any) -> None:
    rows = {row.measure: row for row in report.sections[4].rows}
    for store in ("memory", "sqlite", "redis", "postgres"):
        row = rows.get(f"{store}: wall time")
        if row is None and store in ("redis", "postgres") and not ON_CI:
            continue  # its server is not running here (test_servers_are_measured_on_ci)
        assert row is not None, f"workload 5 has no {store} row"
        cpu = rows[f"{store}: CPU time of the process"]
        assert row.values["raw"] > 0 and cpu.values["raw"] > 0, f"{store}: no bare-driver figure"


def test_the_report_renders_machine_table_and_notes(report: Any) -> None:
    text = harness.render(report)
    assert text.startswith("# Benchmark results")
    assert "- CPU: " in text and "- Python: " in text
    assert "| # | measure | unit | aniki |" in text
    assert "| 1 | last / first | x |" in text


def test_a_framework_that_forgets_history_is_refused(tmp_path: Path) -> None:
    import asyncio

    class Forgetful:
        async def turn(self, text: str) -> int:
            return 1  # as if only the new message were sent, every turn

    class Backend:
        def chat(self, conversation_id: str, *, delay: float = 0.0) -> Forgetful:
            return Forgetful()

    class Peer:
        name = "aniki"
        module = "aniki"

        def available(self) -> bool:
            return True

        @asynccontextmanager
        async def open(self, store: StoreSpec) -> Any:
            yield Backend()

    ctx = Context(SCALES["smoke"], [Peer()], tmp_path, "test", log=lambda text: None)
    with pytest.raises(AssertionError, match=r"sent 1 history messages .* at turn 2, expected 3"):
        asyncio.run(long_conversation.run(ctx))


def test_a_request_is_billed_for_what_it_does_not_share_with_the_one_before() -> None:
    from aniki import Message
    from aniki.tokens import EstimatingCounter

    counter = EstimatingCounter()
    system, first, reply, second = (
        Message(role=role, content=text * 40)
        for role, text in [("system", "s"), ("user", "a"), ("assistant", "b"), ("user", "c")]
    )
    size = counter.count_message(system)  # every message here costs the same
    ledger = billed_context.Ledger(counter)
    ledger.record([system, first])  # nothing before it: all uncached
    ledger.record([system, first, reply, second])  # the first request's two messages cached
    ledger.record([system, reply, second])  # the window slid: only the system prompt cached
    assert (ledger.requests, ledger.sent, ledger.cached) == (3, 9 * size, 3 * size)
    assert ledger.billed == pytest.approx(6 * size + 0.1 * 3 * size)


def test_peers_windows_are_sized_to_the_budgets_mean_request() -> None:
    from aniki.tokens import EstimatingCounter

    counter = EstimatingCounter()
    script = billed_context.Script.make(40)
    assert len(set(script.users + script.replies)) == 80  # no two messages alike
    assert billed_context.matching_history(script, counter, 0) == 0
    history = billed_context.matching_history(script, counter, 600)
    assert history % 2 == 0 and 6 <= history <= 14  # whole exchanges of ~110 tokens


def test_a_request_with_a_gap_in_its_history_is_refused() -> None:
    from aniki.tokens import EstimatingCounter

    script = billed_context.Script.make(3)
    model = billed_context.Recorder("gappy", script, EstimatingCounter())
    system = ("system", INSTRUCTIONS)
    first, reply, second = script.users[0], script.replies[0], script.users[1]
    assert model.answer_pairs([system, ("user", first)]) == reply
    assert model.answer_pairs([system, ("assistant", reply), ("user", second)])  # a window
    with pytest.raises(AssertionError, match="not the system prompt and the latest messages"):
        model.answer_pairs([system, ("user", first), ("user", second)])


def test_ratios_are_aniki_over_the_peer_and_targets_judge_them() -> None:
    twenty_times = ratio_at_most("openai-agents", 0.05, "20x less")
    row = Row("total", "s", {"aniki": 1.0, "openai-agents": 40.0}, twenty_times)
    assert row.ratio("openai-agents") == pytest.approx(0.025)
    assert twenty_times.met(row) is True
    row.values["openai-agents"] = 10.0
    assert twenty_times.met(row) is False
    del row.values["openai-agents"]
    assert twenty_times.met(row) is None

    throughput = Row("sqlite", "/s", {"aniki": 850.0, "raw": 1000.0})
    assert ratio_at_least("raw", 0.8, "").met(throughput) is True
    assert ratio_at_least("raw", 0.9, "").met(throughput) is False
    assert aniki_at_most(150, "").met(Row("import", "ms", {"aniki": 151.0})) is False

    section = Section(4, "import", [Row("import", "ms", {"aniki": 151.0}, aniki_at_most(150, "t"))])
    assert "| 4 | import | ms | 151 | t | **NO** |" in harness.table([section])


def test_the_command_writes_the_report_where_asked(tmp_path: Path) -> None:
    output = tmp_path / "results.md"
    code = harness.main(["--smoke", "--only", "context_economy", "--output", str(output)])
    assert code == 0
    text = output.read_text(encoding="utf-8")
    assert "6. context economy" in text
    assert "| 6 | no policy: tokens sent, last turn | tokens |" in text
