"""The ``mcp`` package, imported when :mod:`aniki.mcp` is, with the install command when it
is missing (``import aniki`` never imports it)."""

from __future__ import annotations

from ..errors import UserError

__all__ = ["INSTALL"]

INSTALL = "pip install 'aniki-sdk[mcp]'"
"""The command that installs what :mod:`aniki.mcp` needs."""

try:
    import mcp  # noqa: F401
except ModuleNotFoundError as exc:
    raise UserError(f"aniki.mcp needs the {exc.name!r} package: {INSTALL}") from exc
