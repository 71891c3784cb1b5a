"""``result.output`` is typed: mypy, run on samples, infers the schema's type through Agent,
Runner.run, run_sync and stream, and rejects a wrong use of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

TYPED = """
from dataclasses import dataclass
from typing import Any

import pydantic
from typing_extensions import assert_type

from aniki import Agent, RunResult, Runner
from aniki.testing import MockProvider


class City(pydantic.BaseModel):
    name: str


@dataclass
class Point:
    x: int


async def main() -> None:
    runner = Runner()
    provider = MockProvider()
    city = Agent("A", model="m", provider=provider, output_schema=City)
    assert_type(city, Agent[City])
    result = await runner.run(city, message="x")
    assert_type(result, RunResult[City])
    assert_type(result.output.name, str)
    point = Agent("A", model="m", provider=provider, output_schema=Point)
    assert_type(runner.run_sync(point, message="x").output, Point)
    text = Agent("A", model="m", provider=provider)
    assert_type((await runner.run(text, message="x")).output, str)
    loose = Agent("A", model="m", provider=provider, output_schema={"type": "object"})
    assert_type((await runner.run(loose, message="x")).output, Any)
    stream = runner.stream(city, message="x")
    assert_type(stream.result, RunResult[City] | None)
    assert_type(await stream.wait(), RunResult[City])
"""

WRONG = """
import pydantic

from aniki import Agent, Runner
from aniki.testing import MockProvider


class City(pydantic.BaseModel):
    name: str


def main() -> None:
    agent = Agent("A", model="m", provider=MockProvider(), output_schema=City)
    population: int = Runner().run_sync(agent, message="x").output.name
"""


def _mypy(tmp_path: Path, source: str) -> subprocess.CompletedProcess[str]:
    sample = tmp_path / "sample.py"
    sample.write_text(textwrap.dedent(source))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(tmp_path / "cache"),
            str(sample),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


def test_mypy_infers_the_output_type(tmp_path: Path) -> None:
    done = _mypy(tmp_path, TYPED)
    assert done.returncode == 0, done.stdout + done.stderr


def test_mypy_rejects_a_wrong_use_of_the_output(tmp_path: Path) -> None:
    done = _mypy(tmp_path, WRONG)
    assert done.returncode == 1
    assert 'Incompatible types in assignment (expression has type "str"' in done.stdout
