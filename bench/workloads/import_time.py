"""Workload 4: the time ``import <framework>`` takes in a fresh interpreter.

Each sample is a new ``python`` process timing its own import with ``time.perf_counter``
(interpreter start-up excluded). One discarded run first makes sure bytecode caches exist.
In the full run, ``python -X importtime`` also names what ``import aniki`` spends most on.
"""

from __future__ import annotations

import os
import subprocess
import sys

from workloads._common import Context, Section, aniki_at_most, median

NUMBER = 4
TITLE = "import time"
_PROGRAM = "import time; t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"


def _sample(module: str, *, write_caches: bool = False) -> float:
    """Seconds ``import module`` takes in a new interpreter; ``write_caches``: let it write
    the bytecode caches it lacks, even where ``PYTHONDONTWRITEBYTECODE`` is set (as in some
    containers): without them an editable install such as this checkout's compiles every
    module from source on every import, while installed packages have theirs from pip."""
    env = dict(os.environ)
    if write_caches:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    done = subprocess.run(
        [sys.executable, "-c", _PROGRAM.format(module=module)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env=env,
    )
    return float(done.stdout.strip())


def _self_times(program: str) -> dict[str, float]:
    """Milliseconds of import time per top-level package (self time, summed)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", program],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    totals: dict[str, float] = {}
    for line in done.stderr.splitlines():
        parts = line.split("|")
        if len(parts) != 3 or not parts[0].split(":")[-1].strip().isdigit():
            continue
        package = parts[2].strip().split(".")[0]
        totals[package] = totals.get(package, 0.0) + int(parts[0].split(":")[-1]) / 1e3
    return totals


def heaviest_imports(module: str, count: int = 6) -> list[tuple[str, float]]:
    """The packages ``import module`` spends most time loading (self time, ms, one run),
    leaving out what the interpreter imports on its own at start-up."""
    startup = _self_times("pass")
    totals = _self_times(f"import {module}")
    ranked = sorted(
        ((name, ms) for name, ms in totals.items() if name not in startup),
        key=lambda item: -item[1],
    )
    return ranked[:count]


async def run(ctx: Context) -> Section:
    section = Section(NUMBER, f"{TITLE}, fresh interpreter (ms)")
    row = section.row("import", "ms", aniki_at_most(150.0, "aniki <= 150 ms"))
    samples: dict[str, list[float]] = {peer.name: [] for peer in ctx.peers}
    if ctx.scale.name != "smoke":
        for peer in ctx.peers:
            _sample(peer.module, write_caches=True)
    for _ in range(ctx.scale.import_samples):
        for peer in ctx.peers:
            samples[peer.name].append(_sample(peer.module) * 1e3)
    for name, values in samples.items():
        row.values[name] = median(values)
    ctx.log("  4: " + ", ".join(f"{k} {v:.0f} ms" for k, v in row.values.items()))
    if ctx.scale.name == "full":
        heavy = ", ".join(f"{name} {ms:.0f} ms" for name, ms in heaviest_imports("aniki"))
        section.notes.append(
            f"`import aniki` spends most on (self time per package, one run): {heavy}"
        )
    return section
