"""The sessions package's layout: one package per store and one for the policies, each
class at its package path, and nothing of a store imported by ``import aniki``."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import aniki.sessions

SESSIONS = Path(aniki.sessions.__file__).parent


@pytest.mark.parametrize(
    ("package", "names"),
    [
        ("sqlite", ["SQLiteSession", "SQLiteStore", "AsyncSQLiteSession"]),
        ("file", ["FileSession", "FileStore", "AsyncFileSession"]),
        ("redis", ["RedisSession", "AsyncRedisSession"]),
        ("postgres", ["PostgresSession", "AsyncPostgresSession"]),
        ("policies", ["WindowedSession", "TokenBudgetSession", "SummarizingSession", "Summary"]),
    ],
)
def test_each_store_and_the_policies_live_in_a_package_of_their_own(
    package: str, names: list[str]
) -> None:
    folder = SESSIONS / package
    assert (folder / "__init__.py").is_file()
    loaded = importlib.import_module(f"aniki.sessions.{package}")
    for name in names:
        defined = getattr(loaded, name)
        assert defined is getattr(aniki.sessions, name)
        assert defined.__module__.startswith(f"aniki.sessions.{package}."), defined.__module__
    # the package's private helpers are in its folder, not beside the shared modules
    assert not [p.name for p in SESSIONS.glob(f"_{package}_*.py")]


@pytest.mark.parametrize(
    ("old", "name"),
    [
        ("aniki.sessions.sqlite", "SQLiteSession"),
        ("aniki.sessions.sqlite.aio", "AsyncSQLiteSession"),
        ("aniki.sessions.file", "FileSession"),
        ("aniki.sessions.file.aio", "AsyncFileSession"),
        ("aniki.sessions.redis", "RedisSession"),
        ("aniki.sessions.postgres", "PostgresSession"),
        ("aniki.sessions.policies.windowed", "WindowedSession"),
        ("aniki.sessions.policies.budget", "TokenBudgetSession"),
        ("aniki.sessions.policies.summarizing", "SummarizingSession"),
    ],
)
def test_each_class_is_the_one_its_package_path_names(old: str, name: str) -> None:
    module = importlib.import_module(old)
    assert getattr(module, name) is getattr(aniki.sessions, name)


def test_import_aniki_imports_no_store_package() -> None:
    code = (
        "import sys, aniki\n"
        "loaded = [m for m in sys.modules if m.startswith('aniki.sessions.')]\n"
        "print(sorted(loaded))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    for package in ("sqlite", "file", "redis", "postgres", "policies"):
        assert f"aniki.sessions.{package}" not in done.stdout, done.stdout
