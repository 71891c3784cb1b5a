"""Tools: typed Python functions the model can call.

``@tool`` reads a function's signature and docstring into a JSON schema the model sees, and
validates the model's arguments against it before the call. Any failure — an unknown tool,
arguments that are not JSON or do not validate, a tool that raises — becomes a ``tool``
message telling the model what went wrong, so a run never crashes on a bad call.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
import logging
import types
import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, overload

from ._docstrings import parse_docstring
from ._threads import TOOLS
from .context import Context
from .errors import ToolError, UserError
from .messages import Message, ToolCall
from .providers.base import ToolDefinition

if TYPE_CHECKING:
    import pydantic

__all__ = ["Tool", "tool", "tools_by_name"]

# pydantic is imported where a tool is made or called, not with aniki (see aniki.output).

logger = logging.getLogger("aniki")

F = TypeVar("F", bound=Callable[..., Any])

EMPTY_RESULT = "(no output)"
"""What a tool message says when the tool returned an empty string or ``None``."""


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the model can call, with the schema of its arguments.

    Make one with :func:`tool`. Calling the ``Tool`` calls the function directly.

    Example::

        @tool
        def add(a: int, b: int) -> int:
            '''Add two numbers.'''
            return a + b

        add.name, add.parameters["required"]  # ('add', ['a', 'b'])
    """

    name: str
    """The name the model calls it by."""
    description: str
    """What it does, for the model (from the docstring unless given)."""
    parameters: dict[str, Any]
    """The JSON schema of its arguments."""
    function: Callable[..., Any]
    """The wrapped function."""
    arguments_model: type[pydantic.BaseModel] = field(repr=False)
    """The pydantic model the arguments are validated with."""
    context_parameter: str | None = field(default=None, repr=False)
    """The parameter that receives the run's :class:`~aniki.Context`, if any."""
    requires_approval: bool = False
    """Whether a run stops before calling it, until someone approves or denies the call
    (``Runner.resume``)."""
    idempotent: bool = False
    """Whether running a call twice does no harm: after a crash cut a call short, a
    recovered run runs it again; without it, the model is told the outcome is unknown."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def definition(self) -> ToolDefinition:
        """The tool as the model sees it."""
        return ToolDefinition(self.name, self.description, self.parameters)

    async def invoke(self, call: ToolCall, context: Context) -> Message:
        """Run ``call`` and return the ``tool`` message answering it; never raises (but cancels)."""
        try:
            kwargs = self._parse_arguments(call.arguments)
        except BadArguments as exc:
            return _reply(call, str(exc))
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = context
        try:
            if inspect.iscoroutinefunction(self.function):
                value = await self.function(**kwargs)
            else:
                value = await TOOLS.submit(functools.partial(self.function, **kwargs))
                if inspect.isawaitable(value):  # a callable object with an async __call__
                    value = await value
        except ToolError as exc:
            return _reply(call, str(exc) or f"Error: tool {self.name!r} failed")
        except Exception as exc:
            logger.warning("tool %r raised %s: %s", self.name, type(exc).__name__, exc)
            return _reply(call, f"Error: tool {self.name!r} raised {type(exc).__name__}: {exc}")
        import pydantic_core

        try:
            return _reply(call, result_text(value))
        except (TypeError, ValueError, pydantic_core.PydanticSerializationError) as exc:
            return _reply(call, f"Error: tool {self.name!r} returned a non-JSON value: {exc}")

    def _parse_arguments(self, raw: str) -> dict[str, Any]:
        import pydantic

        data = json_arguments(self.name, raw)
        try:
            parsed = self.arguments_model.model_validate(data)
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in exc.errors()
            )
            raise BadArguments(
                f"Error: invalid arguments for {self.name!r}: {problems}. "
                "Call it again with corrected arguments."
            ) from None
        return {name: getattr(parsed, name) for name in type(parsed).model_fields}


def json_arguments(name: str, raw: str) -> dict[str, Any]:
    """The JSON object a model gave as tool ``name``'s arguments (empty text: ``{}``);
    :class:`BadArguments`, whose text tells the model what to fix, when it is not one."""
    try:
        data = json.loads(raw) if raw.strip() else {}
    except (ValueError, RecursionError) as exc:
        # JSONDecodeError is a ValueError; so is a number too long to convert, and
        # absurd nesting raises RecursionError: all are the model's mistake to correct.
        reason = (
            f"{exc.msg} at position {exc.pos}"
            if isinstance(exc, json.JSONDecodeError)
            else ("nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:200])
        )
        raise BadArguments(
            f"Error: the arguments for {name!r} are not valid JSON ({reason}). "
            "Call it again with a JSON object matching its schema."
        ) from None
    if not isinstance(data, dict):
        raise BadArguments(
            f"Error: the arguments for {name!r} must be a JSON object, "
            f"got {type(data).__name__}. Call it again with a JSON object."
        )
    return data


class BadArguments(Exception):
    pass


def _reply(call: ToolCall, text: str) -> Message:
    return Message(role="tool", content=text or EMPTY_RESULT, tool_call_id=call.id)


def result_text(value: Any) -> str:
    """A tool's return value as message text: a ``str`` as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return EMPTY_RESULT
    import pydantic
    import pydantic_core

    if isinstance(value, pydantic.BaseModel):
        return value.model_dump_json()
    return pydantic_core.to_json(value).decode()


@overload
def tool(function: F, /) -> Tool: ...


@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    requires_approval: bool = False,
    idempotent: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed, documented function (sync or async) into a :class:`Tool`.

    The argument schema comes from the type hints; descriptions come from the docstring
    (Google, NumPy or reST style). Parameters with defaults are optional. A parameter
    annotated :class:`~aniki.Context` receives the run's context and is hidden from the model.
    With ``requires_approval=True`` a run stops before calling it and returns the call in
    ``result.pending_approvals``; ``Runner.resume`` continues once it is approved or denied.
    With ``idempotent=True`` a call that a crash cut short may run again when the run is
    recovered (pass ``ctx.run_id`` and ``ctx.tool_call_id`` on as an idempotency key); a
    call of any other tool runs at most once, and the model is told when its outcome is
    unknown.
    Sync functions run in a worker thread (with the caller's context variables), so they
    never block the event loop; one still running when its run times out completes in the
    background.

    Example::

        @tool
        def get_weather(city: str, unit: str = "celsius") -> str:
            '''Look up the weather.

            Args:
                city: The city to look up.
                unit: "celsius" or "fahrenheit".
            '''
            return f"18 degrees {unit} in {city}"

        @tool(name="lookup")
        async def find(query: str, ctx: Context) -> list[str]:
            return [query]

        @tool(requires_approval=True)
        def refund(order_id: str) -> str:
            '''Refund an order.'''
            return f"refunded {order_id}"
    """
    if not isinstance(requires_approval, bool):
        raise UserError(f"requires_approval must be True or False, got {requires_approval!r}")
    if not isinstance(idempotent, bool):
        raise UserError(f"idempotent must be True or False, got {idempotent!r}")

    def wrap(fn: Callable[..., Any]) -> Tool:
        made = _make_tool(fn, name=name, description=description)
        if requires_approval and not made.requires_approval:
            made = dataclasses.replace(made, requires_approval=True)
        if idempotent and not made.idempotent:
            made = dataclasses.replace(made, idempotent=True)
        return made

    return wrap(function) if function is not None else wrap


def _make_tool(fn: Callable[..., Any], *, name: str | None, description: str | None) -> Tool:
    if isinstance(fn, Tool):
        return fn
    if not callable(fn):
        raise UserError(f"a tool must be a function, got {type(fn).__name__}")
    tool_name = name or getattr(fn, "__name__", None)
    if not tool_name or tool_name == "<lambda>":
        raise UserError("this tool has no usable name: use @tool(name=...) or a named function")
    import pydantic

    summary, param_docs = parse_docstring(inspect.getdoc(fn))
    hints = _parameter_hints(fn, tool_name)
    fields: dict[str, Any] = {}
    context_parameter: str | None = None
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise UserError(
                f"tool {tool_name!r} takes *{param.name}: tools need named parameters, "
                "so the model knows what to pass"
            )
        if param.name not in hints:
            raise UserError(
                f"tool {tool_name!r}: parameter {param.name!r} has no type annotation, so the "
                f"model would not know what to pass; annotate it (e.g. `{param.name}: str`), "
                "or `typing.Any` to accept any JSON value"
            )
        annotation = hints[param.name]
        if isinstance(annotation, type) and issubclass(annotation, Context):
            context_parameter = param.name
            continue
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (
            annotation,
            pydantic.Field(default, description=param_docs.get(param.name) or None),
        )
    try:
        model = pydantic.create_model(
            f"{tool_name}_arguments",
            __config__=pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False),
            **fields,
        )
        schema = model.model_json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise UserError(f"cannot build a JSON schema for tool {tool_name!r}: {exc}") from exc
    schema.pop("title", None)
    schema.setdefault("properties", {})
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        parameters=schema,
        function=fn,
        arguments_model=model,
        context_parameter=context_parameter,
    )


def _parameter_hints(fn: Callable[..., Any], tool_name: str) -> dict[str, Any]:
    # Only the parameters matter: a return annotation naming a type the function's module
    # cannot see (common with local classes) must not make the tool unusable.
    inner = inspect.unwrap(fn)
    while isinstance(inner, functools.partial):  # its function's annotations
        inner = inspect.unwrap(inner.func)
    annotations = dict(getattr(inner, "__annotations__", {}))
    annotations.pop("return", None)
    holder = types.SimpleNamespace(__annotations__=annotations)
    try:
        return typing.get_type_hints(
            holder, globalns=getattr(inner, "__globals__", None), include_extras=True
        )
    except Exception as exc:
        raise UserError(
            f"cannot read the parameter types of tool {tool_name!r}: {exc}; types named in a "
            "tool's signature must be importable from its module (not local to a function)"
        ) from exc


def tools_by_name(tools: Iterable[Tool | Callable[..., Any]]) -> dict[str, Tool]:
    """Wrap plain functions as tools and index them by name, refusing duplicate names."""
    indexed: dict[str, Tool] = {}
    for item in tools:
        made = _make_tool(item, name=None, description=None)
        if made.name in indexed:
            raise UserError(
                f"two tools are named {made.name!r}; tool names must be unique per agent "
                "(rename one with @tool(name=...))"
            )
        indexed[made.name] = made
    return indexed
