"""What both providers over the official ``openai`` client share: the key and URL (from the
arguments or the environment), retries and client options, one client per event loop, the
error context, and a repr that shows no secret."""

from __future__ import annotations

import json
from typing import Any

import openai

from .._secrets import hide_password
from ._client import (
    PerLoopClient,
    check_client_options,
    check_retry_options,
    from_env,
)
from ._compat import unsupported_shape
from ._errors import ErrorContext, VendorErrors, client_build_error, missing_key_error

__all__ = ["ENV_KEY", "VENDOR", "OpenAIClientBase"]

ENV_KEY = "OPENAI_API_KEY"
_ENV_URL = "OPENAI_BASE_URL"
_DEFAULT_URL = "https://api.openai.com/v1"
VENDOR = VendorErrors(
    base=openai.OpenAIError,
    status=openai.APIStatusError,
    timeout=openai.APITimeoutError,
    connection=openai.APIConnectionError,
)


class OpenAIClientBase:
    """The client plumbing of :class:`~aniki.providers.OpenAIProvider` and
    :class:`~aniki.providers.OpenAIResponsesProvider`."""

    name = "openai"
    _no_key_hint = ""
    """Said after the missing-key error (how to reach a server that checks no key)."""

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None,
        *,
        timeout: float | None,
        max_retries: int,
        client_options: dict[str, Any],
    ) -> None:
        check_retry_options(timeout, max_retries)
        check_client_options(openai.AsyncOpenAI, client_options)
        self._api_key = from_env(api_key, ENV_KEY)
        self.base_url: str = from_env(base_url, _ENV_URL) or _DEFAULT_URL
        """Where requests go."""
        self.timeout = timeout
        self.max_retries = max_retries
        self._client_options = client_options
        self._errors = ErrorContext(
            provider=self.name,
            env_var=ENV_KEY,
            base_url=hide_password(self.base_url),
            secret=self._api_key or None,
            base_path="/v1",
        )
        self._clients: PerLoopClient[openai.AsyncOpenAI] = PerLoopClient(self._new_client)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(base_url={hide_password(self.base_url)!r}, "
            f"max_retries={self.max_retries}, timeout={self.timeout})"
        )

    def _new_client(self) -> openai.AsyncOpenAI:
        if not self._api_key:
            raise missing_key_error(self._errors, hint=self._no_key_hint)
        options = dict(self._client_options)
        if "http_client" not in options:
            # A refusal of the request's shape is answered alike every time: not retried.
            options["http_client"] = openai.DefaultAsyncHttpxClient(
                event_hooks={"response": [_no_retry_for_refused_shape]}
            )
        if self.timeout is not None:
            options["timeout"] = self.timeout
        try:
            return openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                max_retries=self.max_retries,
                **options,
            )
        except Exception as exc:  # whatever the client makes of bad options
            raise client_build_error(exc, self._errors) from exc

    async def aclose(self) -> None:
        """Close the HTTP connections this provider holds in the running event loop."""
        await self._clients.aclose()


async def _no_retry_for_refused_shape(response: Any) -> None:
    """Mark a 5xx that says the request's shape is not one the server takes as not to be
    retried (``x-should-retry: false``, which the client obeys): llama-cpp-python answers a
    ``response_format`` it does not know with HTTP 500, the same on every attempt."""
    if response.status_code < 500 or "x-should-retry" in response.headers:
        return
    await response.aread()  # an error body is small, and the client reads it next anyway
    try:
        body: Any = json.loads(response.content)
    except ValueError:
        body = response.text
    if unsupported_shape(body) is not None:
        response.headers["x-should-retry"] = "false"
