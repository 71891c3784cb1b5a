"""aniki: a Python SDK for LLM agents whose conversation memory is first-class.

Example::

    from aniki import Agent, Runner
    from aniki.testing import MockProvider

    provider = MockProvider()
    provider.enqueue_response(content="Nice to meet you, Lalit!")
    agent = Agent("Assistant", "You are helpful.", model="gpt-4o-mini", provider=provider)
    result = Runner().run_sync(agent, message="My name is Lalit.")
    print(result.content)
"""

from __future__ import annotations

from ._run.streaming import StreamedRun
from .agent import Agent
from .context import Context
from .errors import (
    AnikiError,
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    CorruptStoreError,
    MaxTurnsExceeded,
    OutputValidationError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    RunTimeoutError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    StreamInterruptedError,
    ToolError,
    UserError,
    ValidationError,
)
from .events import (
    RunCompleted,
    StreamEvent,
    StreamRestarted,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
)
from .memory import Memory
from .messages import Message, MessageLike, Role, ToolCall
from .providers.base import ModelRequest, ModelResponse, ModelSettings, Provider, ToolDefinition
from .result import RunResult
from .runner import Runner
from .sessions.base import AsyncSession, Session, SessionInfo
from .sessions.memory import InMemorySession
from .tools import Tool, tool
from .usage import Usage

__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AnikiError",
    "AsyncSession",
    "AuthenticationError",
    "BadRequestError",
    "Context",
    "ContextWindowExceededError",
    "CorruptStoreError",
    "InMemorySession",
    "MaxTurnsExceeded",
    "Memory",
    "Message",
    "MessageLike",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputValidationError",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "Role",
    "RunCompleted",
    "RunResult",
    "RunTimeoutError",
    "Runner",
    "SchemaVersionError",
    "Session",
    "SessionInfo",
    "StoreError",
    "StoreUnavailableError",
    "StreamEvent",
    "StreamInterruptedError",
    "StreamRestarted",
    "StreamedRun",
    "TextDelta",
    "Tool",
    "ToolCall",
    "ToolCallCompleted",
    "ToolCallStarted",
    "ToolDefinition",
    "ToolError",
    "Usage",
    "UserError",
    "ValidationError",
    "tool",
]
