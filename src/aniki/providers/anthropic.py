"""``AnthropicProvider``: Claude models over the Messages API."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator
from typing import Any

import anthropic

from .._secrets import hide_password
from ..errors import UserError
from ._anthropic_wire import EventAccumulator, build_params, parse_message
from ._calls import complete_call, stream_call
from ._client import (
    PerLoopClient,
    check_client_options,
    check_retry_options,
    from_env,
)
from ._errors import ErrorContext, VendorErrors, client_build_error, missing_key_error
from .base import ModelRequest, ModelResponse, ModelStreamEvent

__all__ = ["AnthropicProvider"]

_ENV_KEY = "ANTHROPIC_API_KEY"
_ENV_URL = "ANTHROPIC_BASE_URL"
_ENV_TOKEN = "ANTHROPIC_AUTH_TOKEN"
_DEFAULT_URL = "https://api.anthropic.com"
_VENDOR = VendorErrors(
    base=anthropic.AnthropicError,
    status=anthropic.APIStatusError,
    timeout=anthropic.APITimeoutError,
    connection=anthropic.APIConnectionError,
)

# The client imports opentelemetry.propagate on its first request, on the event loop, and
# that import scans every installed package's entry points (60 ms, 180 ms on a busy machine).
# Imported here instead: the Runner builds a provider named by a string in a worker thread.
with contextlib.suppress(ImportError):
    importlib.import_module("opentelemetry.propagate")

# Credentials other than an API key, which the client takes instead of api_key.
_OTHER_CREDENTIALS = ("auth_token", "credentials", "config", "profile")


def _structured_output_schema(schema: dict[str, Any]) -> dict[str, Any]:
    # Structured outputs accept a subset of JSON Schema (every object closed, some
    # keywords moved into descriptions); the client ships the conversion. A schema it
    # cannot convert goes out unchanged and the API says what it dislikes.
    transform = getattr(anthropic, "transform_schema", None)  # absent from older clients
    if transform is None:
        return schema
    try:
        transformed: dict[str, Any] = transform(schema)
    except (ValueError, TypeError, KeyError):
        return schema
    return transformed


def _credentials(api_key: str | None, client_options: dict[str, Any]) -> dict[str, str | None]:
    """The credential to build the client with (``{}``: one of ``client_options`` is it)."""
    if api_key is not None:
        return {"api_key": api_key}
    if any(name in client_options for name in _OTHER_CREDENTIALS):
        return {}
    if key := from_env(None, _ENV_KEY):
        return {"api_key": key}
    if token := from_env(None, _ENV_TOKEN):
        return {"auth_token": token}
    return {"api_key": None}


class AnthropicProvider:
    """Claude over the Messages API, through the official ``anthropic`` client.

    Example::

        from aniki import Agent
        from aniki.providers import AnthropicProvider

        claude = AnthropicProvider(max_retries=4)  # reads ANTHROPIC_API_KEY
        agent = Agent(name="Assistant", model="claude-sonnet-4-5", provider=claude)

    The key and URL default to ``ANTHROPIC_API_KEY`` and ``ANTHROPIC_BASE_URL``. A missing
    key raises :class:`~aniki.AuthenticationError` at the first call, before any request is
    sent. ``max_tokens`` is required by the API: ``default_max_tokens`` is sent when the
    settings have none. An output schema uses the API's native structured outputs. Requests
    carry ``cache_control`` breakpoints (at most four) so that each call reads the previous
    call's prefix from the prompt cache; ``settings={"prompt_cache": False}`` sends none.
    """

    name = "anthropic"

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int = 2,
        default_max_tokens: int = 4096,
        **client_options: Any,
    ) -> None:
        """
        Args:
            api_key: the API key; default ``ANTHROPIC_API_KEY`` (else
                ``ANTHROPIC_AUTH_TOKEN``, sent as a bearer token).
            base_url: the API root; default ``ANTHROPIC_BASE_URL``, else Anthropic's.
            timeout: seconds a request may take (per read while streaming); ``None`` keeps
                the client's default (10 minutes, 5 s to connect).
            max_retries: how many times the client retries a failed request.
            default_max_tokens: ``max_tokens`` when the settings give none.
            client_options: passed to ``anthropic.AsyncAnthropic`` (``default_headers``,
                ``http_client``, or another credential such as ``auth_token``).
        """
        check_retry_options(timeout, max_retries)
        check_client_options(anthropic.AsyncAnthropic, client_options)
        if isinstance(default_max_tokens, bool) or not (
            isinstance(default_max_tokens, int) and default_max_tokens > 0
        ):
            raise UserError(
                f"default_max_tokens must be a positive integer: {default_max_tokens!r}"
            )
        self._credentials = _credentials(api_key, client_options)
        self.base_url: str = from_env(base_url, _ENV_URL) or _DEFAULT_URL
        """Where requests go."""
        self.timeout = timeout
        self.max_retries = max_retries
        self.default_max_tokens = default_max_tokens
        self._client_options = client_options
        secret = next(iter(self._credentials.values()), None)
        self._errors = ErrorContext(
            provider=self.name,
            env_var=_ENV_KEY,
            base_url=hide_password(self.base_url),
            secret=secret or None,
        )
        self._clients: PerLoopClient[anthropic.AsyncAnthropic] = PerLoopClient(self._new_client)

    def __repr__(self) -> str:
        return (
            f"AnthropicProvider(base_url={hide_password(self.base_url)!r}, "
            f"max_retries={self.max_retries}, timeout={self.timeout})"
        )

    def _new_client(self) -> anthropic.AsyncAnthropic:
        if self._credentials and not any(self._credentials.values()):
            raise missing_key_error(self._errors)
        options = {**self._client_options, **self._credentials}
        if self.timeout is not None:
            options["timeout"] = self.timeout
        try:
            return anthropic.AsyncAnthropic(
                base_url=self.base_url, max_retries=self.max_retries, **options
            )
        except Exception as exc:  # whatever the client makes of bad options
            raise client_build_error(exc, self._errors) from exc

    def _params(self, request: ModelRequest) -> dict[str, Any]:
        return build_params(
            request,
            default_max_tokens=self.default_max_tokens,
            transform_schema=_structured_output_schema,
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make one Messages call and return its reply."""
        client = await self._clients.get()
        call = client.messages.create(**self._params(request))
        return await complete_call(call, parse_message, self._errors, _VENDOR)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Make one streamed call: text deltas, then the whole reply as the last item."""
        client = await self._clients.get()
        call = client.messages.create(**self._params(request), stream=True)
        # Closed explicitly so that a consumer who stops early frees the connection now.
        async with contextlib.aclosing(
            stream_call(call, EventAccumulator(), self._errors, _VENDOR)
        ) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        """Close the HTTP connections this provider holds in the running event loop."""
        await self._clients.aclose()
