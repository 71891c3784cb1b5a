"""``OpenAIProvider``: OpenAI and every server that speaks its Chat Completions API."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

from ._calls import complete_call, stream_call
from ._openai_base import VENDOR, OpenAIClientBase
from ._openai_wire import ChunkAccumulator, MaxTokensParam, build_params, parse_completion
from .base import ModelRequest, ModelResponse, ModelStreamEvent

__all__ = ["OpenAIProvider"]

_NO_KEY_HINT = (
    "; a local server that checks no key (Ollama, vLLM, llama.cpp, LM Studio) accepts any "
    'placeholder, e.g. api_key="none"'
)


class OpenAIProvider(OpenAIClientBase):
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
    _no_key_hint = _NO_KEY_HINT

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
        super().__init__(
            api_key,
            base_url,
            timeout=timeout,
            max_retries=max_retries,
            client_options=client_options,
        )
        is_openai = urlsplit(self.base_url).hostname == "api.openai.com"
        self.max_tokens_param: MaxTokensParam = max_tokens_param or (
            "max_completion_tokens" if is_openai else "max_tokens"
        )
        self.stream_usage = stream_usage

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
        return await complete_call(call, parse_completion, self._errors, VENDOR)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Make one streamed call: text deltas, then the whole reply as the last item."""
        client = await self._clients.get()
        call = client.chat.completions.create(**self._params(request, stream=True), stream=True)
        # Closed explicitly so that a consumer who stops early frees the connection now.
        async with contextlib.aclosing(
            stream_call(call, ChunkAccumulator(), self._errors, VENDOR)
        ) as events:
            async for event in events:
                yield event
