"""Guardrails: checks that run beside an agent's model and can stop its run.

An **input guardrail** sees the user's message; it runs concurrently with the run's first
model call, and the run goes no further than that call until every input guardrail has
passed. An **output guardrail** sees the final reply (its validated output, with an output
schema) before it is stored. A check is a function of the run's :class:`~aniki.Context` and
what it checks, sync or async (a sync one runs in a worker thread); it may run another
agent. It returns ``None`` (or ``True``) to let the run go on, or a reason (a ``str``, or
``False`` for none) to trip, and the run stops with :class:`~aniki.GuardrailTripped`. An
output guardrail given a ``replacement`` stores and returns that text in place of a
reply it trips on, and the run ends normally.

Example::

    from aniki import Agent, Guardrail

    def no_card_numbers(ctx, message):
        if any(word.isdigit() and len(word) >= 13 for word in message.content.split()):
            return "the message holds what looks like a card number"
        return None

    def on_topic(ctx, output):
        return None if "refund" not in output.lower() else "refunds are handled by people"

    agent = Agent(
        "Support", "Help with orders.", model="gpt-4o-mini",
        input_guardrails=[no_card_numbers],
        output_guardrails=[Guardrail(on_topic, replacement="A colleague will contact you.")],
    )
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from .errors import UserError

__all__ = ["Guardrail", "GuardrailCheck", "GuardrailStage", "guardrails_of"]

GuardrailCheck: TypeAlias = Callable[..., "str | bool | Awaitable[str | bool | None] | None"]
"""``(ctx, checked) -> None | True`` (pass) ``| str | False`` (trip), sync or async: ``checked``
is the user's :class:`~aniki.Message` for an input guardrail, the run's output (the reply's
text, or the value its output schema validated) for an output guardrail."""

GuardrailStage: TypeAlias = Literal["input", "output"]
"""What a guardrail checks: the user's message, or the final reply."""


@dataclass(frozen=True, slots=True)
class Guardrail:
    """A guardrail check with its options (a plain function given to ``input_guardrails`` or
    ``output_guardrails`` is wrapped in one with the defaults).

    Example::

        Guardrail(no_legal_advice, name="legal", replacement="Please ask a lawyer.")
    """

    check: GuardrailCheck
    """The function that decides (see :data:`GuardrailCheck`)."""
    name: str = ""
    """How errors, logs and traces name it (default: the function's name)."""
    replacement: str | None = None
    """Output guardrails only: the reply stored and returned in place of one this guardrail
    trips on (the run then ends normally, and the trip is logged); ``None``: the run raises
    :class:`~aniki.GuardrailTripped` and stores no reply."""

    def __post_init__(self) -> None:
        if not callable(self.check):
            raise UserError(
                f"a guardrail must be a function (ctx, checked) -> None or a reason, "
                f"got {type(self.check).__name__}"
            )
        if not isinstance(self.name, str):
            raise UserError(f"a guardrail's name must be a string, got {self.name!r}")
        if not self.name:
            named = getattr(self.check, "__name__", None) or type(self.check).__name__
            object.__setattr__(self, "name", str(named))
        if self.replacement is not None and (
            not isinstance(self.replacement, str) or not self.replacement
        ):
            raise UserError(
                f"guardrail {self.name!r}: replacement must be a non-empty string or None"
            )


def guardrails_of(
    given: Sequence[Guardrail | GuardrailCheck],
    stage: GuardrailStage,
    *,
    agent: str,
    structured: bool,
) -> tuple[Guardrail, ...]:
    """``given`` as :class:`Guardrail` objects; ``UserError`` for one that is neither a
    function nor a ``Guardrail``, or a ``replacement`` where it cannot apply (an input
    guardrail, or an agent whose replies must fit an output schema)."""
    if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
        raise UserError(f"{stage}_guardrails takes a list of functions or Guardrails")
    made = tuple(item if isinstance(item, Guardrail) else Guardrail(item) for item in given)
    for guardrail in made:
        if guardrail.replacement is None:
            continue
        if stage == "input":
            raise UserError(
                f"input guardrail {guardrail.name!r} of agent {agent!r} has a replacement; "
                "only an output guardrail can replace what it checks"
            )
        if structured:
            raise UserError(
                f"output guardrail {guardrail.name!r} of agent {agent!r} has a text "
                "replacement, but the agent's replies must fit its output_schema; drop the "
                "replacement and catch GuardrailTripped instead"
            )
    return made
