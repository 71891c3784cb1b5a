"""Keeping a server's secrets (header and environment values, a URL's password and query)
out of every text aniki makes: errors, log lines, tool messages and reprs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from ..providers._errors import MIN_SECRET_LENGTH

__all__ = ["Secrets", "shown_url"]

_HIDDEN = "***"


class Secrets:
    """The values to hide, and :meth:`scrub` that hides them in a text."""

    __slots__ = ("_values",)

    def __init__(self, values: Iterable[str]) -> None:
        found: set[str] = set()
        for value in values:
            # "Bearer abc..." may be quoted whole or by its token alone.
            for part in (value, *value.split()):
                if len(part.strip()) >= MIN_SECRET_LENGTH:
                    found.add(part.strip())
        # Longest first, so a value holding another is hidden whole.
        self._values = tuple(sorted(found, key=len, reverse=True))

    def scrub(self, text: str) -> str:
        """``text`` with every secret value replaced by ``***``."""
        for value in self._values:
            text = text.replace(value, _HIDDEN)
        return text

    def scrubbed(self, exc: BaseException) -> BaseException:
        """``exc``, with the secrets taken out of its text and that of every exception
        chained to it or grouped in it; for ``raise ... from secrets.scrubbed(exc)``, since a
        traceback prints the cause."""
        if not self._values:
            return exc
        pending: list[BaseException | None] = [exc]
        seen: set[int] = set()
        while pending:
            node = pending.pop()
            if node is None or id(node) in seen:
                continue
            seen.add(id(node))
            node.args = tuple(self.scrub(a) if isinstance(a, str) else a for a in node.args)
            error: Any = getattr(node, "error", None)  # the SDK's MCPError keeps its text there
            if isinstance(getattr(error, "message", None), str):
                with contextlib.suppress(Exception):
                    error.message = self.scrub(error.message)
            pending += [node.__cause__, node.__context__, *getattr(node, "exceptions", ())]
        return exc

    def __repr__(self) -> str:
        return f"<{len(self._values)} secret values>"


def shown_url(url: str) -> str:
    """``url`` fit to show: without a password in its user info, nor its query string
    (where tokens often travel). Never raises: it runs while errors about ``url`` are made."""
    text = url if isinstance(url, str) else repr(url)
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    rest, question, _ = rest.partition("?")
    rest = rest.partition("#")[0]
    authority, slash, path = rest.partition("/")
    userinfo, at, host = authority.rpartition("@")
    if at:
        authority = f"{userinfo.partition(':')[0]}:{_HIDDEN}@{host}"
    return f"{scheme}{sep}{authority}{slash}{path}" + (f"?{_HIDDEN}" if question else "")
