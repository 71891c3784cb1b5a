"""What the run takes from a model's reply, whichever provider sent it.

A reply comes from a server the run does not control. Two things in it would make the
stored history unusable or the accounting false; they are put right here, once for every
provider, before any tool runs and before anything is stored:

* tool calls that share an id: each call is answered under its own id, and every vendor
  refuses a history in which two results answer one id, so a repeated id is replaced by a
  fresh unique one (the first call keeps it);
* token counts that cannot be (negative, not whole numbers, more cached tokens than input
  tokens): the reply counts as one whose usage was not reported.

Each repair is logged as a warning on the ``aniki`` logger.
"""

from __future__ import annotations

import dataclasses
import logging

from ..errors import OutputValidationError
from ..messages import ToolCall
from ..providers._stream import new_call_id
from ..providers.base import ModelResponse
from ..usage import Usage

__all__ = ["correction", "usage_problem", "vetted"]

logger = logging.getLogger("aniki")


def vetted(response: ModelResponse) -> ModelResponse:
    """``response`` with unique tool call ids and only possible usage (the same object when
    nothing needed repair). Anything but a :class:`ModelResponse` passes through, for the
    caller to refuse."""
    if not isinstance(response, ModelResponse):
        return response
    calls = _unique_ids(response.tool_calls)
    usage = response.usage
    problem = usage_problem(usage) if isinstance(usage, Usage) else None
    if problem is not None:
        logger.warning(
            "the model's reply reported impossible token usage (%s); "
            "it counts as a reply whose usage was not reported",
            problem,
        )
        usage = None
    if calls is response.tool_calls and usage is response.usage:
        return response
    return dataclasses.replace(response, tool_calls=calls, usage=usage)


def _unique_ids(calls: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    taken = {call.id for call in calls}
    if len(taken) == len(calls):
        return calls
    seen: set[str] = set()
    repaired: list[ToolCall] = []
    for call in calls:
        if call.id in seen:
            fresh = new_call_id()
            while fresh in taken:
                fresh = new_call_id()
            logger.warning(
                "the model's reply repeated tool call id %.80r; the repeat (tool %.80r) runs as %r",
                call.id,
                call.name,
                fresh,
            )
            taken.add(fresh)
            call = dataclasses.replace(call, id=fresh)
        seen.add(call.id)
        repaired.append(call)
    return tuple(repaired)


def usage_problem(usage: Usage) -> str | None:
    """Why ``usage`` cannot be what a model call cost, or ``None`` when it can."""
    for spec in dataclasses.fields(usage):
        value = getattr(usage, spec.name)
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{spec.name} is {value!r:.40}, not a count"
        if value < 0:
            return f"{spec.name} is {value:,}"
    cached = usage.cache_read_tokens + usage.cache_write_tokens
    if cached > usage.input_tokens:
        return (
            f"{cached:,} cached tokens are more than the {usage.input_tokens:,} input tokens "
            "they are part of"
        )
    return None


def correction(invalid: OutputValidationError) -> str:
    """What the model is told when its reply did not fit the output schema."""
    listed = "\n".join(f"- {line}" for line in invalid.errors[:20])
    return (
        "Your last reply does not match the required output schema:\n"
        f"{listed}\n"
        "Reply again with only a JSON value that matches the schema."
    )
