"""Soak test of the run journal: crash trials and resume races mixed at random, on SQLite,
files, Redis and PostgreSQL.

A crash trial runs an agent in a child process that is killed (SIGKILL) inside a tool
before its side effect, after it, or after another call's result was recorded, then
finishes the run with ``Runner.recover`` (see tests/durable/test_journal_crash.py). A race
trial holds a call for approval and resumes it twice at once, or starts two runs with one
``run_id`` at once (see tests/durable/test_journal_races.py).

    python scripts/soak_runs.py --trials 1000 --jobs 8 [--stores sqlite,file,redis,postgres]

Prints the figures (trials, side-effect executions per call, invalid histories, lost
acknowledged messages, other broken rules, time); exits 1 when a check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.durable.test_journal_crash import ASKED, POINTS, problems, run_trial  # noqa: E402
from tests.durable.test_journal_races import (  # noqa: E402
    REFUND,
    SLOW,
    approval_agent,
    check_history,
)
from tests.servers import POSTGRES_DSN, REDIS_URL, unique_name  # noqa: E402

from aniki import Agent, RunInProgressError, Runner, UserError, tool  # noqa: E402
from aniki.providers.base import ModelRequest  # noqa: E402
from aniki.sessions import open_session  # noqa: E402
from aniki.testing import MockProvider, MockReply  # noqa: E402

STORES = ("sqlite", "file", "redis", "postgres")
KINDS = [f"crash-{p}-{'idempotent' if i else 'once'}" for p in POINTS for i in (False, True)]
KINDS += ["resume-race", "run-id-race"]


def url_of(store: str, folder: Path) -> str:
    if store == "sqlite":
        return f"sqlite:///{folder / 'chat.db'}"
    if store == "file":
        return f"file://{folder / 'chats'}"
    return REDIS_URL if store == "redis" else POSTGRES_DSN


def one(store: str, kind: str, folder: str) -> dict[str, Any]:
    """Run one trial (in a worker process); its figures."""
    where = Path(tempfile.mkdtemp(dir=folder))
    url = url_of(store, where)
    if kind.startswith("crash-"):
        _, point, how = kind.split("-")
        trial = run_trial(url, point, how == "idempotent", where / "effects.log")
        broken = problems(trial)
        effects = {"act" + ("~" if how == "idempotent" else ""): trial.effects["act"]}
        if point == "returned":
            effects["next"] = trial.effects["next"]
        return {
            "effects": effects,
            "invalid": sum("invalid history" in p for p in broken),
            "lost": sum("user message was lost" in p for p in broken),
            "broken": [p for p in broken if "invalid" not in p and "was lost" not in p],
        }
    return asyncio.run(_race(url, kind))


async def _race(url: str, kind: str) -> dict[str, Any]:
    ran: list[str] = []
    sid = unique_name("soak")
    first, second = open_session(url, sid), open_session(url, sid)
    broken: list[str] = []
    try:
        if kind == "resume-race":
            agent = approval_agent(ran)
            await Runner().run(agent, message=ASKED, session=first)
            work = [Runner().resume(agent, approve=[REFUND.id], session=s) for s in (first, second)]
            expected: tuple[type[BaseException], ...] = (RunInProgressError, UserError)
        else:
            agent = _slow_agent(ran)
            work = [
                Runner().run(agent, message=ASKED, session=s, run_id="r") for s in (first, second)
            ]
            expected = (RunInProgressError,)
        outcomes = await asyncio.gather(*work, return_exceptions=True)
        lost = [o for o in outcomes if isinstance(o, BaseException)]
        if len(lost) != 1 or not isinstance(lost[0], expected):
            broken.append(f"{kind}: outcomes {outcomes!r}")
        history = list(first.get_messages())
        invalid = 0
        try:
            check_history(history)
        except AssertionError:
            invalid = 1
        counts = Counter(ran)
        return {
            "effects": {
                name: counts[name] for name in ("refund", "lookup", "slow") if name in counts
            },
            "invalid": invalid,
            "lost": int(not history or history[0].content != ASKED),
            "broken": broken,
        }
    finally:
        first.clear()
        for session in (first, second):
            close = getattr(session, "close", None)
            if close is not None:
                close()


def _slow_agent(ran: list[str]) -> Agent:
    @tool
    async def slow() -> str:
        """Take a while."""
        ran.append("slow")
        await asyncio.sleep(0.2)
        return "slow done"

    def model(request: ModelRequest) -> MockReply:
        if request.messages[-1].role == "user":
            return MockReply(tool_calls=(SLOW,))
        return MockReply(content="Done")

    return Agent("Worker", model="m", provider=MockProvider(handler=model), tools=[slow])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=8)
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    stores = args.stores.split(",")
    plan = [(rng.choice(stores), rng.choice(KINDS)) for _ in range(args.trials)]
    started = time.monotonic()
    per_call: dict[str, Counter[int]] = {}
    kinds: Counter[str] = Counter()
    invalid = lost = 0
    broken: list[str] = []
    with tempfile.TemporaryDirectory() as folder, ProcessPoolExecutor(args.jobs) as pool:
        futures = [(s, k, pool.submit(one, s, k, folder)) for s, k in plan]
        for store, kind, future in futures:
            kinds[f"{store}/{kind}"] += 1
            try:
                figures = future.result()
            except Exception as error:  # a trial that failed outright is a broken rule
                broken.append(f"{store}/{kind}: {type(error).__name__}: {error}")
                continue
            for name, times in figures["effects"].items():
                per_call.setdefault(name, Counter())[times] += 1
            invalid += figures["invalid"]
            lost += figures["lost"]
            broken += [f"{store}/{kind}: {p}" for p in figures["broken"]]
    elapsed = time.monotonic() - started
    return report(args.trials, kinds, per_call, invalid, lost, broken, elapsed)


def report(
    trials: int,
    kinds: Counter[str],
    per_call: dict[str, Counter[int]],
    invalid: int,
    lost: int,
    broken: list[str],
    elapsed: float,
) -> int:
    """Print the figures; 1 when a check failed."""
    print(f"trials: {trials}")
    for name, count in sorted(kinds.items()):
        print(f"  {name}: {count}")
    print("side-effect executions per call (times run: calls); '~' marks an idempotent tool")
    worst_once = 0
    for name, spread in sorted(per_call.items()):
        shown = ", ".join(f"{times}x: {calls}" for times, calls in sorted(spread.items()))
        print(f"  {name}: {shown}; max {max(spread)}")
        if not name.endswith("~"):
            worst_once = max(worst_once, max(spread))
    print(f"max executions of a non-idempotent call: {worst_once} (must be at most 1)")
    print(f"invalid histories: {invalid} (must be 0)")
    print(f"lost acknowledged messages: {lost} (must be 0)")
    print(f"other broken rules: {len(broken)}")
    for problem in broken[:20]:
        print(f"  {problem}")
    print(f"time: {elapsed:.1f} s ({elapsed / max(trials, 1) * 1000:.0f} ms a trial)")
    return int(worst_once > 1 or invalid > 0 or lost > 0 or bool(broken))


if __name__ == "__main__":
    sys.exit(main())
