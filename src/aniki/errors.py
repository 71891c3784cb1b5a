"""Every error aniki raises, under one root.

The tree::

    AnikiError                      root of everything aniki raises
    ├── UserError                   the SDK was misused: fix the calling code
    ├── ValidationError             a malformed message (also a ValueError)
    ├── MaxTurnsExceeded            a run used all its turns
    ├── RunTimeoutError             a run did not finish within its time limit (a TimeoutError)
    ├── OutputValidationError       the final reply does not fit the output schema
    ├── RunError                    a run cannot go on as asked
    │   ├── TurnUndoneError         the run's question was undone while it ran: no reply stored
    │   ├── RunInProgressError      another worker or resume holds the run
    │   └── GuardrailTripped        an input or output guardrail stopped the run
    ├── ToolError                   raised by a tool: its message goes to the model as the result
    ├── MCPServerError              an MCP server cannot be started, reached or listed
    ├── ProviderError               a model call failed
    │   ├── AuthenticationError     missing or rejected API key
    │   ├── RateLimitError          the provider said "slow down" (429)
    │   ├── ProviderTimeoutError    no answer in time
    │   ├── ProviderConnectionError the provider could not be reached
    │   ├── StreamInterruptedError  a streamed reply broke off part-way
    │   └── BadRequestError         the provider rejected the request (4xx)
    │       └── ContextWindowExceededError  the history is too long for the model
    └── StoreError                  a session store failed
        ├── StoreUnavailableError   the store's server or file cannot be reached
        ├── SchemaVersionError      the store was written by a newer aniki
        ├── CorruptStoreError       the store holds data aniki cannot read
        └── DecryptionError         EncryptedSession: a wrong key, or a changed ciphertext
            └── AlteredDataError    EncryptedSession: records moved, reordered, removed
                                    from the middle, relabelled or written without the key

``DecryptionError`` and ``AlteredDataError`` live in :mod:`aniki.sessions`, beside the
store that raises them (it needs the ``encryption`` extra); ``MCPServerError`` lives in
:mod:`aniki.mcp` (the ``mcp`` extra).

Errors from dependencies (HTTP clients, database drivers) are translated at the
boundary into one of these, with the original kept as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "AnikiError",
    "AuthenticationError",
    "BadRequestError",
    "ContextWindowExceededError",
    "CorruptStoreError",
    "GuardrailTripped",
    "MaxTurnsExceeded",
    "OutputValidationError",
    "ProviderConnectionError",
    "ProviderError",
    "ProviderTimeoutError",
    "RunError",
    "RunInProgressError",
    "RateLimitError",
    "RunTimeoutError",
    "SchemaVersionError",
    "StoreError",
    "StoreUnavailableError",
    "StreamInterruptedError",
    "ToolError",
    "TurnUndoneError",
    "UserError",
    "ValidationError",
]


class AnikiError(Exception):
    """Root of every error aniki raises.

    Every one pickles with its fields (a worker process, a task queue or a durable executor
    can hand it back), whatever its constructor takes: it is rebuilt from its message and
    attributes, not by calling ``__init__`` again."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuilt, (type(self), self.args, dict(self.__dict__)))


def _rebuilt(cls: type[AnikiError], args: tuple[Any, ...], state: dict[str, Any]) -> AnikiError:
    """An error of ``cls`` with ``args`` and the attributes ``state`` (see ``__reduce__``)."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class UserError(AnikiError):
    """The SDK was used in a way it does not support; the message says how to fix the call."""


class ValidationError(AnikiError, ValueError):
    """A message broke one of the rules every stored message must keep.

    Attributes:
        field: the offending field (``"role"``, ``"content"``, ``"tool_calls"``, ...).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class MaxTurnsExceeded(AnikiError):
    """A run reached ``max_turns`` model calls without a final answer.

    Every completed turn is already in the session, and every tool call is answered.

    Attributes:
        max_turns: the limit that was reached.
    """

    def __init__(self, max_turns: int) -> None:
        super().__init__(
            f"the run reached max_turns={max_turns} without a final answer; "
            "raise Runner(max_turns=...) or check why the model keeps calling tools"
        )
        self.max_turns = max_turns


class RunTimeoutError(AnikiError, TimeoutError):
    """A run did not finish within the ``timeout`` it was given.

    What the run stored follows the usual rules: ``run`` keeps every completed turn,
    ``stream`` only the user message.

    Attributes:
        timeout: the limit, in seconds.
    """

    def __init__(self, timeout: float) -> None:
        super().__init__(
            f"the run did not finish within {timeout:g} s; give it more time with timeout=, "
            "or lower max_turns"
        )
        self.timeout = timeout


class OutputValidationError(AnikiError):
    """The model's final reply does not validate against the agent's output schema.

    Attributes:
        raw: the reply text exactly as the model produced it.
        errors: the validation errors, one human-readable line each.
    """

    def __init__(self, raw: str, errors: list[str]) -> None:
        shown = "; ".join(errors[:5]) + (f" (+{len(errors) - 5} more)" if len(errors) > 5 else "")
        super().__init__(f"the model's reply does not match the output schema: {shown}")
        self.raw = raw
        self.errors = errors


class RunError(AnikiError):
    """A run cannot go on as asked; the session holds what it held before."""


class RunInProgressError(RunError):
    """Another worker, task or ``resume`` holds this run (or the held calls being resumed):
    nothing was run or stored by this call. Retry after the other one ends; a run whose
    holder died is finished by ``Runner.recover``.

    Attributes:
        run_id: the run that is held.
        session_id: the session it belongs to.
    """

    def __init__(self, run_id: str, session_id: str, detail: str = "") -> None:
        self.run_id = run_id
        self.session_id = session_id
        super().__init__(
            f"run {run_id!r} of session {session_id!r} is held by another worker or resume"
            + (f" ({detail})" if detail else "")
            + "; nothing was run twice. Wait for it, or call Runner.recover once its process "
            "has died"
        )


class TurnUndoneError(RunError):
    """The user message a run answers left its session while the run was working (another
    worker's ``undo()`` or ``clear()``), so the run stored nothing more: no answer to a
    question that is gone. The session holds what the undo left.

    Example::

        try:
            result = await runner.run(agent, message="Hi", session=session)
        except TurnUndoneError as undone:
            undone.messages  # the reply nobody asked for any more: not stored

    Attributes:
        session_id: the session's id.
        messages: what the run had yet to store (its reply, a streamed run's tool turns), as
            :class:`~aniki.Message` objects (typed loosely here: every other module imports
            this one, so it imports none of theirs).
    """

    def __init__(self, session_id: str, messages: Sequence[Any]) -> None:
        super().__init__(
            f"the user message this run answers was removed from session {session_id!r} "
            "while the run was working (undo() or clear() by another worker), so its reply "
            "was not stored; the session holds what the undo left (ask again in a new run)"
        )
        self.session_id = session_id
        self.messages = tuple(messages)


class GuardrailTripped(RunError):
    """A guardrail of the agent stopped the run (``Agent(input_guardrails=...,
    output_guardrails=...)``).

    An input guardrail that trips leaves the session holding the user message and nothing
    after it; an output guardrail that trips leaves the reply unstored (a non-streamed run
    keeps the tool turns that completed before it, as it keeps them on any error).

    Example::

        try:
            result = await runner.run(agent, message=text)
        except GuardrailTripped as tripped:
            print(tripped.stage, tripped.guardrail, tripped.reason)

    Attributes:
        guardrail: the name of the guardrail that tripped.
        stage: ``"input"`` (it checked the user message) or ``"output"`` (the final reply).
        reason: what the guardrail said.
        message: what it checked: the user's :class:`~aniki.Message`, or the reply's (typed
            loosely here: every other module imports this one, so it imports none of theirs).
    """

    def __init__(self, guardrail: str, stage: str, reason: str, message: Any = None) -> None:
        super().__init__(f"{stage} guardrail {guardrail!r} tripped: {reason}")
        self.guardrail = guardrail
        self.stage = stage
        self.reason = reason
        self.message = message


class ToolError(AnikiError):
    """Raise from a tool to send the model exactly this message as the tool's result.

    Any other exception from a tool is reported to the model too, with its type; use
    ``ToolError`` for failures the model can act on.

    Example::

        @tool
        def divide(a: float, b: float) -> float:
            if b == 0:
                raise ToolError("b must not be 0; ask the user for another divisor")
            return a / b
    """


class ProviderError(AnikiError):
    """A model call failed.

    Attributes:
        provider: the provider's name (``"openai"``, ``"anthropic"``, ...), when known.
        status_code: the HTTP status, when the provider answered with one.
        body: the provider's error body, when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str | None = None,
        status_code: int | None = None,
        body: Any = None,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status_code = status_code
        self.body = body


class AuthenticationError(ProviderError):
    """The API key is missing or was rejected.

    Attributes:
        env_var: the environment variable the provider reads its key from.
    """

    def __init__(self, message: str, *, env_var: str | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.env_var = env_var


class RateLimitError(ProviderError):
    """The provider is rate limiting (HTTP 429) and retries ran out.

    Attributes:
        retry_after: seconds the provider asked to wait, when it said.
    """

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.retry_after = retry_after


class ProviderTimeoutError(ProviderError):
    """The provider did not answer within the timeout."""


class ProviderConnectionError(ProviderError):
    """The provider could not be reached (refused, DNS), or the connection closed before the
    whole reply arrived (reset, a body cut off); the message says which."""


class StreamInterruptedError(ProviderError):
    """A streamed reply broke off before the provider said it was finished."""


class BadRequestError(ProviderError):
    """The provider rejected the request as invalid (a 4xx other than 401, 403, 429)."""


class ContextWindowExceededError(BadRequestError):
    """The request is longer than the model's context window.

    A history policy (``TokenBudgetSession``, ``SummarizingSession``) prevents it.
    """


class StoreError(AnikiError):
    """A session store failed.

    Attributes:
        store: a description of the store (its URL or path, passwords redacted).
    """

    def __init__(self, message: str, *, store: str | None = None) -> None:
        super().__init__(f"{message} [store: {store}]" if store else message)
        self.store = store


class StoreUnavailableError(StoreError):
    """The store's server, file or directory cannot be reached or opened."""


class SchemaVersionError(StoreError):
    """The store was written by a newer aniki whose format this version cannot read."""


class CorruptStoreError(StoreError):
    """The store holds data that is not a valid aniki store (corrupt or foreign)."""
