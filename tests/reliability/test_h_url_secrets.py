"""A password in a store URL never reaches an error, its chain, a repr or a traceback,
whatever the URL looks like: malformed IPv6 hosts, bad ports, unencoded ``/ ? # @ [ ]`` in the
password, broken queries. Fuzzed with hypothesis over ``open_session`` (both kinds),
``list_sessions`` and ``hide_password``, the server sessions' constructors, and
``aniki sessions list``.
"""

from __future__ import annotations

import os
import string
import subprocess
import sys
import traceback
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aniki import AnikiError, UserError
from aniki._secrets import hide_password, url_problem
from aniki.sessions import list_sessions, open_session

MARK = "Zq9"
"""Every generated password starts with it, and nothing else holds it: any trace is a leak."""

SCHEMES = ["postgresql", "postgres", "redis", "rediss"]
HOSTS = ["127.0.0.1", "[::1", "[bad]", "[::1]", "::1", "", "[", "]", "[::1]:x", "h]", "[:"]
PORTS = ["", ":1", ":x", ":99999", ":-1", ":", ":1:2"]
TAILS = ["", "/0", "/db", "/db?sslmode=require", "?x=%zz", "#frag", "/0?password=" + MARK + "q"]
PASSWORDS = st.text(
    alphabet=string.ascii_letters + string.digits + "/?#[]:@!$&'()*+,;=~-._ ", max_size=10
).map(lambda tail: MARK + tail)
URLS = st.builds(
    lambda scheme, user, password, host, port, tail: (
        f"{scheme}://{user}:{password}@{host}{port}{tail}"
    ),
    st.sampled_from(SCHEMES),
    st.sampled_from(["", "u", "me@corp", "a=b", "x=y=z", "u%3Dv", "host=h user=u"]),
    PASSWORDS,
    st.sampled_from(HOSTS),
    st.sampled_from(PORTS),
    st.sampled_from(TAILS),
)
FIXED = [
    f"postgresql://u:{MARK}secret@[::1",
    f"redis://:{MARK}pw@[bad]:x/0",
    f"postgresql://u:{MARK}pa/ss@127.0.0.1/db",
    f"redis://u:{MARK}pa#ss@127.0.0.1:1/0",
    f"rediss://:{MARK}@[::1]:99999/0",
    f"postgres://u:{MARK}x@h:1:2/db",
]
WELL_FORMED = [  # parsed fine; the servers refuse these users
    f"postgresql://a=b:{MARK}pw@127.0.0.1:5432/test",
    f"redis://x=y:{MARK}pw@127.0.0.1:6379/0",
    f"postgresql://host=h user=u:{MARK}pw@127.0.0.1:5432/test",
]


def visible(error: BaseException) -> list[str]:
    """What a traceback, a log line or an error reporter shows of ``error``."""
    return ["".join(traceback.format_exception(error)), str(error), repr(error)]


def whole_chain(error: BaseException) -> list[str]:
    """Every exception linked to ``error``, the suppressed ``__context__`` included."""
    texts: list[str] = []
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        node = pending.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        texts += [str(node), repr(node), repr(node.args)]
        pending += [node.__cause__, node.__context__]
    return texts


def attempt(make: Any) -> BaseException | None:
    try:
        made = make()
    except Exception as exc:
        return exc
    close = getattr(made, "close", None)
    if callable(close) and not getattr(made, "__aenter__", None):
        close()
    return None


def assert_clean(error: BaseException | None, url: str, *, chain: bool = True) -> None:
    if error is None:
        return
    assert isinstance(error, AnikiError), f"{url!r}: raw {type(error).__name__}: {error}"
    texts = visible(error) + (whole_chain(error) if chain else [])
    for text in texts:
        assert MARK not in text, f"{url!r} leaked: {text[:400]}"


@given(st.one_of(URLS, PASSWORDS.map(lambda pw: f"host=x user=u password={pw[:6]}")))
@settings(max_examples=400, deadline=None)
def test_redact_never_raises_and_hides_the_password(url: str) -> None:
    shown = hide_password(url)
    assert MARK not in shown
    problem = url_problem(url)
    assert problem is None or MARK not in problem


@given(URLS)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_open_session_never_shows_the_password(url: str) -> None:
    assert_clean(attempt(lambda: open_session(url, "x")), url)
    assert_clean(attempt(lambda: open_session(url, "x", asynchronous=True)), url)


@pytest.mark.parametrize("url", FIXED)
def test_list_sessions_refuses_malformed_urls_without_the_password(url: str) -> None:
    with pytest.raises(UserError) as info:
        list_sessions(url)
    assert_clean(info.value, url)
    assert "***" in str(info.value)


def constructor(name: str) -> Any:
    import aniki.sessions

    return getattr(aniki.sessions, name)


@pytest.mark.parametrize(
    "name",
    [
        "PostgresSession",
        "AsyncPostgresSession",
        "RedisSession",
        "AsyncRedisSession",
    ],
)
@given(url=URLS)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_no_constructor_prints_the_password(name: str, url: str) -> None:
    error = attempt(lambda: constructor(name)("x", url))
    if error is not None:
        for text in visible(error):
            assert MARK not in text, f"{name}({url!r}) leaked: {text[:400]}"


@pytest.mark.parametrize(
    "name", ["PostgresSession", "AsyncPostgresSession", "RedisSession", "AsyncRedisSession"]
)
def test_no_constructor_keeps_the_password_in_the_error_chain(name: str) -> None:
    for url in FIXED:
        assert_clean(attempt(lambda url=url: constructor(name)("x", url)), url)


@pytest.mark.parametrize("url", FIXED[:3])
def test_the_cli_prints_no_password_and_no_traceback(url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aniki", "sessions", "list", "--store", url],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert done.returncode != 0
    output = done.stdout + done.stderr
    assert MARK not in output, output
    assert "Traceback" not in output, output
    assert "***" in output, output


@pytest.mark.parametrize(
    "args",
    [
        ["sessions", "list", "{url}"],  # a URL where no argument is taken
        ["sessions", "list", "--store", "memory:", "extra", "{url}"],
        ["sessions", "show", "x", "{url}"],
    ],
)
def test_a_misused_command_quotes_its_arguments_without_the_password(args: list[str]) -> None:
    url = FIXED[0]
    done = subprocess.run(
        [sys.executable, "-m", "aniki", *(arg.replace("{url}", url) for arg in args)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    assert done.returncode == 2
    output = done.stdout + done.stderr
    assert "unexpected extra argument" in output, output
    assert MARK not in output, output
    assert "***" in output, output


@pytest.mark.parametrize("url", WELL_FORMED)
def test_a_refused_login_never_shows_the_password(url: str) -> None:
    """User names holding ``=`` (a keyword DSN look-alike) are still URLs: the password the
    server refused appears nowhere, in the error, its chain or its traceback."""
    assert MARK not in hide_password(url)
    error = attempt(lambda: open_session(url, "x").get_messages())
    assert error is not None, f"{hide_password(url)} logged in"
    assert_clean(error, url)
