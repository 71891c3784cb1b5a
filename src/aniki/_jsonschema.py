"""A small JSON-schema validator for output schemas given as plain dicts.

It covers the keywords model providers accept in structured-output schemas: ``type``,
``properties``, ``required``, ``additionalProperties``, ``items``, ``enum``, ``const``,
``anyOf`` / ``oneOf`` / ``allOf``, ``$ref`` to ``#/$defs`` or ``#/definitions``, numeric
and length bounds, and ``pattern``. Unknown keywords are ignored, as JSON Schema says.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

__all__ = ["schema_errors"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Every way ``value`` breaks ``schema``, one line each (empty when it fits)."""
    return list(_check(value, schema, schema, "$"))


def _is_type(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("number", "integer"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES.get(name, object))


def _resolve(ref: str, root: dict[str, Any]) -> dict[str, Any]:
    node: Any = root
    for part in ref.lstrip("#/").split("/"):
        if not isinstance(node, dict) or part not in node:
            raise ValueError(f"unresolvable $ref {ref!r}")
        node = node[part]
    return dict(node)


def _check(value: Any, schema: Any, root: dict[str, Any], path: str) -> Iterator[str]:
    if schema is True or schema == {}:
        return
    if schema is False:
        yield f"{path}: no value is allowed here"
        return
    if "$ref" in schema:
        yield from _check(value, _resolve(schema["$ref"], root), root, path)
    expected = schema.get("type")
    if expected is not None:
        names = expected if isinstance(expected, list) else [expected]
        if not any(_is_type(value, n) for n in names):
            yield f"{path}: expected {' or '.join(names)}, got {type(value).__name__}"
            return
    if "enum" in schema and value not in schema["enum"]:
        yield f"{path}: {value!r} is not one of {schema['enum']!r}"
    if "const" in schema and value != schema["const"]:
        yield f"{path}: expected {schema['const']!r}"
    yield from _check_combinators(value, schema, root, path)
    if isinstance(value, dict):
        yield from _check_object(value, schema, root, path)
    elif isinstance(value, list):
        yield from _check_array(value, schema, root, path)
    elif isinstance(value, str):
        yield from _check_string(value, schema, path)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield from _check_number(value, schema, path)


def _check_combinators(value: Any, schema: Any, root: dict[str, Any], path: str) -> Iterator[str]:
    for sub in schema.get("allOf", []):
        yield from _check(value, sub, root, path)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matches = sum(not list(_check(value, sub, root, path)) for sub in schema[key])
            if matches == 0 or (key == "oneOf" and matches > 1):
                wanted = "exactly one" if key == "oneOf" else "any"
                yield f"{path}: does not match {wanted} of {key}"


def _check_object(
    value: dict[str, Any], schema: Any, root: dict[str, Any], path: str
) -> Iterator[str]:
    properties = schema.get("properties", {})
    for name in schema.get("required", []):
        if name not in value:
            yield f"{path}.{name}: required property is missing"
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        if name in properties:
            yield from _check(item, properties[name], root, f"{path}.{name}")
        elif extra is False:
            yield f"{path}.{name}: unexpected property"
        elif isinstance(extra, dict):
            yield from _check(item, extra, root, f"{path}.{name}")


def _check_array(value: list[Any], schema: Any, root: dict[str, Any], path: str) -> Iterator[str]:
    if "minItems" in schema and len(value) < schema["minItems"]:
        yield f"{path}: needs at least {schema['minItems']} items"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        yield f"{path}: allows at most {schema['maxItems']} items"
    items = schema.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            yield from _check(item, items, root, f"{path}[{index}]")


def _check_string(value: str, schema: Any, path: str) -> Iterator[str]:
    if "minLength" in schema and len(value) < schema["minLength"]:
        yield f"{path}: shorter than {schema['minLength']} characters"
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        yield f"{path}: longer than {schema['maxLength']} characters"
    if "pattern" in schema and not re.search(schema["pattern"], value):
        yield f"{path}: does not match pattern {schema['pattern']!r}"


def _check_number(value: float, schema: Any, path: str) -> Iterator[str]:
    if "minimum" in schema and value < schema["minimum"]:
        yield f"{path}: less than the minimum {schema['minimum']}"
    if "maximum" in schema and value > schema["maximum"]:
        yield f"{path}: greater than the maximum {schema['maximum']}"
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        yield f"{path}: must be greater than {schema['exclusiveMinimum']}"
    if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
        yield f"{path}: must be less than {schema['exclusiveMaximum']}"
