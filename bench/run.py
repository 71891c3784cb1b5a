"""Run the benchmark comparison of aniki with its peers and print one table.

    python bench/run.py                 # the full comparison; writes bench/results.md
    python bench/run.py --quick         # smaller sizes, a look while developing
    python bench/run.py --only append   # one workload (a name or its number; repeatable)

Every workload drives each installed framework (aniki, openai-agents, pydantic-ai; install the
peers with ``pip install -r bench/requirements.txt``) through the adapters in ``bench/peers``,
with a scripted model on every side. Figures are medians over repeated runs; each ratio is
aniki's figure over a peer's from the same run. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import os
import platform
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import workloads  # noqa: E402
from peers import ALL_PEERS, available_peers  # noqa: E402
from workloads._common import SCALES, Context, Row, ScaleName, Section  # noqa: E402

COLUMNS = ("aniki", "openai-agents", "pydantic-ai", "raw")
DISTRIBUTIONS = {
    "aniki": "aniki-sdk",
    "openai-agents": "openai-agents",
    "pydantic-ai": "pydantic-ai-slim",
}


@dataclass
class Report:
    """One run of the harness: where, when, at which scale, and what each workload found."""

    scale: ScaleName
    started: datetime
    seconds: float = 0.0
    machine: dict[str, str] = field(default_factory=dict)
    sections: list[Section] = field(default_factory=list)


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            names = [
                line.split(":", 1)[1].strip() for line in info if line.startswith("model name")
            ]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    versions = []
    for name, dist in DISTRIBUTIONS.items():
        try:
            versions.append(f"{name} {importlib.metadata.version(dist)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{name} not installed")
    return {
        "CPU": cpu,
        "cores": str(os.cpu_count()),
        "Python": f"{platform.python_version()} ({platform.python_implementation()})",
        "OS": platform.platform(terse=True),
        "SQLite": sqlite3.sqlite_version,
        "packages": ", ".join(versions),
    }


SPEED_LOOP = 10_000_000


def python_speed() -> float:
    """Milliseconds a plain Python loop of :data:`SPEED_LOOP` additions takes (best of 3): how
    fast this machine runs Python today, since a shared one's speed varies from day to day."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        total = 0
        for i in range(SPEED_LOOP):
            total += i
        best = min(best, time.perf_counter() - start)
    return best * 1000


async def run_benchmarks(
    scale: ScaleName = "full",
    only: Sequence[str] = (),
    peers: Sequence[str] | None = None,
    log: Callable[[str], None] | None = None,
) -> Report:
    """Run the chosen workloads (all by default) with the installed frameworks."""
    chosen = [workloads.load(name) for name in (only or workloads.NAMES)]
    report = Report(scale, datetime.now(timezone.utc), machine=machine())
    if scale != "smoke":  # 2-3 s, for a report of timings the smoke run does not make
        report.machine["Python speed"] = (
            f"{python_speed():.0f} ms for {SPEED_LOOP:,} integer additions in a loop "
            "(best of 3; a shared machine's speed varies from day to day: compare runs by it)"
        )
    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="aniki-bench-") as tmp:
        ctx = Context(
            scale=SCALES[scale],
            peers=available_peers(tuple(peers) if peers else None),
            tmp=Path(tmp),
            namespace=f"aniki_bench_{uuid.uuid4().hex[:8]}",
        )
        if log is not None:
            ctx.log = log
        if not ctx.peers or ctx.peers[0].name != "aniki":
            raise SystemExit("aniki is not importable: install it (pip install -e .) first")
        for module in chosen:
            ctx.log(f"workload {module.NUMBER}: {module.TITLE}")
            began = time.perf_counter()
            section = await module.run(ctx)
            ctx.log(f"  ({time.perf_counter() - began:.1f} s)")
            missing = [p.name for p in ALL_PEERS if p not in ctx.peers]
            if missing:
                section.notes.append(f"not installed, so not compared: {', '.join(missing)}")
            report.sections.append(section)
    report.seconds = time.perf_counter() - start
    # Other work on the machine inflates wall times (workloads 1, 4, 5 most): say how busy it was.
    report.machine["load average (1 min)"] = (
        f"{load_before:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, "
        f"on {os.cpu_count()} cores"
    )
    return report


def _figure(value: float | None) -> str:
    if value is None:
        return ""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def _columns(sections: Sequence[Section]) -> list[str]:
    present = {name for s in sections for row in s.rows for name in row.values}
    return [name for name in COLUMNS if name in present] or ["aniki"]


def table(sections: Sequence[Section]) -> str:
    """One markdown table of every row: figures, ratios (aniki / column), target, met."""
    columns = _columns(sections)
    others = [name for name in columns if name != "aniki"]
    head = ["#", "measure", "unit", *columns, *(f"aniki/{name}" for name in others)]
    head += ["target", "met"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for section in sections:
        for row in section.rows:
            lines.append("| " + " | ".join(_cells(section, row, columns, others)) + " |")
    return "\n".join(lines)


def _cells(section: Section, row: Row, columns: list[str], others: list[str]) -> list[str]:
    met = row.target.met(row) if row.target else None
    verdict = "" if row.target is None else {True: "yes", False: "**NO**", None: "n/a"}[met]
    return [
        str(section.number),
        row.measure,
        row.unit,
        *(_figure(row.values.get(name)) for name in columns),
        *(_figure(row.ratio(name)) for name in others),
        row.target.text if row.target else "",
        verdict,
    ]


def render(report: Report) -> str:
    """The whole report as markdown: machine, table, then each workload's notes."""
    lines = [
        "# Benchmark results",
        "",
        f"Run on {report.started:%Y-%m-%d %H:%M} UTC, scale `{report.scale}`, "
        f"{report.seconds:.0f} s, by `python bench/run.py"
        f"{'' if report.scale == 'full' else ' --' + report.scale}`.",
        "",
        *(f"- {key}: {value}" for key, value in report.machine.items()),
        "",
        "Figures are medians over repeated runs; `aniki/X` is aniki's figure over X's in the "
        "same run (for times below 1 is better, for throughput above 1 is better).",
        "",
        *(f"{s.number}. {s.title}" for s in report.sections),
        "",
        table(report.sections),
    ]
    notes = [(s.number, note) for s in report.sections for note in s.all_notes()]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {number}: {note}" for number, note in notes]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer repeats")
    parser.add_argument("--smoke", action="store_true", help="the tiny sizes CI uses")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="NAME",
        help=f"run only this workload (repeatable): {', '.join(workloads.NAMES)} "
        f"or 1-{len(workloads.NAMES)}",
    )
    parser.add_argument(
        "--peers", default=None, help="comma-separated frameworks to run (default: all installed)"
    )
    parser.add_argument(
        "--output",
        default=None,
        metavar="PATH",
        help="where to write the markdown report (default: bench/results.md for a full run "
        "of every workload, nowhere otherwise; '-' for nowhere)",
    )
    args = parser.parse_args(argv)
    scale: ScaleName = "smoke" if args.smoke else "quick" if args.quick else "full"
    only = [name for value in args.only for name in value.split(",") if name]
    peers = args.peers.split(",") if args.peers else None
    report = asyncio.run(run_benchmarks(scale, only, peers))
    text = render(report)
    print(text)
    output = args.output
    if output is None and scale == "full" and not only and peers is None:
        output = str(HERE / "results.md")
    if output and output != "-":
        Path(output).write_text(text, encoding="utf-8")
        print(f"written to {output}", file=sys.stderr)
    missed = [
        row.measure
        for s in report.sections
        for row in s.rows
        if row.target is not None and row.target.met(row) is False
    ]
    if missed:
        print(f"targets missed: {len(missed)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
