"""Turning a vendor client's failures into aniki errors, once for every provider.

The vendor clients (``openai``, ``anthropic``) raise their own exception trees. Each provider
calls :func:`translate` at its boundary, so callers only ever see :class:`~aniki.ProviderError`
and its subclasses, with the vendor's exception kept as ``__cause__``:

=====================================  ==========================================
what happened                           aniki error
=====================================  ==========================================
no API key configured                   ``AuthenticationError`` (names the env var)
HTTP 401, 403                           ``AuthenticationError`` (names the env var)
HTTP 429                                ``RateLimitError`` (``retry_after`` set)
HTTP 408, client-side timeout           ``ProviderTimeoutError``
refused / DNS failure                   ``ProviderConnectionError`` ("could not connect")
reset or cut off once connected         ``ProviderConnectionError`` (says it connected)
HTTP 4xx naming the context length      ``ContextWindowExceededError``
HTTP 4xx/5xx refusing the request shape ``BadRequestError`` (names ``compat=``)
any other HTTP 4xx                      ``BadRequestError``
HTTP 5xx, anything else                 ``ProviderError``
a stream that broke part-way            ``StreamInterruptedError``
=====================================  ==========================================

The API key never appears in an error: messages are composed here, and the server's own
text and body are scrubbed of the key in case a server echoes it. So are the vendor's
exceptions kept as ``__cause__``, which every traceback prints. An error is classified
before anything is scrubbed, and only a key that can be a secret is scrubbed (both with
:mod:`aniki._secrets`): a local server's placeholder key (``"x"``, ``"EMPTY"``) is no secret.

What the server said is quoted whole up to a few thousand characters, and by its start and
its end beyond that (:mod:`._server_text`), with the credentials it echoes taken out.
"""

from __future__ import annotations

import email.utils
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .._secrets import redact, scrub
from ..errors import (
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    StreamInterruptedError,
    UserError,
)
from ._server_text import context_window_exceeded, server_message

__all__ = [
    "ErrorContext",
    "VendorErrors",
    "client_build_error",
    "context_window_exceeded",
    "error_for_status",
    "missing_key_error",
    "parse_retry_after",
    "server_message",
    "stream_interrupted",
    "translate",
    "v1_hint",
]


@dataclass(frozen=True, slots=True)
class ErrorContext:
    """Who failed, so that errors can say what to do next."""

    provider: str
    """The provider's registry name (``"openai"``, ``"anthropic"``)."""
    env_var: str
    """The environment variable the API key is read from."""
    base_url: str
    """Where requests go (without credentials), for connection errors."""
    secret: str | None = None
    """The API key, scrubbed from every message and body."""
    base_path: str | None = None
    """The path a base URL of this API ends with (``"/v1"`` for OpenAI-compatible servers),
    suggested by the error for an HTTP 404 from a base URL without it."""
    compat: str | None = None
    """The server profile requests are shaped for (``OpenAIProvider(compat=...)``), named by
    the error for a request whose shape the server refused; ``None`` for other providers."""


@dataclass(frozen=True, slots=True)
class VendorErrors:
    """A vendor client's exception classes, so that :func:`translate` needs no import."""

    base: type[BaseException]
    """The root of the client's exceptions."""
    status: type[BaseException]
    """Raised for an HTTP error status; has ``status_code``, ``response`` and ``body``."""
    timeout: type[BaseException]
    """Raised when a request timed out (a subclass of ``connection``)."""
    connection: type[BaseException]
    """Raised when the server could not be reached."""


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: float | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {key.lower(): value for key, value in headers.items()}
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = lowered.get(name)
        if raw is None:
            continue
        try:
            seconds = float(raw) / scale
        except ValueError:
            continue
        return seconds if math.isfinite(seconds) and seconds >= 0 else None
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    parsed = email.utils.parsedate_tz(raw)
    if parsed is None:
        return None
    return max(0.0, email.utils.mktime_tz(parsed) - (time.time() if now is None else now))


def missing_key_error(ctx: ErrorContext, *, hint: str = "") -> AuthenticationError:
    """The error for a provider that has no API key at all (raised before any request)."""
    return AuthenticationError(
        f"{ctx.provider}: no API key: set the {ctx.env_var} environment variable or pass "
        f"api_key=...{hint}",
        env_var=ctx.env_var,
        provider=ctx.provider,
    )


def client_build_error(exc: BaseException, ctx: ErrorContext) -> UserError:
    """The error for options the vendor client refused when it was being built."""
    scrub(exc, ctx.secret)
    return UserError(
        f"{ctx.provider}: the client could not be built with these options: "
        f"{redact(str(exc), ctx.secret)}"
    )


def _sentence(text: str) -> str:
    """``text`` ended as a sentence: a server's own text often ends with its period."""
    return text if text.endswith((".", "!", "?")) else f"{text}."


def v1_hint(ctx: ErrorContext) -> str | None:
    """For an HTTP 404: where the API may answer, when the base URL lacks the API's path."""
    path = ctx.base_path
    if path is None or ctx.base_url.rstrip("/").endswith(path):
        return None
    parts = urlsplit(ctx.base_url)
    suggested = urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))
    return (
        f"OpenAI-compatible servers (Ollama, vLLM, llama.cpp, LM Studio) answer under {path}: "
        f"try base_url={suggested!r}"
    )


def error_for_status(
    status: int,
    body: Any,
    *,
    headers: Mapping[str, str] | None,
    ctx: ErrorContext,
) -> ProviderError:
    """The aniki error for an HTTP error status, with the server's explanation in it."""
    too_long = context_window_exceeded(body)  # decided on what the server said, unscrubbed
    body = redact(body, ctx.secret)
    said = server_message(body)
    detail = f": {said}" if said else ""
    fields: dict[str, Any] = {"provider": ctx.provider, "status_code": status, "body": body}
    where = _sentence(f"{ctx.provider} answered HTTP {status}{detail}")
    if status in (401, 403):
        return AuthenticationError(
            f"{where} The API key was rejected: check {ctx.env_var} (or the api_key= you "
            "passed) and that the key may use this model",
            env_var=ctx.env_var,
            **fields,
        )
    if status == 429:
        retry_after = parse_retry_after(headers)
        wait = f" (it asked to wait {retry_after:g}s)" if retry_after is not None else ""
        return RateLimitError(
            f"{_sentence(f'{ctx.provider} answered HTTP 429{wait}{detail}')} Rate limited "
            "after the client's retries: slow down, raise max_retries=, or check the "
            "account's quota",
            retry_after=retry_after,
            **fields,
        )
    if status == 408:
        return ProviderTimeoutError(f"{where} The server timed out the request", **fields)
    from ._compat import unsupported_shape  # here: ``import aniki`` should not pay for it

    refused = unsupported_shape(body) if status >= 400 and not too_long else None
    if refused is not None:
        return BadRequestError(f"{where} {_refused_hint(refused, ctx)}", **fields)
    if 400 <= status < 500:
        if too_long:
            return ContextWindowExceededError(
                f"{where} The conversation is longer than the model's context window: keep "
                "less history (TokenBudgetSession, SummarizingSession) or use a larger model",
                **fields,
            )
        hint = v1_hint(ctx) if status == 404 else None
        if hint is not None:
            return BadRequestError(f"{where} No such endpoint at this base URL: {hint}", **fields)
        return BadRequestError(f"{where} The request was rejected as invalid", **fields)
    if status >= 500:
        return ProviderError(
            f"{where} The server failed after the client's retries; try again later",
            **fields,
        )
    return ProviderError(where, **fields)


def _refused_hint(refused: str, ctx: ErrorContext) -> str:
    said = f"The server does not take {refused} (it answers the same every time)"
    if ctx.compat is None:
        return f"{said}; point base_url at a server that takes this API's whole request shape"
    return (
        f"{said}, and requests were shaped for compat={ctx.compat!r}: pass "
        "OpenAIProvider(compat=...) naming the server ('llama.cpp', 'vllm', 'ollama'), or "
        "compat='auto' to ask the server what it is"
    )


def _headers_of(exc: BaseException) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return headers if isinstance(headers, Mapping) else None


def translate(exc: BaseException, ctx: ErrorContext, vendor: VendorErrors) -> ProviderError:
    """The aniki error for an exception a vendor client raised (``raise ... from exc``).

    ``exc`` (and what is chained to it) is scrubbed of the key as well, once the error is
    classified: scrubbing first could hide what the server said.
    """
    try:
        return _classify(exc, ctx, vendor)
    finally:
        scrub(exc, ctx.secret)


# The HTTP library's names for failures that happen only once connected: reading the reply,
# writing the request, or a reply that broke the protocol (a body shorter than announced).
_AFTER_CONNECTING = frozenset({"ReadError", "WriteError", "RemoteProtocolError"})


def _connected(exc: BaseException) -> bool:
    """Whether a connection failure happened after the connection was made (by the names
    of the exceptions chained to it: the HTTP library is the vendor client's to choose)."""
    node: BaseException | None = exc
    visited: set[int] = set()
    while node is not None and id(node) not in visited:
        if any(cls.__name__ in _AFTER_CONNECTING for cls in type(node).__mro__):
            return True
        visited.add(id(node))
        node = node.__cause__ or node.__context__
    return False


def _classify(exc: BaseException, ctx: ErrorContext, vendor: VendorErrors) -> ProviderError:
    if isinstance(exc, vendor.status):
        status = getattr(exc, "status_code", None)
        if isinstance(status, int):
            return error_for_status(
                status, getattr(exc, "body", None), headers=_headers_of(exc), ctx=ctx
            )
    if isinstance(exc, vendor.timeout):
        return ProviderTimeoutError(
            f"{ctx.provider}: no answer from {ctx.base_url} in time (after the client's "
            "retries); raise timeout= or check the server's load",
            provider=ctx.provider,
        )
    if isinstance(exc, vendor.connection):
        cause = exc.__cause__ or exc.__context__
        reason = f" ({redact(str(cause), ctx.secret)})" if cause and str(cause) else ""
        if _connected(exc):
            return ProviderConnectionError(
                f"{ctx.provider}: connected to {ctx.base_url}, but the connection closed "
                f"before the whole reply arrived{reason}; retry the call, and if it keeps "
                "happening check the server's log and any proxy in between",
                provider=ctx.provider,
            )
        return ProviderConnectionError(
            f"{ctx.provider}: could not connect to {ctx.base_url}{reason}; check base_url= "
            "and that the server is running and reachable",
            provider=ctx.provider,
        )
    body = redact(getattr(exc, "body", None), ctx.secret)
    text = redact(str(exc), ctx.secret)
    return ProviderError(
        f"{ctx.provider}: the model call failed: {type(exc).__name__}: {text}",
        provider=ctx.provider,
        body=body,
    )


def stream_interrupted(
    reason: str, ctx: ErrorContext, *, body: Any = None, status_code: int | None = None
) -> StreamInterruptedError:
    """The error for a streamed reply that broke off before the provider finished it."""
    return StreamInterruptedError(
        f"{ctx.provider}: the streamed reply broke off part-way ({redact(reason, ctx.secret)}); "
        "its partial text is void. Retry the call",
        provider=ctx.provider,
        status_code=status_code,
        body=redact(body, ctx.secret),
    )
