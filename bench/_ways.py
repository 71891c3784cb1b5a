"""Ways of running one thing, timed side by side: each way in a process of its own, on this
tree or on the ``src`` of an earlier commit, the ways interleaved over rounds (their order
turned each round) so that a busy spell on a shared machine hits every way alike.

A script using it has a worker mode (``--worker WAY --runs N``) that times ``N`` runs its way
and prints ``{"ms": median, "aniki": aniki.__file__}`` as its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROUNDS = 5


def baseline_tree(rev: str, into: Path) -> Path:
    """The ``src`` directory of commit ``rev``, taken out with ``git archive`` into ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", rev, "src"],
        capture_output=True,
        check=True,
    ).stdout
    tar_path = into / "baseline.tar"
    tar_path.write_bytes(archive)
    safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # 3.10.12 and later
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, **safe)  # type: ignore[arg-type]
    tar_path.unlink()
    return into / "src"


def measure(script: str, way: str, runs: int, src: Path, *, label: str | None = None) -> float:
    """The median ms the worker of ``script`` reports for ``runs`` runs of ``way``, with
    aniki imported from ``src`` (checked); ``label`` names the way in errors."""
    shown = label or way
    done = subprocess.run(
        [sys.executable, script, "--worker", way, "--runs", str(runs)],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(src)),
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{shown} failed:\n{done.stderr[-3000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if not Path(figures["aniki"]).resolve().is_relative_to(src.resolve()):
        raise SystemExit(f"{shown} imported aniki from {figures['aniki']}, not from {src}")
    ms: float = figures["ms"]
    return ms


def interleaved(
    trees: Mapping[str, Path], timed: Callable[[str, Path], float], rounds: int
) -> dict[str, list[float]]:
    """Each way's figure per round: ``timed(way, src)`` for every way of ``trees`` in turn,
    ``rounds`` times, the order turned each round."""
    figures: dict[str, list[float]] = {way: [] for way in trees}
    order = list(trees.items())
    for _ in range(rounds):
        for way, src in order:
            figures[way].append(timed(way, src))
        order.reverse()
    return figures


def options(doc: str | None, ways: tuple[str, ...], baseline: str) -> argparse.Namespace:
    """The command line every such script takes (``baseline``: what ``--baseline`` names)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n")[0])
    parser.add_argument("--baseline", metavar="REV", help=baseline)
    parser.add_argument("--quick", action="store_true", help="300 runs per way and round")
    parser.add_argument("--smoke", action="store_true", help="20 runs per way, 2 rounds")
    parser.add_argument("--worker", choices=ways, help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=0, help=argparse.SUPPRESS)
    return parser.parse_args()


def compared(
    args: argparse.Namespace,
    ways: tuple[str, ...],
    baseline_way: str,
    timed: Callable[[str, int, Path], float],
) -> tuple[dict[str, list[float]], int, int]:
    """Each way's figures (``baseline_way`` on the tree of ``--baseline``, or left out without
    it), the runs per figure and the rounds, as ``--quick`` and ``--smoke`` say."""
    runs = 20 if args.smoke else 300 if args.quick else 2000
    rounds = 2 if args.smoke else ROUNDS
    with tempfile.TemporaryDirectory() as scratch:
        trees = dict.fromkeys(ways, ROOT / "src")
        if args.baseline:
            trees[baseline_way] = baseline_tree(args.baseline, Path(scratch))
        else:
            del trees[baseline_way]
        figures = interleaved(trees, lambda way, src: timed(way, runs, src), rounds)
    return figures, runs, rounds


def table(figures: Mapping[str, list[float]], base: str) -> str:
    """The best and the median round of each way, and its best over ``base``'s best."""
    best = {way: min(values) for way, values in figures.items()}
    lines = [f"| way | best round | / {base} | median round |", "|---|---|---|---|"]
    for way, values in figures.items():
        ratio = best[way] / best[base]
        lines.append(
            f"| {way} | {best[way]:.3f} | {ratio:.3f}x | {statistics.median(values):.3f} |"
        )
    return "\n".join(lines)


def heading(what: str, runs: int, rounds: int, baseline_way: str, baseline: str | None) -> str:
    """The lines above :func:`table`: what one run is, and which tree ``baseline_way`` ran."""
    lines = [f"{what}: ms, a round's median of {runs} runs, best and median of {rounds} rounds"]
    if baseline:
        lines.append(f"{baseline_way}: the tree of {baseline}")
    return "\n".join(lines)
