"""The turn loop shared by every run (:mod:`aniki._run.runs`): streamed or not, resumed, or
an agent's run as a tool.

One coroutine, :func:`execute`, runs a whole conversation turn; a run and a stream differ
only in how model calls are made (``complete`` or ``stream``), where events go, and when
messages reach the session:

* ``run`` commits each turn as it completes, so a failing run keeps every completed turn;
* ``stream`` keeps the run's messages pending and hands them back, to be committed only when
  the consumer reaches ``RunCompleted``.

A turn that asked for tools is committed together with all its tool results, so a crash
between the two can never leave a tool call unanswered in the stored history. A turn that
asks for a call needing approval ends the loop with ``Outcome.held``, which the run keeps
(:mod:`aniki._run.approvals`); a handoff lets another agent answer from the next turn on
(:mod:`aniki._run.handoffs`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal

from .._threads import SETUP
from ..agent import Agent, AgentTool, Middleware
from ..context import CALL_ID, Context
from ..errors import (
    AnikiError,
    MaxTurnsExceeded,
    OutputValidationError,
    ProviderError,
)
from ..errors import ValidationError as MessageValidationError
from ..events import AgentUpdated, StreamRestarted, ToolCallCompleted, ToolCallStarted
from ..messages import Message, ToolCall
from ..providers.base import ModelRequest, ModelResponse, Provider, merge_settings
from ..reports import ContextReport
from ..sessions import _session_io as session_io
from ..sessions._reading import reading
from ..tools import Tool
from ..usage import Usage
from . import guarding, observe, once, steps, tool_chain
from .caps import capped
from .handoffs import (
    handed_off,
    handoff_answer,
    handoff_targets,
    misplaced_answer,
)
from .heads import reading_run, request_head
from .model_stream import stream_response
from .plan import HeldTurn, Outcome, RunPlan
from .replies import correction, vetted
from .reports import ReportBuilder

__all__ = ["commit", "execute", "prepare", "run_tools", "run_turns", "store", "switch_agent"]

CallNext = Callable[[ModelRequest], Awaitable[ModelResponse]]


async def prepare(plan: RunPlan) -> None:
    """Build, in a worker thread, what the run needs and takes long to build the first time.

    A provider named by a string is imported and made on its first run (the vendor package
    takes up to a second to import), and the first report for an OpenAI model loads a
    tokenizer (a third of a second): neither may stall the event loop. The agent's tools are
    gathered, each agent tool bound to this run (its sub-runs report here).
    """
    if plan.provider is None:
        plan.provider = await SETUP.submit(plan.agent.resolve_provider)
    plan.tools = {
        name: found.called_by(plan) if isinstance(found, AgentTool) else found
        for name, found in (await plan.agent.gather_tools()).items()
    }
    plan.handoffs = handoff_targets(plan.agent)
    model = plan.agent.model
    if model not in _COUNTED:
        await SETUP.submit(lambda: ReportBuilder(plan.session, model, plan.can))
        if len(_COUNTED) > 64:  # a process that names many models
            _COUNTED.clear()
        _COUNTED.add(model)


async def switch_agent(plan: RunPlan, target: Agent[Any]) -> None:
    """Let ``target`` answer from now on: its provider, tools, middleware and settings."""
    plan.agent = target
    plan.provider = None if isinstance(target.provider, str) else target.provider
    plan.middleware = plan.runner_middleware + target.middleware
    plan.tool_middleware = plan.runner_tool_middleware + target.tool_middleware
    plan.settings = merge_settings(target.settings, plan.run_settings)
    await prepare(plan)


_COUNTED: set[str] = set()
"""Models whose token counter was built once (the tokenizer stays loaded after that)."""


async def execute(plan: RunPlan, user_message: Message, outcome: Outcome) -> Outcome:
    """Run turns until the model answers in text; the user message is already stored and
    :func:`prepare` has run."""
    outcome.new_messages.append(user_message)
    return await run_turns(plan, outcome, user_message)


async def run_turns(plan: RunPlan, outcome: Outcome, user: Message | None = None) -> Outcome:
    """The turns of :func:`execute` (also where a resumed run goes on): until the model
    answers in text, or asks for a tool call that needs approval (``outcome.held``, for the
    caller to keep in the store). ``user``: the run's new question, which the agent's input
    guardrails check beside the first model call."""
    call_model = _middleware_chain(plan)
    outcome.reports = ReportBuilder(plan.session, plan.agent.model, plan.can)
    retries = 0
    for turn in range(1, plan.max_turns + 1):
        first = _model_turn(plan, outcome, call_model)
        if turn == 1 and user is not None and plan.agent.input_guardrails:
            assistant = await guarding.first_turn(plan, user, first)
        else:
            assistant = await first
        if assistant.tool_calls:
            step = await _tool_turn(plan, outcome, assistant)
            if step == "held":
                return outcome
            if step == "handed off":
                call_model = _middleware_chain(plan)
            if turn == plan.max_turns:
                raise MaxTurnsExceeded(plan.max_turns)
            continue
        may_retry = retries < plan.agent.output_retries and turn < plan.max_turns
        if await _answered(plan, outcome, assistant, may_retry=may_retry):
            return outcome
        retries += 1
    raise MaxTurnsExceeded(plan.max_turns)  # only reached with max_turns < 1


async def _model_turn(plan: RunPlan, outcome: Outcome, call_model: CallNext) -> Message:
    """One model call: its request, its report, and the assistant message it produced."""
    request = await _build_request(plan, outcome)

    async def call() -> ModelResponse:
        if observe.OBSERVER is None:
            return await call_model(request)
        return await observe.OBSERVER.model_call(plan, outcome, request, call_model)

    response = await steps.model_call(request, call)
    reports = outcome.reports
    assert reports is not None, "run_turns starts the run's reports"
    reports.settle(response.usage if isinstance(response, ModelResponse) else None)
    outcome.usage += (
        response.usage
        if response.usage is not None
        else Usage(requests=1, unreported_requests=1)  # not a measured zero
    )
    return _with_report(_assistant_message(plan, response), reports.reports[-1])


async def _tool_turn(
    plan: RunPlan, outcome: Outcome, assistant: Message
) -> Literal["ran", "held", "handed off"]:
    """Answer the tool calls of ``assistant`` and store the turn; or stop before a call that
    needs approval (``outcome.held``); or hand the conversation off."""
    calls = assistant.tool_calls
    awaiting = [
        call
        for call in calls
        if (found := plan.tools.get(call.name)) is not None and found.requires_approval
    ]
    if awaiting:
        now = [call for call in calls if call not in awaiting]
        await once.open_turn(plan, assistant, now)
        done = await run_tools(plan, now)
        outcome.held = HeldTurn(plan.agent.name, assistant, tuple(done), tuple(awaiting))
        return "held"
    await once.open_turn(plan, assistant, calls)
    chosen = handed_off(calls, plan.handoffs)
    if chosen is None:
        await commit(plan, outcome, [assistant, *await run_tools(plan, calls)])
        return "ran"
    others = [call for call in calls if call.name not in plan.handoffs]
    ran = {m.tool_call_id: m for m in await run_tools(plan, others)}
    answers = [
        handoff_answer(call, chosen, plan.handoffs) if call.name in plan.handoffs else ran[call.id]
        for call in calls
    ]
    await commit(plan, outcome, [assistant, *answers])
    await switch_agent(plan, plan.handoffs[chosen.name])
    if plan.emit is not None:
        plan.emit(AgentUpdated(plan.agent.name, "handoff"))
    return "handed off"


async def _answered(
    plan: RunPlan, outcome: Outcome, assistant: Message, *, may_retry: bool
) -> bool:
    """Store ``assistant``'s text as the run's answer (``True``); or, when it does not fit
    the output schema and ``may_retry``, send it back with the errors (``False``)."""
    outcome.content = assistant.content
    spec = plan.agent.output
    try:
        outcome.output = assistant.content if spec is None else spec.validate(assistant.content)
    except OutputValidationError as invalid:
        if may_retry:
            outcome.corrections = [assistant, Message("user", correction(invalid))]
            if plan.emit is not None:  # the text streamed for this reply is void
                plan.emit(StreamRestarted(f"the reply did not fit the output schema: {invalid}"))
            return False
        await commit(plan, outcome, [assistant])
        raise
    if plan.agent.output_guardrails:
        assistant = await guarding.checked_reply(plan, outcome, assistant)
    await commit(plan, outcome, [assistant], last=True)
    return True


async def commit(
    plan: RunPlan, outcome: Outcome, messages: list[Message], *, last: bool = False
) -> None:
    """Store ``messages`` (a stream keeps them pending until it completes); ``last``: the
    run's answer, after which its journal entry ends (in the same trip to the store's
    worker thread where it can: :func:`aniki._run.once.ending`)."""
    outcome.corrections = []  # the model answered again: its earlier slip is behind it
    outcome.new_messages.extend(messages)
    if plan.streaming:
        outcome.pending.extend(messages)
    else:
        outcome.history = await store(plan, messages, then=once.ending(plan) if last else None)


async def store(
    plan: RunPlan, messages: Sequence[Message], *, then: Callable[[], object] | None = None
) -> Sequence[Message] | None:
    """Append ``messages`` to the run's session under its guard; the history after, when
    the store returns it at no extra cost (``None`` under a durable executor: its write is a
    step, and the next read asks the store). ``then``: as
    :func:`aniki.sessions._session_io.append_then_read` runs it."""
    if steps.current() is None:
        with reading(reading_run(plan)):
            return await session_io.append_then_read(
                plan.session, messages, guard=plan.guard, then=then, can=plan.can
            )

    async def write() -> None:
        with reading(reading_run(plan)):
            await session_io.append_then_read(
                plan.session, messages, guard=plan.guard, can=plan.can
            )

    await steps.store_write(messages, write)
    return None


async def _build_request(plan: RunPlan, outcome: Outcome) -> ModelRequest:
    history = outcome.take_history()
    if history is None or outcome.pending:  # the store's, then what a stream has not stored
        with reading(reading_run(plan)):
            history = await session_io.read_with(plan.session, outcome.pending, plan.can)
    head, tools = await request_head(plan)
    messages = head + tuple(history) + tuple(outcome.corrections)
    spec = plan.agent.output
    if outcome.reports is not None:
        outcome.reports.add(
            messages,
            tools,
            has_instructions=bool(head),
            pending=len(outcome.pending) + len(outcome.corrections),
        )
    return ModelRequest(
        model=plan.agent.model,
        messages=messages,
        tools=tools,
        output_schema=spec.json_schema if spec else None,
        settings=plan.settings,
    )


def _provider(plan: RunPlan) -> Provider:
    assert plan.provider is not None, "prepare() builds the provider before the first turn"
    return plan.provider


def _assistant_message(plan: RunPlan, response: ModelResponse) -> Message:
    if not isinstance(response, ModelResponse):
        raise ProviderError(
            f"the provider returned {type(response).__name__}, not a ModelResponse "
            "(check the middleware: each must return what call_next returned, or a ModelResponse)"
        )
    try:
        return response.to_message(model=plan.agent.model)
    except MessageValidationError as exc:
        raise ProviderError(f"model {plan.agent.model!r} gave an unusable reply: {exc}") from exc


def _with_report(assistant: Message, report: ContextReport) -> Message:
    """``assistant`` keeping the report of the call that wrote it, so its store keeps it too."""
    try:
        return assistant._reported(report)
    except MessageValidationError:  # a custom counter's odd figures (a negative count, say):
        return assistant  # the reply stands without them; the run's result still has them


def _middleware_chain(plan: RunPlan) -> CallNext:
    async def call_provider(request: ModelRequest) -> ModelResponse:
        try:
            if plan.streaming:
                return vetted(await stream_response(plan, request))
            return vetted(await _provider(plan).complete(request))
        except AnikiError:
            raise
        except Exception as exc:
            raise ProviderError(
                f"the provider failed on model {request.model!r}: {type(exc).__name__}: {exc}"
            ) from exc

    handler: CallNext = call_provider
    for middleware in reversed(plan.middleware):
        handler = _bind(middleware, plan.context, handler)
    return handler


def _bind(middleware: Middleware, context: Context, call_next: CallNext) -> CallNext:
    async def call(request: ModelRequest) -> ModelResponse:
        response: ModelResponse = await middleware(context, request, call_next)
        return response

    return call


async def run_tools(plan: RunPlan, calls: Sequence[ToolCall]) -> list[Message]:
    """Run every call concurrently; results come back in call order. The caller stores
    them (or keeps them in a held turn) as soon as this returns."""
    running = [len(calls)]

    def last() -> bool:
        return running[0] == 1

    async def run_one(call: ToolCall) -> Message:
        try:
            return await _run_one(call)
        finally:
            running[0] -= 1

    async def _run_one(call: ToolCall) -> Message:
        if plan.emit is not None:
            plan.emit(ToolCallStarted(call))
        tool = plan.tools.get(call.name)
        if tool is None and call.name in plan.handoffs:  # asked for beside a held call
            message = misplaced_answer(call)
        elif tool is None:
            known = ", ".join(sorted(plan.tools)) or "none"
            message = Message(
                role="tool",
                content=f"Error: unknown tool {call.name!r}. Available tools: {known}.",
                tool_call_id=call.id,
            )
        else:
            message = await once.once(
                plan,
                call,
                lambda: steps.tool_call(call, lambda: _invoke(plan, tool, call)),
                last=last,
            )
        if plan.emit is not None:
            plan.emit(ToolCallCompleted(call, message))
        return message

    if len(calls) == 1:
        return [await run_one(calls[0])]
    return list(await asyncio.gather(*(run_one(call) for call in calls)))


async def _invoke(plan: RunPlan, tool: Tool, call: ToolCall) -> Message:
    from . import calling  # here, not at the top: ``import aniki`` should not pay for it

    async def answer(given: ToolCall) -> Message:
        if observe.OBSERVER is None:
            return await tool.invoke(given, plan.context)
        return await observe.OBSERVER.tool_call(tool, given, plan.context)

    token = CALL_ID.set(call.id)
    run = calling.enter(plan, call)
    try:
        if plan.tool_middleware:
            message = await tool_chain.through(plan.tool_middleware, plan.context, call, answer)
        else:
            message = await answer(call)
        return capped(message, plan.agent.max_tool_output, call.name)
    finally:
        calling.leave(run)
        CALL_ID.reset(token)
