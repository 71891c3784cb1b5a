"""One version: ``aniki.__version__`` is the source, and the installed distribution's metadata
and ``aniki --version`` show the same number."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import aniki

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_installed_metadata_carries_aniki_version() -> None:
    installed = importlib.metadata.version("aniki-sdk")
    assert installed == aniki.__version__, (
        f"the installed aniki-sdk is {installed} but aniki.__version__ is {aniki.__version__}: "
        "reinstall (pip install -e '.[all,dev]') after changing the version"
    )


def test_aniki_version_prints_it() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aniki", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"aniki, version {aniki.__version__}"


def test_pyproject_reads_the_version_from_the_package() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from 3.11")
    config = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert "version" not in config["project"], "write the version only in aniki/__init__.py"
    assert "version" in config["project"]["dynamic"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "aniki.__version__"}
