"""``OpenAIProvider``: OpenAI and every server that speaks its Chat Completions API."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import openai

from ..errors import StreamInterruptedError
from ..events import TextDelta
from ._calls import complete_call, stream_call
from ._compat import PROFILES, CompatSetting, Profile, adapt_params, check_compat
from ._compat import detect_from_models as _detect_from_models
from ._openai_base import VENDOR, OpenAIClientBase
from ._openai_wire import ChunkAccumulator, MaxTokensParam, build_params, parse_completion
from ._stream import IncompleteStream
from .base import ModelRequest, ModelResponse, ModelStreamEvent

__all__ = ["OpenAIProvider"]

_NO_KEY_HINT = (
    "; a local server that checks no key (Ollama, vLLM, llama.cpp, LM Studio) accepts any "
    'placeholder, e.g. api_key="none"'
)
_DETECT_TIMEOUT = 10.0
"""Seconds asking a server what it is may take at most (less when ``timeout=`` is less)."""
_log = logging.getLogger("aniki")


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

    ``compat=`` shapes requests for the server behind ``base_url`` (``"llama.cpp"``,
    ``"vllm"``, ``"ollama"``; default ``"openai"``), or asks the server what it is once, at
    the first call (``"auto"`` or ``None``): see docs/providers.md for what each changes.
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
        compat: CompatSetting = "openai",
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
            compat: the server requests are shaped for: ``"openai"`` (OpenAI's own shape),
                ``"llama.cpp"``, ``"vllm"``, ``"ollama"``; ``"auto"`` or ``None`` asks the
                server once (``GET /models``, within ``timeout`` and at most 10 s) and falls
                back to ``"openai"`` when it does not say.
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
        self.compat: CompatSetting = check_compat(compat)
        """The ``compat=`` asked for; :attr:`profile` is the one in use once known."""
        self._profile: Profile | None = None
        if self.compat is not None and self.compat != "auto":
            self._profile = PROFILES[self.compat]
        elif is_openai:
            self._profile = PROFILES["openai"]
        self._detecting: asyncio.Task[Profile] | None = None
        if self._profile is not None:
            self._errors = dataclasses.replace(self._errors, compat=self._profile.name)

    @property
    def profile(self) -> Profile | None:
        """The server profile requests are shaped for; ``None`` until detected."""
        return self._profile

    def _params(self, request: ModelRequest, profile: Profile, *, stream: bool) -> dict[str, Any]:
        params = build_params(
            request,
            stream=stream,
            max_tokens_param=self.max_tokens_param,
            stream_usage=self.stream_usage,
        )
        return adapt_params(params, profile)

    async def _ready(self) -> tuple[openai.AsyncOpenAI, Profile]:
        client = await self._clients.get()
        if self._profile is not None:
            return client, self._profile
        task = self._detecting
        if task is None or task.get_loop() is not asyncio.get_running_loop():
            task = self._detecting = asyncio.ensure_future(self._detect(client))
        # Shielded: one caller giving up must not cancel the others' detection.
        return client, await asyncio.shield(task)

    async def _detect(self, client: openai.AsyncOpenAI) -> Profile:
        """Ask the server what it is (its ``GET /models`` answer); ``openai`` when it does not
        say, and for this call only when it could not be reached."""
        timeout = min(self.timeout or _DETECT_TIMEOUT, _DETECT_TIMEOUT)
        keep = True
        try:
            answer = await client.with_options(
                max_retries=0, timeout=timeout
            ).models.with_raw_response.list()
            name = _detect_from_models(answer.http_response.json()) or "openai"
        except openai.APIConnectionError as exc:
            # A timeout is an answer of sorts (never wait for it again); a refused connection
            # is not: the server may be starting, so the next call asks again.
            keep = isinstance(exc, openai.APITimeoutError)
            name = "openai"
        except Exception:  # an error status or a body that is not JSON: it is no known server
            name = "openai"
        profile = PROFILES[name]
        if keep:
            self._profile = profile
            self._errors = dataclasses.replace(self._errors, compat=name)
            _log.info(
                "%s at %s: requests shaped for compat=%r", self.name, self._errors.base_url, name
            )
        self._detecting = None
        return profile

    async def _complete(
        self, client: openai.AsyncOpenAI, request: ModelRequest, profile: Profile
    ) -> ModelResponse:
        call = client.chat.completions.create(**self._params(request, profile, stream=False))
        return await complete_call(call, parse_completion, self._errors, VENDOR)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make one Chat Completions call and return its reply."""
        client, profile = await self._ready()
        return await self._complete(client, request, profile)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Make one streamed call: text deltas, then the whole reply as the last item."""
        client, profile = await self._ready()
        params = self._params(request, profile, stream=True)
        call = client.chat.completions.create(**params, stream=True)
        accumulator = ChunkAccumulator()
        try:
            # Closed explicitly so that a consumer who stops early frees the connection now.
            async with contextlib.aclosing(
                stream_call(call, accumulator, self._errors, VENDOR)
            ) as events:
                async for event in events:
                    yield event
            return
        except StreamInterruptedError as exc:
            silent = accumulator.chunks == 0 and isinstance(exc.__cause__, IncompleteStream)
            if not (silent and profile.resend_empty_stream):
                raise
        # llama-cpp-python answers 200 and then ends the stream with nothing when the request
        # fails (a prompt over its context window, a tool call it cannot stream): asked
        # again without streaming, it says why, or answers.
        # It may close the connection the empty stream came on just as it is reused: a
        # request that got no answer at all is safe to send once more.
        again = client.with_options(max_retries=max(1, self.max_retries))
        response = await self._complete(again, request, profile)
        if response.content:
            yield TextDelta(response.content)
        yield response
