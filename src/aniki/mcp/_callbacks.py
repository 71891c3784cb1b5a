"""What an MCP server may ask of aniki, as the SDK's client callbacks: the model (sampling),
the user (elicitation), the roots it may work in; and what it reports: progress and log
messages, on the ``aniki.mcp`` logger and, during a run, in its stream.

A request a server makes while one of its tools runs for a run is answered for that run
(its provider and model; its stream). Over HTTP the SDK hands the request over in the
context of the call it belongs to; over stdio aniki can tell only when calls of a single run
are in flight on the server, and treats the request as the run's then.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from mcp.client import ClientRequestContext
from mcp.shared.dispatcher import ProgressFnT

from mcp import types

from .._aio import within
from .._run import calling
from .._secrets import Secrets, redact
from .._threads import TOOLS
from ..events import ServerLog, ToolProgress
from ..messages import Message
from ..providers.base import ModelRequest, ModelResponse, ModelSettings, Provider
from ._features_config import ClientFeatures
from ._records import (
    ElicitationReply,
    ElicitationRequest,
    SamplingRequest,
    log_text,
    message_of,
)

__all__ = ["Callbacks", "InFlight"]

logger = logging.getLogger("aniki.mcp")

REFUSED = -1
"""The JSON-RPC error code MCP's examples give a sampling request the client refuses."""

_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}
"""MCP's (syslog's) log levels as Python's."""

Reply: TypeAlias = "types.CreateMessageResult | types.ErrorData"


class InFlight:
    """The tool calls of runs in flight on one server, to tell which run a request is for."""

    def __init__(self) -> None:
        self._runs: dict[int, calling.CallingRun] = {}

    def add(self, run: calling.CallingRun) -> int:
        key = id(run)
        self._runs[key] = run
        return key

    def remove(self, key: int) -> None:
        self._runs.pop(key, None)

    def current(self) -> calling.CallingRun | None:
        """The run a request made now is for: the one in this context if its call is in
        flight, else the only run with calls in flight (``None`` when there are several)."""
        here = calling.current()
        if here is not None and self._runs.get(id(here)) is here:
            return here
        runs = {run.run_id: run for run in list(self._runs.values())}
        return next(iter(runs.values())) if len(runs) == 1 else None


class Callbacks:
    """The SDK callbacks of one server (:meth:`options` gives them to its client)."""

    def __init__(
        self,
        *,
        server: str,
        features: ClientFeatures,
        in_flight: InFlight,
        timeout: float,
        secrets: Secrets,
    ) -> None:
        self._server = server
        self._features = features
        self._in_flight = in_flight
        self._timeout = timeout
        self._secrets = secrets

    def options(self) -> dict[str, Any]:
        """Keyword arguments for the SDK's ``Client``: a capability is announced only when
        aniki can serve it (sampling when ``sampling=`` is given, roots when ``roots=``
        is); elicitation always (without a handler it declines)."""
        options: dict[str, Any] = {
            "elicitation_callback": self.elicitation,
            "logging_callback": self.logging,
            "log_level": _mcp_level(logger.getEffectiveLevel()),
        }
        if self._features.sampling is not None:
            options["sampling_callback"] = self.sampling
        if self._features.roots is not None:
            options["list_roots_callback"] = self.roots
        return options

    async def sampling(
        self, context: ClientRequestContext, params: types.CreateMessageRequestParams
    ) -> Reply:
        run = self._in_flight.current()
        request = _sampling_request(self._server, params, run)
        refusal = await self._approve(request)
        if refusal is not None:
            logger.info("MCP server %s: a sampling request was refused: %s", self._server, refusal)
            return types.ErrorData(code=REFUSED, message=refusal)
        try:
            return await within(self._timeout, self._sample(request, run))
        except asyncio.TimeoutError:
            said = f"the model did not answer within {self._timeout:g} s"
        except _Refused as exc:
            said = str(exc)
        except Exception as exc:
            said = f"the model call failed: {type(exc).__name__}: {redact(str(exc), self._secrets)}"
        logger.warning("MCP server %s: a sampling request failed: %s", self._server, said)
        return types.ErrorData(code=types.INTERNAL_ERROR, message=said)

    async def _approve(self, request: SamplingRequest) -> str | None:
        """Why the request is refused, or ``None`` when it may go ahead."""
        hook = self._features.approve_sampling
        if hook is None:
            return None
        try:
            decision = await within(self._timeout, _called(hook, request))
        except asyncio.TimeoutError:
            return f"the client did not decide within {self._timeout:g} s"
        except Exception as exc:
            logger.warning("approve_sampling raised %s: %s", type(exc).__name__, exc)
            return f"the client could not decide ({type(exc).__name__})"
        if decision is True:
            return None
        if isinstance(decision, str) and decision:
            return decision
        return "the client refused to sample for this server"

    async def _sample(self, request: SamplingRequest, run: calling.CallingRun | None) -> Reply:
        chosen = self._features.sampling
        model = self._features.sampling_model
        if chosen == "agent" or (isinstance(chosen, Provider) and model is None):
            if run is None:
                raise _Refused(
                    "no run of an agent is calling this server's tools now (or calls of "
                    "several runs are in flight), so there is no model to ask"
                )
            response = await run.complete(_model_request(request, run.model, run.settings))
            return _result(response, run.model)
        if isinstance(chosen, Provider):
            assert model is not None
            response = await chosen.complete(_model_request(request, model, ModelSettings()))
            return _result(response, model)
        assert callable(chosen)
        said = await _called(chosen, request)
        if not isinstance(said, str):
            raise _Refused(f"the sampling= function returned {type(said).__name__}, not text")
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=said),
            model=model or str(getattr(chosen, "__name__", "aniki")),
            stop_reason="endTurn",
        )

    async def elicitation(
        self, context: ClientRequestContext, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        handler = self._features.elicitation
        if handler is None:
            logger.info("MCP server %s asked the user (declined: no elicitation=)", self._server)
            return types.ElicitResult(action="decline")
        run = self._in_flight.current()
        request = _elicitation_request(self._server, params, run)
        try:
            reply = await within(self._timeout, _called(handler, request))
        except asyncio.TimeoutError:
            logger.warning("the elicitation handler did not answer within %g s", self._timeout)
            return types.ElicitResult(action="cancel")
        except Exception as exc:
            logger.warning("the elicitation handler raised %s: %s", type(exc).__name__, exc)
            message = f"the client's elicitation handler failed ({type(exc).__name__})"
            return types.ErrorData(code=types.INTERNAL_ERROR, message=message)
        if reply is None:
            return types.ElicitResult(action="decline")
        if isinstance(reply, dict):
            return types.ElicitResult(action="accept", content=reply)
        if isinstance(reply, ElicitationReply):
            return types.ElicitResult(action=reply.action, content=reply.content)
        logger.warning("the elicitation handler returned %s", type(reply).__name__)
        return types.ErrorData(
            code=types.INTERNAL_ERROR,
            message="the client's elicitation handler gave no valid answer",
        )

    async def roots(self, context: ClientRequestContext) -> types.ListRootsResult:
        found = [
            types.Root.model_validate({"uri": uri, "name": name})
            for uri, name in self._features.roots or ()
        ]
        return types.ListRootsResult(roots=found)

    async def logging(self, params: types.LoggingMessageNotificationParams) -> None:
        text = redact(log_text(params.data), self._secrets)
        source = f" ({params.logger})" if params.logger else ""
        logger.log(_LEVELS.get(params.level, logging.INFO), "%s%s: %s", self._server, source, text)
        run = self._in_flight.current()
        if run is not None:
            run.send(ServerLog(self._server, params.level, text, params.logger))

    def progress(self, run: calling.CallingRun | None, tool: str) -> ProgressFnT:
        """The SDK progress callback of one call of ``tool`` (for ``run``, if any)."""

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            of = f"/{total:g}" if total is not None else ""
            said = f" ({message})" if message else ""
            logger.debug("%s: %s progress %g%s%s", self._server, tool, progress, of, said)
            if run is not None:
                run.send(ToolProgress(run.call, progress, total, message))

        return on_progress


class _Refused(Exception):
    """A sampling request aniki cannot serve; its text goes to the server."""


async def _called(function: Callable[[Any], Any], argument: Any) -> Any:
    """``function(argument)``: awaited when async; a plain function runs in a worker thread
    (it may block, e.g. to ask someone)."""
    if inspect.iscoroutinefunction(function):
        return await function(argument)
    result = await TOOLS.submit(lambda: function(argument))
    return await result if inspect.isawaitable(result) else result


def _sampling_request(
    server: str, params: types.CreateMessageRequestParams, run: calling.CallingRun | None
) -> SamplingRequest:
    messages = tuple(
        message_of(m.role, m.content if isinstance(m.content, list) else [m.content])
        for m in params.messages
    )
    hints = params.model_preferences.hints if params.model_preferences else None
    return SamplingRequest(
        server=server,
        messages=messages,
        system_prompt=params.system_prompt,
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        stop_sequences=tuple(params.stop_sequences or ()),
        model_hints=tuple(hint.name for hint in hints or () if hint.name),
        tool_call=run.call if run is not None else None,
    )


def _elicitation_request(
    server: str, params: types.ElicitRequestParams, run: calling.CallingRun | None
) -> ElicitationRequest:
    call = run.call if run is not None else None
    if isinstance(params, types.ElicitRequestURLParams):
        return ElicitationRequest(server, params.message, "url", url=params.url, tool_call=call)
    schema = dict(params.requested_schema)
    return ElicitationRequest(server, params.message, "form", schema=schema, tool_call=call)


def _model_request(request: SamplingRequest, model: str, base: ModelSettings) -> ModelRequest:
    settings = ModelSettings(**base)
    settings["max_tokens"] = request.max_tokens
    if request.temperature is not None:
        settings["temperature"] = request.temperature
    if request.stop_sequences:
        settings["stop"] = list(request.stop_sequences)
    settings.pop("tool_choice", None)
    system = () if not request.system_prompt else (Message("system", request.system_prompt),)
    return ModelRequest(model=model, messages=(*system, *request.messages), settings=settings)


_STOPS: dict[str | None, Literal["endTurn", "maxTokens", "stopSequence"]] = {
    "stop": "endTurn",
    "end_turn": "endTurn",
    "length": "maxTokens",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
}


def _result(response: ModelResponse, model: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text=response.content),
        model=response.model or model,
        stop_reason=_STOPS.get(response.finish_reason, response.finish_reason),
    )


def _mcp_level(level: int) -> types.LoggingLevel:
    """The MCP level of messages to ask a server for, from Python's logging level."""
    if level <= logging.DEBUG:
        return "debug"
    if level <= logging.INFO:
        return "info"
    if level <= logging.WARNING:
        return "warning"
    return "error" if level <= logging.ERROR else "critical"
