"""Every error aniki raises survives pickling with its message and fields, whatever its
constructor takes: a process pool, a task queue or a durable executor hands errors back that
way."""

from __future__ import annotations

import pickle

import pytest

from aniki import (
    AuthenticationError,
    GuardrailTripped,
    MaxTurnsExceeded,
    Message,
    OutputValidationError,
    RateLimitError,
    RunInProgressError,
    RunTimeoutError,
    StoreUnavailableError,
    TurnUndoneError,
    ValidationError,
)
from aniki.errors import AnikiError

ERRORS: list[AnikiError] = [
    GuardrailTripped("no_cards", "input", "a card number", Message("user", "4111")),
    RunInProgressError("run-1", "chat-1", "held by worker 2"),
    TurnUndoneError("chat-1", [Message("assistant", "late")]),
    MaxTurnsExceeded(3),
    RunTimeoutError(2.5),
    OutputValidationError("{}", ["population: Field required"]),
    ValidationError("bad role", field="role"),
    RateLimitError("slow down", retry_after=1.5, provider="openai", status_code=429),
    AuthenticationError("no key", env_var="OPENAI_API_KEY", provider="openai"),
    StoreUnavailableError("Redis is down", store="redis://127.0.0.1:6379/0"),
]


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: type(error).__name__)
def test_an_error_pickles_with_its_message_and_fields(error: AnikiError) -> None:
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error)
    assert str(copy) == str(error)
    assert copy.args == error.args
    assert copy.__dict__.keys() == error.__dict__.keys()
    for name, value in vars(error).items():
        assert getattr(copy, name) == value, name
