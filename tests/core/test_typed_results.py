"""``result.output`` is typed: mypy, run on samples, infers the schema's type through Agent,
Runner.run, run_sync and stream, and rejects a wrong use of it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

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


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One mypy run over both samples (each run checks aniki itself too: about 30 s)."""
    folder = tmp_path_factory.mktemp("samples")
    (folder / "typed_sample.py").write_text(textwrap.dedent(TYPED))
    (folder / "wrong_sample.py").write_text(textwrap.dedent(WRONG))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-incremental",
            "--cache-dir",
            str(folder / "cache"),
            str(folder / "typed_sample.py"),
            str(folder / "wrong_sample.py"),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=600,
    )


def _errors(done: subprocess.CompletedProcess[str], sample: str) -> list[str]:
    return [line for line in done.stdout.splitlines() if f"{sample}.py:" in line]


def test_mypy_infers_the_output_type(checked: subprocess.CompletedProcess[str]) -> None:
    assert checked.returncode in (0, 1), checked.stdout + checked.stderr  # 2: mypy itself failed
    assert _errors(checked, "typed_sample") == [], checked.stdout


def test_mypy_rejects_a_wrong_use_of_the_output(checked: subprocess.CompletedProcess[str]) -> None:
    assert checked.returncode == 1, checked.stdout + checked.stderr
    errors = _errors(checked, "wrong_sample")
    assert len(errors) == 1, checked.stdout
    assert 'Incompatible types in assignment (expression has type "str"' in errors[0]
