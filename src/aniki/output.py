"""Structured output: an agent's ``output_schema`` and the validation of its final reply."""

from __future__ import annotations

import json
import sys
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import typing_extensions

from ._jsonschema import check_schema, schema_errors
from .errors import OutputValidationError, UserError

if TYPE_CHECKING:
    import pydantic

__all__ = ["OutputSpec", "output_spec"]

# pydantic is imported where a typed schema is used, not with aniki: an agent without one,
# the stores and the command line start without it (about a sixth of `import aniki`).


@dataclass(frozen=True, slots=True)
class OutputSpec:
    """An output schema ready for use: the JSON schema to send and the validator to apply."""

    json_schema: dict[str, Any]
    """The JSON schema sent to the provider."""
    adapter: pydantic.TypeAdapter[Any] | None
    """Validates typed schemas (pydantic models, dataclasses, TypedDicts); ``None`` for dicts."""

    def validate(self, text: str) -> Any:
        """Parse and validate the reply ``text``; raise :class:`~aniki.OutputValidationError`."""
        if self.adapter is not None:
            import pydantic

            try:
                return self.adapter.validate_json(text)
            except pydantic.ValidationError as exc:
                raise OutputValidationError(
                    text,
                    [
                        f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}"
                        for e in exc.errors()
                    ],
                ) from exc
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise OutputValidationError(text, [f"not valid JSON: {exc.msg}"]) from exc
        errors = schema_errors(value, self.json_schema)
        if errors:
            raise OutputValidationError(text, errors)
        return value


def output_spec(schema: Any) -> OutputSpec | None:
    """Build an :class:`OutputSpec` from what ``Agent(output_schema=...)`` accepts.

    That is a pydantic model class, a dataclass, a TypedDict (or any type pydantic can
    validate), or a JSON schema given as a dict.
    """
    if schema is None:
        return None
    if isinstance(schema, dict):
        if not schema:
            raise UserError("output_schema is an empty dict; give a JSON schema or a type")
        check_schema(schema, "output_schema")
        return OutputSpec(json_schema=schema, adapter=None)
    if typing.is_typeddict(schema) and sys.version_info < (3, 12):
        schema = _portable_typeddict(schema)
    import pydantic

    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(schema)
        json_schema = adapter.json_schema()
    except (pydantic.PydanticUserError, pydantic.PydanticSchemaGenerationError, TypeError) as exc:
        raise UserError(
            f"output_schema {schema!r} is not usable: give a pydantic model class, a dataclass, "
            f"a TypedDict or a JSON schema dict ({exc})"
        ) from exc
    return OutputSpec(json_schema=json_schema, adapter=adapter)


def _portable_typeddict(schema: Any) -> Any:
    """Rebuild a ``typing.TypedDict`` as the ``typing_extensions`` kind pydantic needs (< 3.12)."""
    hints = typing.get_type_hints(schema, include_extras=True)
    required = getattr(schema, "__required_keys__", frozenset(hints))
    fields = {
        name: hint if name in required else typing_extensions.NotRequired[hint]
        for name, hint in hints.items()
    }
    return typing_extensions.TypedDict(schema.__name__, fields)  # type: ignore[operator]
