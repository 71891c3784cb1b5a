"""What every request of a run starts with (its instructions and tool definitions), and the
run as a read of its session may use it (see :mod:`aniki.sessions._reading`)."""

from __future__ import annotations

from ..messages import Message
from ..sessions._reading import Head, ReadingRun
from ..usage import Usage
from .handoffs import handoff_definition
from .plan import RunPlan

__all__ = ["reading_run", "request_head"]


async def request_head(plan: RunPlan) -> Head:
    """The instructions (as a system message) and the tool definitions every request of
    the run's current agent starts with."""
    instructions = await plan.agent.render_instructions(plan.context)
    head: tuple[Message, ...] = (
        (Message(role="system", content=instructions),) if instructions else ()
    )
    tools = tuple(t.definition() for t in plan.tools.values()) + tuple(
        handoff_definition(name, target) for name, target in plan.handoffs.items()
    )
    return head, tools


def reading_run(plan: RunPlan) -> ReadingRun:
    """``plan``'s run, for the reads of its session (its provider is built by then); made
    again only when a handoff changed its agent, provider or settings."""
    assert plan.provider is not None, "prepare() builds the provider before the first read"
    kept = plan.reading
    if (
        kept is not None
        and kept.provider is plan.provider
        and kept.settings is plan.settings
        and kept.model == plan.agent.model
    ):
        return kept

    def charge(usage: Usage) -> None:
        plan.sub_usage += usage

    async def head() -> Head:
        return await request_head(plan)

    plan.reading = ReadingRun(plan.agent.model, plan.provider, plan.settings, head, charge)
    return plan.reading
