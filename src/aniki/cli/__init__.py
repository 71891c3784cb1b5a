"""The ``aniki`` command: ``chat``, ``sessions``, ``demo`` and ``inspect``.

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
    import click

    args = sys.argv[1:] if argv is None else list(argv)
    try:
        cli.main(args=args, prog_name="aniki", standalone_mode=False)
    except click.ClickException as exc:
        # Shown as click shows it, but click quotes the arguments it could not use, and one
        # of them may be a store URL with its password.
        ctx = exc.ctx if isinstance(exc, click.UsageError) else None
        if ctx is not None:
            hint = f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help."
            click.echo(f"{ctx.get_usage()}\n{hint}\n", err=True)
        click.echo(f"Error: {_hide_passwords(exc.format_message(), args)}", err=True)
        return exc.exit_code
    except click.exceptions.Abort as exc:
        interrupted = isinstance(exc.__context__, KeyboardInterrupt)
        print("interrupted" if interrupted else "Aborted!", file=sys.stderr)
        return 130 if interrupted else 1
    except SystemExit as exit:
        if exit.code is None or isinstance(exit.code, int):
            return exit.code or 0
        print(exit.code, file=sys.stderr)
        return 1
    return 0


def _hide_passwords(text: str, args: list[str]) -> str:
    """``text`` with each argument that holds a password shown redacted."""
    from .._secrets import hide_password

    for arg in sorted(set(args), key=len, reverse=True):
        hidden = hide_password(arg)
        if hidden != arg:
            text = text.replace(arg, hidden)
    return text
