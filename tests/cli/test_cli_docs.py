"""docs/cli.md names every command the ``aniki`` command has, and every option of each."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

click = pytest.importorskip("click", reason="the aniki command needs the cli extra")

from aniki.cli.app import cli  # noqa: E402

DOC = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def commands(
    group: click.Group, path: tuple[str, ...] = ("aniki",)
) -> Iterator[tuple[str, click.Command]]:
    """``("aniki sessions fork", command)`` for every command and group under ``group``."""
    for name, command in sorted(group.commands.items()):
        yield " ".join((*path, name)), command
        if isinstance(command, click.Group):
            yield from commands(command, (*path, name))


def section(text: str, top: str) -> str:
    """The part of the page under ``## `aniki TOP```, up to the next second-level heading."""
    found = re.search(rf"^## `aniki {re.escape(top)}`\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert found, f"docs/cli.md has no section '## `aniki {top}`'"
    return found.group(1)


def named(flag: str, text: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text) is not None


ALL = list(commands(cli))


def test_the_app_has_the_commands_this_test_expects() -> None:
    names = {name for name, _ in ALL}
    assert {"aniki sessions fork", "aniki sessions undo", "aniki runs recover"} <= names


@pytest.mark.parametrize(("name", "command"), ALL, ids=[name for name, _ in ALL])
def test_every_command_is_named(name: str, command: click.Command) -> None:
    assert name in DOC.read_text(encoding="utf-8"), f"docs/cli.md does not name `{name}`"


@pytest.mark.parametrize(("name", "command"), ALL, ids=[name for name, _ in ALL])
def test_every_option_is_named_in_its_commands_section(name: str, command: click.Command) -> None:
    text = section(DOC.read_text(encoding="utf-8"), name.split()[1])
    missing = [
        "/".join(param.opts)
        for param in command.params
        if isinstance(param, click.Option)
        and "--help" not in param.opts
        and not any(named(flag, text) for flag in (*param.opts, *param.secondary_opts))
    ]
    assert missing == [], f"the section of `{name}` in docs/cli.md does not name {missing}"


def test_the_top_level_options_are_named() -> None:
    text = DOC.read_text(encoding="utf-8")
    options = [p for p in cli.params if isinstance(p, click.Option) and "--help" not in p.opts]
    assert options, "aniki has --version"
    assert all(any(named(flag, text) for flag in p.opts) for p in options)
