"""The OpenTelemetry observer: a run as an ``invoke_agent`` span, and beneath it each model
call as a ``chat`` span and each tool call as an ``execute_tool`` span.

Only :func:`aniki.tracing.enable` imports this module, so ``import aniki`` never imports
OpenTelemetry. Each span is made the current one while its work runs: an agent called as a
tool traces as a run under its ``execute_tool`` span, and an HTTP client's own
instrumentation nests under the ``chat`` span. Concurrent tool calls each run in their own
task, made while the run's span was current, so their spans are siblings under it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from .. import __version__
from ..providers.base import ModelResponse
from ..tools import Tool
from . import _names as n
from ._attributes import (
    Attributes,
    provider_name,
    report_attributes,
    server,
    session_id,
    usage_attributes,
)
from ._content import messages_json, reply_json
from ._failures import record_failure

if TYPE_CHECKING:
    from .._run.observe import CallModel
    from .._run.plan import Outcome, RunPlan
    from ..context import Context
    from ..messages import Message, ToolCall
    from ..providers.base import ModelRequest
    from ..result import RunResult

__all__ = ["GenAIObserver"]

_SETTINGS = (
    ("temperature", n.REQUEST_TEMPERATURE),
    ("top_p", n.REQUEST_TOP_P),
    ("max_tokens", n.REQUEST_MAX_TOKENS),
    ("seed", n.REQUEST_SEED),
    ("stop", n.REQUEST_STOP_SEQUENCES),
    ("presence_penalty", n.REQUEST_PRESENCE_PENALTY),
    ("frequency_penalty", n.REQUEST_FREQUENCY_PENALTY),
)
"""The model settings the conventions name, and their attributes."""

_CACHE_WRITE_REPORTERS = frozenset({"anthropic"})
"""Providers whose replies count the input tokens written to the prompt cache. The others'
``cache_write_tokens`` is zero for want of a figure (OpenAI writes to its cache without
saying so): their ``gen_ai.usage.cache_creation.input_tokens`` is left out unless it is not
zero."""

_CHAT: ContextVar[tuple[Span, float] | None] = ContextVar("aniki_tracing_chat", default=None)
"""The model call under way in this context: its span, and when it began (``monotonic``)."""


class GenAIObserver:
    """Turns what a run reports (see :mod:`aniki._run.observe`) into GenAI spans."""

    def __init__(
        self, tracer_provider: trace.TracerProvider | None, *, include_content: bool
    ) -> None:
        self.tracer = trace.get_tracer("aniki", __version__, tracer_provider=tracer_provider)
        self.include_content = include_content

    async def run(self, plan: RunPlan, work: Awaitable[RunResult[Any]]) -> RunResult[Any]:
        observed = _RunSpan(self, plan)
        with observed.entered():
            try:
                result = await work
            except Exception as exc:
                observed.failed(exc)
                raise
            except BaseException:
                observed.aborted()
                raise
        observed.finished(result)
        return result

    def stream(self, plan: RunPlan) -> _RunSpan:
        return _RunSpan(self, plan)

    async def model_call(
        self, plan: RunPlan, outcome: Outcome, request: ModelRequest, call_model: CallModel
    ) -> ModelResponse:
        span = self.tracer.start_span(
            f"chat {request.model}",
            kind=SpanKind.CLIENT,
            attributes=self._chat_attributes(plan, outcome, request),
        )
        under_way = _CHAT.set((span, time.monotonic()))
        try:
            with _ends_on_failure(span, with_message=self.include_content):
                response = await call_model(request)
        finally:
            _CHAT.reset(under_way)
        if isinstance(response, ModelResponse):  # else the loop raises ProviderError
            reports = provider_name(plan.provider) in _CACHE_WRITE_REPORTERS
            span.set_attributes(self._response_attributes(response, cache_writes=reports))
        span.end()
        return response

    def first_chunk(self) -> None:
        """Note on the model call's span the seconds its stream took to deliver text or
        reasoning (a retried stream's replace a broken one's)."""
        under_way = _CHAT.get()
        if under_way is not None:
            span, began = under_way
            span.set_attribute(n.RESPONSE_TIME_TO_FIRST_CHUNK, time.monotonic() - began)

    async def guardrail(
        self, plan: RunPlan, name: str, stage: str, decide: Callable[[], Awaitable[str | None]]
    ) -> str | None:
        attributes: Attributes = {n.GUARDRAIL_NAME: name, n.GUARDRAIL_STAGE: stage}
        span = self.tracer.start_span(
            f"guardrail {name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        with _ends_on_failure(span, with_message=self.include_content):
            reason = await decide()
        span.set_attribute(n.GUARDRAIL_TRIPPED, reason is not None)
        if reason is not None:
            span.set_status(Status(StatusCode.ERROR, f"the {stage} guardrail tripped"))
            if self.include_content:
                span.set_attribute(n.GUARDRAIL_REASON, reason)
        span.end()
        return reason

    async def tool_call(self, tool: Tool, call: ToolCall, context: Context) -> Message:
        attributes: Attributes = {
            n.OPERATION_NAME: "execute_tool",
            n.TOOL_NAME: call.name,
            n.TOOL_CALL_ID: call.id,
            n.TOOL_TYPE: "function",
        }
        if tool.description:
            attributes[n.TOOL_DESCRIPTION] = tool.description
        if self.include_content:
            attributes[n.TOOL_CALL_ARGUMENTS] = call.arguments
        span = self.tracer.start_span(
            f"execute_tool {call.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        raised: list[BaseException] = []
        # Tool.invoke turns what the function raises into the reply; a copy whose function
        # notes the exception first lets the span record it. A tool with an invoke of its own
        # (an MCP tool) is judged by its reply alone.
        runnable = _watched(tool, raised) if type(tool).invoke is Tool.invoke else tool
        with _ends_on_failure(span, with_message=self.include_content):  # a subclass's invoke
            message = await runnable.invoke(call, context)
        if raised:  # what it raised is the reply the model reads: content
            record_failure(span, raised[0], with_message=self.include_content)
        elif message.content.startswith("Error: "):  # how every tool failure is answered
            span.set_attribute(n.ERROR_TYPE, "tool_error")
            span.set_status(Status(StatusCode.ERROR, "the tool answered with an error"))
        if self.include_content:
            span.set_attribute(n.TOOL_CALL_RESULT, message.content)
        span.end()
        return message

    def _chat_attributes(
        self, plan: RunPlan, outcome: Outcome, request: ModelRequest
    ) -> Attributes:
        attributes: Attributes = {
            n.OPERATION_NAME: "chat",
            n.PROVIDER_NAME: provider_name(plan.provider),
            n.REQUEST_MODEL: request.model,
            n.AGENT_NAME: plan.agent.name,
            n.REQUEST_STREAM: plan.streaming,
            n.OUTPUT_TYPE: "text" if request.output_schema is None else "json",
        }
        conversation = session_id(plan.session)
        if conversation is not None:
            attributes[n.CONVERSATION_ID] = conversation
        settings: Mapping[str, Any] = request.settings
        for key, name in _SETTINGS:
            value = settings.get(key)
            if value is not None:
                attributes[name] = list(value) if key == "stop" else value
        attributes.update(server(plan.provider))
        reports = outcome.reports.reports if outcome.reports is not None else []
        if reports:
            pending = len(outcome.pending) + len(outcome.corrections)
            attributes.update(report_attributes(reports[-1], pending))
        if self.include_content:
            attributes[n.INPUT_MESSAGES] = messages_json(request.messages)
        return attributes

    def _response_attributes(self, response: ModelResponse, *, cache_writes: bool) -> Attributes:
        attributes: Attributes = {}
        if response.finish_reason:
            attributes[n.RESPONSE_FINISH_REASONS] = [response.finish_reason]
        if response.model:
            attributes[n.RESPONSE_MODEL] = response.model
        if response.id:
            attributes[n.RESPONSE_ID] = response.id
        if response.usage is not None:
            attributes.update(usage_attributes(response.usage, cache_writes=cache_writes))
        else:
            attributes[n.UNREPORTED_REQUESTS] = 1
        if self.include_content:
            attributes[n.OUTPUT_MESSAGES] = reply_json(response)
        return attributes


class _RunSpan:
    """One run's ``invoke_agent`` span; for a stream, also its
    :class:`~aniki._run.observe.RunObservation`."""

    def __init__(self, observer: GenAIObserver, plan: RunPlan) -> None:
        agent = plan.agent
        self._agent = agent.name
        self._include_content = observer.include_content
        provider = provider_name(plan.provider if plan.provider is not None else agent.provider)
        self._cache_writes = provider in _CACHE_WRITE_REPORTERS
        attributes: Attributes = {
            n.OPERATION_NAME: "invoke_agent",
            n.AGENT_NAME: agent.name,
            n.REQUEST_MODEL: agent.model,
            n.PROVIDER_NAME: provider,
            n.RUN_ID: plan.context.run_id,
        }
        conversation = session_id(plan.session)
        if conversation is not None:
            attributes[n.CONVERSATION_ID] = conversation
        if self._include_content and agent.description:  # from the instructions, by default
            attributes[n.AGENT_DESCRIPTION] = agent.description
        self.span = observer.tracer.start_span(
            f"invoke_agent {agent.name}", kind=SpanKind.INTERNAL, attributes=attributes
        )
        self._open = True

    def entered(self) -> AbstractContextManager[object]:
        return _current(self.span)

    def finished(self, result: RunResult[Any]) -> None:
        if not self._open:
            return
        self._open = False
        span = self.span
        span.set_attributes(usage_attributes(result.usage, cache_writes=self._cache_writes))
        span.set_attribute(n.REQUESTS, result.usage.requests)
        if result.usage.unreported_requests:
            span.set_attribute(n.UNREPORTED_REQUESTS, result.usage.unreported_requests)
        if result.last_agent != self._agent:
            span.set_attribute(n.LAST_AGENT, result.last_agent)
        if result.pending_approvals:
            span.set_attribute(n.PENDING_APPROVALS, len(result.pending_approvals))
        if self._include_content:
            asked = [m for m in result.new_messages if m.role == "user"]
            if asked:
                span.set_attribute(n.INPUT_MESSAGES, messages_json(asked))
            replies = [m for m in result.new_messages if m.role == "assistant"]
            if replies:
                span.set_attribute(n.OUTPUT_MESSAGES, reply_json(replies[-1]))
        span.end()

    def failed(self, error: BaseException) -> None:
        if self._open:
            self._open = False
            record_failure(self.span, error, with_message=self._include_content)
            self.span.end()

    def aborted(self) -> None:
        if self._open:
            self._open = False
            self.span.set_attribute(n.CANCELLED, True)
            self.span.end()


@contextlib.contextmanager
def _ends_on_failure(span: Span, *, with_message: bool) -> Iterator[None]:
    """Make ``span`` current for the block; if the block raises, record why and end it (a
    cancellation is marked, not recorded as a failure)."""
    try:
        with _current(span):
            yield
    except Exception as exc:
        record_failure(span, exc, with_message=with_message)
        span.end()
        raise
    except BaseException:
        span.set_attribute(n.CANCELLED, True)
        span.end()
        raise


def _current(span: Span) -> AbstractContextManager[object]:
    """``span`` as the current span inside the block (which neither ends it nor records)."""
    return trace.use_span(span, record_exception=False, set_status_on_exception=False)


def _watched(tool: Tool, raised: list[BaseException]) -> Tool:
    """A copy of ``tool`` whose function appends what it raises to ``raised``."""
    function = tool.function

    async def watched_async(**kwargs: Any) -> Any:
        try:
            return await function(**kwargs)
        except Exception as exc:
            raised.append(exc)
            raise

    def watched(**kwargs: Any) -> Any:  # runs in a worker thread, like the function
        try:
            value = function(**kwargs)
        except Exception as exc:
            raised.append(exc)
            raise
        return _awaited(value, raised) if inspect.isawaitable(value) else value

    chosen: Callable[..., Any] = watched_async if inspect.iscoroutinefunction(function) else watched
    return dataclasses.replace(tool, function=chosen)


async def _awaited(value: Awaitable[Any], raised: list[BaseException]) -> Any:
    """``value``, from a callable object whose ``__call__`` is async, awaited and watched."""
    try:
        return await value
    except Exception as exc:
        raised.append(exc)
        raise
