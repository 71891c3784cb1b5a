"""``OpenAIProvider``: OpenAI and every server that speaks its Chat Completions API."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import openai

from ._calls import complete_call, stream_call
from ._client import (
    PerLoopClient,
    check_client_options,
    check_retry_options,
    display_url,
    from_env,
)
from ._errors import ErrorContext, VendorErrors, client_build_error, missing_key_error
from ._openai_wire import ChunkAccumulator, MaxTokensParam, build_params, parse_completion
from .base import ModelRequest, ModelResponse, ModelStreamEvent

__all__ = ["OpenAIProvider"]

_ENV_KEY = "OPENAI_API_KEY"
_ENV_URL = "OPENAI_BASE_URL"
_DEFAULT_URL = "https://api.openai.com/v1"
_VENDOR = VendorErrors(
    base=openai.OpenAIError,
    status=openai.APIStatusError,
    timeout=openai.APITimeoutError,
    connection=openai.APIConnectionError,
)
_NO_KEY_HINT = (
    "; a local server that checks no key (Ollama, vLLM, llama.cpp, LM Studio) accepts any "
    'placeholder, e.g. api_key="none"'
)


class OpenAIProvider:
    """Chat Completions over the official ``openai`` client: OpenAI or a compatible server.

    Example::

        from aniki import Agent
        from aniki.providers import OpenAIProvider

        local = OpenAIProvider(base_url="http://127.0.0.1:11434/v1", api_key="ollama")
        agent = Agent(name="Assistant", model="llama3.2", provider=local)

    The key and URL default to ``OPENAI_API_KEY`` and ``OPENAI_BASE_URL``, as in the official
    client. A missing key raises :class:`~aniki.AuthenticationError` at the first call,
    before any request is sent. Retries (429 with ``Retry-After``, 5xx, timeouts, dropped
    connections) are the client's own, ``max_retries`` of them per call. OpenAI caches long
    prompts by itself; ``settings={"prompt_cache_key": ...}`` is sent as ``prompt_cache_key``.
    """

    name = "openai"

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int = 2,
        max_tokens_param: MaxTokensParam | None = None,
        stream_usage: bool = True,
        **client_options: Any,
    ) -> None:
        """
        Args:
            api_key: the API key; default ``OPENAI_API_KEY``.
            base_url: the API root (``.../v1``); default ``OPENAI_BASE_URL``, else OpenAI.
            timeout: seconds a request may take (per read while streaming); ``None`` keeps
                the client's default (10 minutes, 5 s to connect).
            max_retries: how many times the client retries a failed request.
            max_tokens_param: the field ``settings["max_tokens"]`` is sent as. Default:
                ``"max_completion_tokens"`` for OpenAI itself, ``"max_tokens"`` (which every
                compatible server reads) for any other ``base_url``.
            stream_usage: ask for token usage at the end of a stream (``stream_options``);
                turn off for a server that rejects the option.
            client_options: passed to ``openai.AsyncOpenAI`` (``default_headers``,
                ``organization``, ``http_client``, ...).
        """
        check_retry_options(timeout, max_retries)
        check_client_options(openai.AsyncOpenAI, client_options)
        self._api_key = from_env(api_key, _ENV_KEY)
        self.base_url: str = from_env(base_url, _ENV_URL) or _DEFAULT_URL
        """Where requests go."""
        self.timeout = timeout
        self.max_retries = max_retries
        is_openai = urlsplit(self.base_url).hostname == "api.openai.com"
        self.max_tokens_param: MaxTokensParam = max_tokens_param or (
            "max_completion_tokens" if is_openai else "max_tokens"
        )
        self.stream_usage = stream_usage
        self._client_options = client_options
        self._errors = ErrorContext(
            provider=self.name,
            env_var=_ENV_KEY,
            base_url=display_url(self.base_url),
            secret=self._api_key or None,
        )
        self._clients: PerLoopClient[openai.AsyncOpenAI] = PerLoopClient(self._new_client)

    def __repr__(self) -> str:
        return (
            f"OpenAIProvider(base_url={display_url(self.base_url)!r}, "
            f"max_retries={self.max_retries}, timeout={self.timeout})"
        )

    def _new_client(self) -> openai.AsyncOpenAI:
        if not self._api_key:
            raise missing_key_error(self._errors, hint=_NO_KEY_HINT)
        options = dict(self._client_options)
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

    def _params(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        return build_params(
            request,
            stream=stream,
            max_tokens_param=self.max_tokens_param,
            stream_usage=self.stream_usage,
        )

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make one Chat Completions call and return its reply."""
        client = await self._clients.get()
        call = client.chat.completions.create(**self._params(request, stream=False))
        return await complete_call(call, parse_completion, self._errors, _VENDOR)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Make one streamed call: text deltas, then the whole reply as the last item."""
        client = await self._clients.get()
        call = client.chat.completions.create(**self._params(request, stream=True), stream=True)
        # Closed explicitly so that a consumer who stops early frees the connection now.
        async with contextlib.aclosing(
            stream_call(call, ChunkAccumulator(), self._errors, _VENDOR)
        ) as events:
            async for event in events:
                yield event

    async def aclose(self) -> None:
        """Close the HTTP connections this provider holds in the running event loop."""
        await self._clients.aclose()
