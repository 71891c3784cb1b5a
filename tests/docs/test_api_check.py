"""scripts/api_check.py: a breaking change to the public API fails the check until the
changelog's ``[Unreleased]`` section names it under ``Changed`` or ``Removed``.

Each test writes a baseline from a small ``aniki`` package in tmp_path, breaks the package,
and checks it against a changelog in tmp_path.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest

pytest.importorskip("griffe")

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "api_check.py"

RELEASED = '''
"""A small public API."""

__all__ = ["Greeter", "farewell", "greet"]


def greet(name: str, *, loud: bool = False) -> str:
    """Greet someone."""
    return name


def farewell(name: str) -> str:
    """Say goodbye."""
    return name


class Greeter:
    """Greets, again and again."""

    def __init__(self, name: str = "world") -> None:
        self.name = name

    def wave(self, times: int = 1) -> None:
        """Wave ``times`` times."""
'''


def _api_check() -> ModuleType:
    spec = importlib.util.spec_from_file_location("api_check", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _package(src: Path, text: str) -> Path:
    (src / "aniki").mkdir(parents=True, exist_ok=True)
    (src / "aniki" / "__init__.py").write_text(textwrap.dedent(text), encoding="utf-8")
    return src


def _changelog(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "CHANGELOG.md"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def _released(tmp_path: Path, api_check: ModuleType) -> tuple[Path, Path]:
    src = _package(tmp_path / "src", RELEASED)
    baseline = tmp_path / "api" / "aniki-0.1.0.json"
    api_check.write_surface(baseline, src)
    return src, baseline


# (what changes in the package, what the check says, the name the changelog must give)
BREAKS = [
    pytest.param(
        ("def greet(name: str, *, loud: bool = False)", "def greet(name: str)"),
        "aniki.greet(loud): Parameter was removed",
        "greet",
        id="parameter-removed",
    ),
    pytest.param(
        ("def greet(name: str, *, loud: bool = False)", "def greet(name: str, *, loud: bool)"),
        "aniki.greet(loud): Parameter is now required",
        "greet",
        id="parameter-required",
    ),
    pytest.param(
        ('def __init__(self, name: str = "world")', 'def __init__(self, name: str = "you")'),
        "aniki.Greeter(name): Parameter default was changed: 'world' -> 'you'",
        "Greeter",
        id="constructor-default",
    ),
    pytest.param(
        ("    def wave(", "    def _wave("),
        "aniki.Greeter.wave: Public object was removed",
        "Greeter.wave",
        id="method-removed",
    ),
    pytest.param(
        ('__all__ = ["Greeter", "farewell", "greet"]', '__all__ = ["Greeter", "greet"]'),
        "aniki.farewell: Public object was removed",
        "farewell",
        id="name-removed",
    ),
]


@pytest.mark.parametrize(("change", "message", "name"), BREAKS)
def test_a_breaking_change_fails_until_the_changelog_names_it(
    tmp_path: Path, change: tuple[str, str], message: str, name: str
) -> None:
    api_check = _api_check()
    src, baseline = _released(tmp_path, api_check)
    old, new = change
    assert old in RELEASED
    _package(src, RELEASED.replace(old, new))

    silent = _changelog(tmp_path, "# Changelog\n\n## [Unreleased]\n\n### Added\n\n- More.\n")
    ok, lines = api_check.check(baseline, silent, src)
    assert not ok
    assert f"  {message}" in lines, lines
    assert f"({name})" in lines[-1]

    announced = _changelog(
        tmp_path,
        f"""\
        # Changelog

        ## [Unreleased]

        ### Changed

        - `{name}` changed; see the docs.

        ## [0.1.0] - 2026-12-01

        ### Added

        - Everything.
        """,
    )
    ok, lines = api_check.check(baseline, announced, src)
    assert ok, lines
    assert "1 breaking change(s), each announced in CHANGELOG.md" in lines[0]


@pytest.mark.parametrize(
    "changelog",
    [
        pytest.param("## [Unreleased]\n\n### Added\n\n- `greet` is nicer.\n", id="under-added"),
        pytest.param(
            "## [Unreleased]\n\n### Fixed\n\n- x\n\n## [0.1.0]\n\n### Removed\n\n- `greet`\n",
            id="under-a-release",
        ),
        pytest.param("## [Unreleased]\n\n### Removed\n\n- `greeting`\n", id="a-longer-name"),
        pytest.param("## [Unreleased]\n\n### Removed\n\n- `Greeter.greet`\n", id="a-member"),
    ],
)
def test_only_a_mention_of_the_name_under_unreleased_changed_or_removed_counts(
    tmp_path: Path, changelog: str
) -> None:
    api_check = _api_check()
    src, baseline = _released(tmp_path, api_check)
    _package(src, RELEASED.replace("def greet(name: str, *, loud: bool = False)", "def greet()"))
    ok, lines = api_check.check(baseline, _changelog(tmp_path, changelog), src)
    assert not ok, lines


def test_the_command_fails_with_the_change_and_passes_when_the_changelog_lists_it(
    tmp_path: Path,
) -> None:
    api_check = _api_check()
    src, baseline = _released(tmp_path, api_check)
    _package(src, RELEASED.replace("    def wave(self, times: int = 1)", "    def wave(self)"))
    command = [sys.executable, str(SCRIPT), "--src", str(src), "--baseline", str(baseline)]

    changelog = _changelog(tmp_path, "## [Unreleased]\n")
    done = subprocess.run(
        [*command, "--changelog", str(changelog)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "aniki.Greeter.wave(times): Parameter was removed" in done.stderr

    changelog = _changelog(
        tmp_path, "## [Unreleased]\n\n### Removed\n\n- `aniki.Greeter.wave(times)`\n"
    )
    done = subprocess.run(
        [*command, "--changelog", str(changelog)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_additions_are_not_breaking(tmp_path: Path) -> None:
    api_check = _api_check()
    src, baseline = _released(tmp_path, api_check)
    grown = RELEASED.replace('"greet"]', '"greet", "wave"]').replace(
        "*, loud: bool = False)", "*, loud: bool = False, times: int = 1)"
    )
    _package(src, grown + '\n\ndef wave() -> None:\n    """Wave."""\n')
    ok, lines = api_check.check(baseline, tmp_path / "no-changelog.md", src)
    assert ok, lines
    assert "no breaking change" in lines[0]


def test_the_trees_own_surface_round_trips_without_a_change(tmp_path: Path) -> None:
    api_check = _api_check()
    baseline = tmp_path / "aniki-now.json"
    api_check.write_surface(baseline)
    ok, lines = api_check.check(baseline, tmp_path / "no-changelog.md")
    assert ok, lines
    assert "no breaking change" in lines[0]
    assert api_check.load_surface(api_check.newest_baseline())["aniki"]["Runner"]["kind"] == "class"
