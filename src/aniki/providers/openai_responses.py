"""``OpenAIResponsesProvider``: OpenAI's Responses API, stateless, reasoning sent back."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from .._secrets import scrub
from ..errors import BadRequestError, ContextWindowExceededError, ProviderError, RateLimitError
from ._calls import complete_call, stream_call
from ._errors import ErrorContext, context_window_exceeded
from ._openai_base import VENDOR, OpenAIClientBase
from ._responses_stream import EventAccumulator
from ._responses_wire import PROVIDER, build_params, parse_response
from ._stream import ReplyFailed
from .base import ModelRequest, ModelResponse, ModelStreamEvent

__all__ = ["OpenAIResponsesProvider"]

_NO_ENCRYPTED_HINT = (
    "; this model has no encrypted reasoning to include: pass encrypted_reasoning=False to "
    "OpenAIResponsesProvider"
)


class OpenAIResponsesProvider(OpenAIClientBase):
    """OpenAI's Responses API over the official ``openai`` client, without server state.

    Example::

        from aniki import Agent
        from aniki.providers import OpenAIResponsesProvider

        agent = Agent("Assistant", model="o4-mini", provider=OpenAIResponsesProvider())

    Every request carries the whole history and asks the server to store nothing
    (``store=False``). A reasoning model's reasoning comes back encrypted
    (``include=["reasoning.encrypted_content"]``), is kept on the assistant message as
    :class:`~aniki.Reasoning` parts, and is sent back with the turn it led to, so the model
    keeps its chain of thought across tool calls; another provider's reasoning is never sent.
    System messages go as ``developer`` messages, in place. The key, URL, retries and client
    options work as in :class:`~aniki.providers.OpenAIProvider`.
    """

    name = PROVIDER

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int = 2,
        encrypted_reasoning: bool = True,
        **client_options: Any,
    ) -> None:
        """
        Args:
            api_key: the API key; default ``OPENAI_API_KEY``.
            base_url: the API root (``.../v1``); default ``OPENAI_BASE_URL``, else OpenAI.
            timeout: seconds a request may take (per read while streaming); ``None`` keeps
                the client's default (10 minutes, 5 s to connect).
            max_retries: how many times the client retries a failed request.
            encrypted_reasoning: ask for each reasoning item's encrypted content, so that it
                can be sent back. Models without reasoning (``gpt-4o``, ``gpt-4.1``) refuse
                the request that asks: turn it off for them.
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
        self.encrypted_reasoning = encrypted_reasoning

    def _parse(self, data: Any) -> ModelResponse:
        try:
            return parse_response(data)
        except ReplyFailed as exc:
            raise _failed_reply_error(exc, self._errors) from exc

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make one Responses call and return its reply."""
        client = await self._clients.get()
        params = build_params(request, encrypted_reasoning=self.encrypted_reasoning)
        with _hint_on_refused_include():
            return await complete_call(
                client.responses.create(**params), self._parse, self._errors, VENDOR
            )

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Make one streamed call: reasoning and text deltas, then the whole reply last."""
        client = await self._clients.get()
        params = build_params(request, encrypted_reasoning=self.encrypted_reasoning)
        call = client.responses.create(**params, stream=True)
        # Closed explicitly so that a consumer who stops early frees the connection now.
        with _hint_on_refused_include():
            async with contextlib.aclosing(
                stream_call(call, EventAccumulator(), self._errors, VENDOR)
            ) as events:
                async for event in events:
                    yield event


@contextlib.contextmanager
def _hint_on_refused_include() -> Iterator[None]:
    """Say what to do when a model refuses ``include=["reasoning.encrypted_content"]``."""
    try:
        yield
    except BadRequestError as exc:
        error = exc.body.get("error", exc.body) if isinstance(exc.body, Mapping) else None
        if not isinstance(error, Mapping) or error.get("param") != "include":
            raise
        raise type(exc)(
            f"{exc}{_NO_ENCRYPTED_HINT}",
            provider=exc.provider,
            status_code=exc.status_code,
            body=exc.body,
        ) from exc.__cause__


def _failed_reply_error(exc: ReplyFailed, ctx: ErrorContext) -> ProviderError:
    """The aniki error for a whole reply whose status says it failed.

    A stream that fails part-way is a :class:`~aniki.StreamInterruptedError` instead, as
    with every provider.
    """
    code = exc.body.get("code") if isinstance(exc.body, Mapping) else None
    too_long = context_window_exceeded(exc.body, str(exc))  # decided on the unscrubbed text
    scrub(exc, ctx.secret)  # it becomes the __cause__
    body = exc.body
    where = f"{ctx.provider}: the model could not produce a reply: {exc}"
    fields: dict[str, Any] = {"provider": ctx.provider, "body": body}
    if code == "rate_limit_exceeded":
        return RateLimitError(
            f"{where}. Rate limited: slow down, or check the account's quota", **fields
        )
    if too_long:
        return ContextWindowExceededError(
            f"{where}. The conversation is longer than the model's context window: keep "
            "less history (TokenBudgetSession, SummarizingSession) or use a larger model",
            **fields,
        )
    if isinstance(code, str) and code not in ("server_error", "vector_store_timeout"):
        return BadRequestError(f"{where}. The request was refused as invalid", **fields)
    return ProviderError(f"{where}. Try again later", **fields)
