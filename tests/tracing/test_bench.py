"""``bench/bench_tracing.py`` keeps working: at its smoke size it prints a row for each way,
the hook-free tree of a baseline commit included. Speed is read from it, never asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_cost_benchmark_reports_every_way(tmp_path: Path) -> None:
    pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "HEAD"], capture_output=True, text=True
    )
    baseline = ["--baseline", head.stdout.strip()] if head.returncode == 0 else []
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_tracing.py"), "--smoke", *baseline],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [
        line.strip("|").split("|") for line in done.stdout.splitlines() if line.startswith("| ")
    ]
    ways = {row[0].strip() for row in rows[1:]}
    expected = {"tracing off", "tracing on", "tracing on, with content"}
    assert ways == (expected | {"hooks absent"} if baseline else expected)
    assert all(float(row[1]) > 0 for row in rows[1:])
    assert "One disabled hook:" in done.stdout
