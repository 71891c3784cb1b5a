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

from typing import TYPE_CHECKING, Any

from ._run.streaming import StreamedRun
from .agent import Agent, ToolMiddleware
from .context import Context
from .errors import (
    AnikiError,
    AuthenticationError,
    BadRequestError,
    ContextWindowExceededError,
    CorruptStoreError,
    GuardrailTripped,
    MaxTurnsExceeded,
    OutputValidationError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitError,
    RunError,
    RunInProgressError,
    RunTimeoutError,
    SchemaVersionError,
    StoreError,
    StoreUnavailableError,
    StreamInterruptedError,
    ToolError,
    TurnUndoneError,
    UserError,
    ValidationError,
)
from .events import (
    AgentUpdated,
    ReasoningDelta,
    RunCompleted,
    ServerLog,
    StreamEvent,
    StreamRestarted,
    TextDelta,
    ToolCallCompleted,
    ToolCallStarted,
    ToolProgress,
)
from .guardrails import Guardrail
from .memory import Memory
from .messages import Attachment, Message, MessageLike, Reasoning, Role, ToolCall
from .providers.base import ModelRequest, ModelResponse, ModelSettings, Provider, ToolDefinition
from .reports import ContextReport, ContextTokens
from .result import RunResult
from .runner import Runner
from .sessions.base import AsyncSession, Session, SessionInfo
from .sessions.memory import InMemorySession
from .tools import Tool, tool
from .usage import Usage

if TYPE_CHECKING:
    from .sessions import (
        AsyncPostgresSession,
        AsyncRedisSession,
        EncryptedSession,
        FileSession,
        PostgresSession,
        RedisSession,
        SQLiteSession,
        SummarizingSession,
        TokenBudgetSession,
        WindowedSession,
        open_session,
        open_store,
    )

# The one place the version is written: pyproject.toml reads it from here when building.
__version__ = "0.1.0"

__all__ = [
    "Agent",
    "AgentUpdated",
    "AnikiError",
    "AsyncPostgresSession",
    "AsyncRedisSession",
    "AsyncSession",
    "Attachment",
    "AuthenticationError",
    "BadRequestError",
    "Context",
    "ContextReport",
    "ContextTokens",
    "ContextWindowExceededError",
    "CorruptStoreError",
    "EncryptedSession",
    "FileSession",
    "Guardrail",
    "GuardrailTripped",
    "InMemorySession",
    "MaxTurnsExceeded",
    "Memory",
    "Message",
    "MessageLike",
    "ModelRequest",
    "ModelResponse",
    "ModelSettings",
    "OutputValidationError",
    "PostgresSession",
    "Provider",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RateLimitError",
    "Reasoning",
    "ReasoningDelta",
    "RedisSession",
    "Role",
    "RunCompleted",
    "RunError",
    "RunInProgressError",
    "RunResult",
    "RunTimeoutError",
    "Runner",
    "SQLiteSession",
    "SchemaVersionError",
    "ServerLog",
    "Session",
    "SessionInfo",
    "StoreError",
    "StoreUnavailableError",
    "StreamEvent",
    "StreamInterruptedError",
    "StreamRestarted",
    "StreamedRun",
    "SummarizingSession",
    "TextDelta",
    "TokenBudgetSession",
    "Tool",
    "ToolCall",
    "ToolCallCompleted",
    "ToolCallStarted",
    "ToolDefinition",
    "ToolError",
    "ToolMiddleware",
    "ToolProgress",
    "TurnUndoneError",
    "Usage",
    "UserError",
    "ValidationError",
    "WindowedSession",
    "open_session",
    "open_store",
    "tool",
]


# The stores and policies are imported on first use: `import aniki` stays fast, and never
# imports redis or psycopg.
_LAZY = {
    "AsyncPostgresSession",
    "AsyncRedisSession",
    "EncryptedSession",
    "FileSession",
    "PostgresSession",
    "RedisSession",
    "SQLiteSession",
    "SummarizingSession",
    "TokenBudgetSession",
    "WindowedSession",
    "open_session",
    "open_store",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import sessions

        value = getattr(sessions, name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
