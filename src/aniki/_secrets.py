"""Keeping secrets out of every text aniki makes: errors, log lines, tool messages and reprs.

A secret is hidden in one of two ways, depending on whether aniki knows its value:

* **Known values**: an API key, an MCP server's header and environment values, the password
  and query values of its URL (:func:`url_secrets`). :class:`Secrets` holds them;
  :func:`redact` replaces each in a text or a JSON-like value (a server's reply body), and
  :func:`scrub` in an exception and every exception chained to it or grouped in it, since
  a traceback prints them all.
* **Values found by their place**: the password of a store URL or ``key=value`` DSN
  (:func:`hide_password`), a URL's password and query (:func:`shown_url`), the credentials a
  server echoes in its error text (:func:`hide_credentials`). :func:`url_problem` says what
  is wrong with a URL in its own words, as a parser's message can quote the password.

Only a value that can be a secret is hidden as a known value (:func:`is_secret`): a local
server's placeholder key (``"x"``, ``"EMPTY"``) is none, and replacing every ``x`` of an
error text would only garble it ("ma***imum context length").

Nothing here raises on odd input: these functions run while an error about that very input
is being built, and an exception there would carry the secret out.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, overload
from urllib.parse import urlsplit

__all__ = [
    "HIDDEN",
    "MIN_SECRET_LENGTH",
    "Secrets",
    "hide_credentials",
    "hide_password",
    "is_secret",
    "redact",
    "scrub",
    "shown_url",
    "url_problem",
    "url_secrets",
]

HIDDEN = "***"
"""What a hidden secret is shown as."""

MIN_SECRET_LENGTH = 8
"""The shortest value hidden as a secret; no provider issues keys that short."""

_PLACEHOLDERS = frozenset(
    {
        "anything",
        "api-key",
        "changeme",
        "lm-studio",
        "lmstudio",
        "no-api-key",
        "not-needed",
        "not_needed",
        "notneeded",
        "password",
        "placeholder",
        "sk-no-key-required",
        "your-api-key",
        "your_api_key",
    }
)
"""Keys people pass to local servers that check none (llama.cpp, vLLM, Ollama, LM Studio)."""

_E = TypeVar("_E", bound=BaseException)


def is_secret(value: str | None) -> bool:
    """Whether ``value`` can be a real secret, and so must be hidden from every text.

    Values shorter than :data:`MIN_SECRET_LENGTH` characters and well-known placeholder words
    are not: hiding ``"x"`` would turn "maximum context length" into "ma***imum ...".
    """
    if not isinstance(value, str) or len(value.strip()) < MIN_SECRET_LENGTH:
        return False
    return value.strip().lower() not in _PLACEHOLDERS


class Secrets:
    """The known values to hide: each given value that can be a secret, and each of its words
    that can be one (``"Bearer abc..."`` may be quoted whole or by its token alone)."""

    __slots__ = ("values",)

    values: tuple[str, ...]
    """The values, longest first, so that a value holding another is hidden whole."""

    def __init__(self, values: Iterable[str | None] = ()) -> None:
        found: set[str] = set()
        for value in values:
            if isinstance(value, str):
                found.update(part.strip() for part in (value, *value.split()) if is_secret(part))
        self.values = tuple(sorted(found, key=len, reverse=True))

    def __repr__(self) -> str:
        return f"<{len(self.values)} secret values>"


def _known(secrets: Secrets | str | None) -> tuple[str, ...]:
    return (secrets if isinstance(secrets, Secrets) else Secrets((secrets,))).values


@overload
def redact(value: str, secrets: Secrets | str | None) -> str: ...
@overload
def redact(value: Any, secrets: Secrets | str | None) -> Any: ...
def redact(value: Any, secrets: Secrets | str | None) -> Any:
    """``value`` with every one of ``secrets`` (a :class:`Secrets`, or one value such as an
    API key) replaced by ``***``, looking into dicts and lists; ``value`` itself when there
    is nothing to hide (see :func:`is_secret`)."""
    known = _known(secrets)
    return _redacted(value, known) if known else value


def _redacted(value: Any, known: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        for secret in known:
            value = value.replace(secret, HIDDEN)
        return value
    if isinstance(value, Mapping):
        return {key: _redacted(item, known) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_redacted(item, known) for item in value]
    return value


def scrub(exc: _E, secrets: Secrets | str | None) -> _E:
    """``exc``, with ``secrets`` taken out of its text and body and those of every exception
    chained to it or grouped in it; returned for ``raise ... from scrub(exc, secrets)``.

    A foreign exception becomes the ``__cause__`` of the aniki error, so a traceback or an
    error reporter prints it: a server that echoes the key (some put it in a 401 body) must
    not put it there either.
    """
    known = _known(secrets)
    if not known:
        return exc
    pending: list[BaseException | None] = [exc]
    seen: set[int] = set()
    while pending:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        node.args = tuple(_redacted(arg, known) for arg in node.args)
        _redact_attribute(node, "message", known)
        _redact_attribute(node, "body", known)
        # The MCP SDK's MCPError keeps its text in ``error.message``.
        _redact_attribute(getattr(node, "error", None), "message", known)
        pending += [node.__cause__, node.__context__]
        grouped = getattr(node, "exceptions", ())
        if isinstance(grouped, (tuple, list)):
            pending += [item for item in grouped if isinstance(item, BaseException)]
    return exc


def _redact_attribute(owner: object, name: str, known: tuple[str, ...]) -> None:
    with contextlib.suppress(Exception):  # a read-only or odd attribute stays as it is
        value = getattr(owner, name, None)
        if isinstance(value, (str, Mapping, list, tuple)):
            setattr(owner, name, _redacted(value, known))


# A value counts as a credential when it has 8 characters or more, one a digit at least:
# "Bearer authentication required" or "password: required" stay readable.
_CREDENTIALS = re.compile(
    r"(\bbearer\s+)(?=[A-Za-z._~+/=-]*\d)[A-Za-z0-9._~+/=-]{8,}"
    r"|(\b(?:api[_-]?key|x-api-key|access[_-]?token|secret|password)[\"']?\s*[:=]\s*[\"']?)"
    r"(?=[^\s\"',;}&\d]*\d)[^\s\"',;}&]{8,}",
    re.IGNORECASE,
)


def hide_credentials(text: str) -> str:
    """``text`` with the values of the credentials it shows (``Authorization: Bearer ...``,
    ``api_key=...``) replaced by ``***``: for a server's text, which may echo them."""
    return _CREDENTIALS.sub(lambda found: f"{found.group(1) or found.group(2)}{HIDDEN}", text)


def _user_info(text: str) -> tuple[str, str, str]:
    """``text`` as (``scheme://`` or ``""``, the user info or ``""``, the rest after it).

    The user info runs to the *last* ``@``, so a password holding ``/``, ``#``, ``[`` or
    ``@`` is taken whole (at worst a little more than the password is).
    """
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "", text
    userinfo, _, hostpart = rest.rpartition("@")
    return scheme + sep, userinfo, hostpart


_DSN_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]+)", re.IGNORECASE)


def hide_password(location: str) -> str:
    """``location`` (a URL or a ``key=value`` DSN) with any password replaced by ``***``.

    It does not rely on a URL parser, which raises on the very URLs whose errors it serves:
    everything between the user name and the *last* ``@`` is hidden.
    """
    text = location if isinstance(location, str) else repr(location)
    prefix, userinfo, hostpart = _user_info(text)
    # With a scheme, whatever precedes the last "@" is user info, whatever the user name
    # holds (even "="); without one it may be a keyword DSN, whose "=" marks a keyword.
    user, colon, _ = userinfo.partition(":")
    if colon and (prefix or "=" not in user):
        text = f"{prefix}{user}:{HIDDEN}@{hostpart}"
    return _DSN_PASSWORD.sub(rf"\1{HIDDEN}", text)


def shown_url(url: str) -> str:
    """``url`` fit to show: without a password in its user info, nor its query string
    (where tokens often travel), nor its fragment."""
    text = url if isinstance(url, str) else repr(url)
    base, question, _ = text.partition("#")[0].partition("?")
    return hide_password(base) + (f"?{HIDDEN}" if question else "")


def url_secrets(url: str) -> list[str]:
    """The values of ``url`` to hide as :class:`Secrets`: its password and query values."""
    base, _, query = url.partition("#")[0].partition("?")
    found = [_user_info(base)[1].partition(":")[2]]
    found += [pair.partition("=")[2] for pair in query.split("&") if pair]
    return [value for value in found if value]


def url_problem(url: str) -> str | None:
    """What makes ``url`` unusable as a server URL, or ``None``.

    Says it in its own words: a parser's message can quote part of the password
    (``user:pa/ss@host`` reads as host ``user``, port ``pa``).
    """
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        said = str(exc)
        if "IPv6" in said or "IPv4" in said:
            problem = "its host in [brackets] is not an IP address"
        elif "port" in said.lower():
            problem = "its port is not a number from 0 to 65535"
        else:
            problem = "it cannot be parsed"
        return f"{problem} (characters such as / ? # @ [ ] in a password must be percent-encoded)"
    del port
    return None
