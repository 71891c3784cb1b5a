"""The ``aniki`` command: ``chat``, ``sessions`` and ``demo``.

It needs the ``cli`` extra (click and rich): ``pip install 'aniki-sdk[cli]'``.
"""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the ``aniki`` command; returns its exit code."""
    try:
        from .app import cli
    except ModuleNotFoundError as exc:
        if exc.name not in {"click", "rich", "platformdirs"}:
            raise
        print(
            f"the aniki command needs the {exc.name!r} package: pip install 'aniki-sdk[cli]'",
            file=sys.stderr,
        )
        return 1
    try:
        cli.main(args=argv, prog_name="aniki", standalone_mode=True)
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    return 0
