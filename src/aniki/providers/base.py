"""What a provider receives and returns, and the ``Provider`` protocol itself."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias, TypedDict, runtime_checkable

from ..errors import ValidationError
from ..events import ReasoningDelta, TextDelta
from ..messages import Message, Reasoning, ToolCall
from ..usage import Usage

__all__ = [
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "ModelStreamEvent",
    "Provider",
    "ToolDefinition",
]


class ModelSettings(TypedDict, total=False):
    """Sampling and request options; each provider maps the ones its API has.

    Settings merge with ``|``: the agent's, then the run's, the later winning.
    """

    temperature: float
    """Sampling temperature."""
    max_tokens: int
    """The most tokens the reply may have."""
    top_p: float
    """Nucleus sampling mass."""
    stop: list[str]
    """Sequences that end the reply."""
    seed: int
    """Seed for providers that sample deterministically with one."""
    presence_penalty: float
    """Penalty for tokens already present (OpenAI-compatible APIs)."""
    frequency_penalty: float
    """Penalty by token frequency (OpenAI-compatible APIs)."""
    parallel_tool_calls: bool
    """Whether the model may ask for several tools in one reply."""
    tool_choice: str
    """``"auto"``, ``"required"``, ``"none"``, or a tool's name."""
    timeout: float
    """Seconds one model call may take."""
    extra_body: dict[str, Any]
    """Extra JSON fields sent as they are (provider-specific options)."""
    prompt_cache: bool
    """Ask the provider to cache the request's prefix (default on). Anthropic caches only at
    ``cache_control`` breakpoints, which the provider then places (at most four): ``False``
    sends none. OpenAI caches every long prompt by itself, whatever this says."""
    prompt_cache_key: str
    """A key grouping requests that share a prefix, sent to OpenAI as ``prompt_cache_key`` so
    that they reach the same cache (one per conversation or per user, say)."""
    strict_schemas: bool
    """Send tool and output schemas in OpenAI's strict mode, rewritten for it where they can
    be (default on): the model's arguments and replies then always match them. ``False``
    sends them as they are (for a compatible server that refuses ``strict``)."""


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as the model sees it."""

    name: str
    """The tool's name."""
    description: str
    """What it does, for the model."""
    parameters: dict[str, Any]
    """A JSON schema (``type: object``) of its arguments."""


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything a provider needs for one model call.

    ``messages[0]`` is the system message holding the agent's instructions when they are
    non-empty, followed by the history (as the session's policy selected it), in order.
    """

    model: str
    """The model name."""
    messages: tuple[Message, ...]
    """The conversation to send."""
    tools: tuple[ToolDefinition, ...] = ()
    """The tools the model may call."""
    output_schema: dict[str, Any] | None = None
    """A JSON schema the final reply must match, when the agent has one."""
    settings: ModelSettings = field(default_factory=lambda: ModelSettings())
    """Sampling and request options."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    """One model reply."""

    content: str = ""
    """The reply text."""
    tool_calls: tuple[ToolCall, ...] = ()
    """The tool calls it asks for."""
    usage: Usage | None = None
    """What the call cost, when the provider reported it."""
    finish_reason: str | None = None
    """Why the model stopped (``"stop"``, ``"tool_calls"``, ``"length"``, ...)."""
    model: str | None = None
    """The model that answered, when the provider said."""
    reasoning: tuple[Reasoning, ...] = ()
    """The model's thinking before the reply, verbatim (signatures included)."""
    id: str | None = None
    """The provider's id for the reply (``chatcmpl-...``, ``resp_...``, ``msg_...``), when it
    gave one."""

    def to_message(self, *, model: str | None = None) -> Message:
        """The reply as an assistant :class:`~aniki.Message`, carrying :attr:`usage` and the
        model that answered (``model`` when the provider did not say)."""
        try:
            return Message(
                role="assistant",
                content=self.content,
                tool_calls=self.tool_calls,
                reasoning=self.reasoning,
                model=self.model or model or None,
                usage=self.usage,
            )
        except ValidationError as exc:
            raise ValidationError(
                f"the model's reply is not a valid assistant message "
                f"(finish_reason={self.finish_reason!r}): {exc}",
                field=exc.field,
            ) from None


ModelStreamEvent: TypeAlias = "TextDelta | ReasoningDelta | ModelResponse"
"""What ``Provider.stream`` yields: text and reasoning deltas, then the whole reply last."""


@runtime_checkable
class Provider(Protocol):
    """A model backend.

    ``complete`` returns the whole reply. ``stream`` yields :class:`~aniki.TextDelta` items as
    the text arrives and ends with the complete :class:`ModelResponse`; a stream that ends
    without one is treated as broken.
    """

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Make one model call and return its reply."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """Make one streamed model call."""
        ...


def merge_settings(*layers: Mapping[str, Any] | None) -> ModelSettings:
    """Merge settings layers, later ones winning."""
    merged: dict[str, Any] = {}
    for layer in layers:
        if layer:
            merged.update(layer)
    settings: ModelSettings = ModelSettings(**merged)  # type: ignore[typeddict-item]
    return settings
