"""Whether a value fits a JSON schema: every way it does not, one line each (pure, no I/O).

Values compare as JSON values do: ``true`` is not ``1`` (in ``enum``, ``const`` and
``uniqueItems``), and ``1`` is ``1.0``. A ``$ref`` is a JSON pointer within the schema, its
``~0`` / ``~1`` escapes and percent-encoding undone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from fractions import Fraction
from typing import Any
from urllib.parse import unquote

from .._checks import shown
from ..errors import UserError

__all__ = ["TYPES", "schema_errors", "target"]

TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "number": (int, float),
    "integer": (int,),
    "boolean": (bool,),
    "null": (type(None),),
}


def schema_errors(value: Any, schema: dict[str, Any]) -> list[str]:
    """Every way ``value`` (as ``json.loads`` gives it) breaks ``schema``, one line each, each
    starting with where (``$.city``, ``$.tags[2]``); empty when it fits."""
    try:
        return list(_check(value, schema, schema, "$"))
    except RecursionError:
        return ["$: nested too deeply to check"]


def _fits(value: Any, schema: Any, root: dict[str, Any]) -> bool:
    return next(_check(value, schema, root, "$"), None) is None


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
        names = [expected] if isinstance(expected, str) else list(expected)
        if not any(_is_type(value, name) for name in names):
            yield f"{path}: expected {' or '.join(names)}, got {type(value).__name__}"
            return
    if "enum" in schema and not any(_same(value, item) for item in schema["enum"]):
        yield f"{path}: {shown(value)} is not one of {schema['enum']!r}"
    if "const" in schema and not _same(value, schema["const"]):
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


def _is_type(value: Any, name: str) -> bool:
    if isinstance(value, bool) and name in ("number", "integer"):
        return False
    if name == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, TYPES[name])


def _json_key(value: Any) -> Any:
    """``value`` as a hashable key equal for equal JSON values: a bool is never a number,
    ``1`` is ``1.0``, and objects compare without their order."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return (type(value), value)
    if isinstance(value, (int, float)):
        return (float, value)  # int and float compare (and hash) by value
    if isinstance(value, (list, tuple)):
        return (list, tuple(_json_key(item) for item in value))
    if isinstance(value, dict):
        return (dict, frozenset((key, _json_key(item)) for key, item in value.items()))
    return (type(value), id(value))  # not a JSON value: equal to itself only


def _same(value: Any, other: Any) -> bool:
    return bool(_json_key(value) == _json_key(other))


def _check_combinators(value: Any, schema: Any, root: dict[str, Any], path: str) -> Iterator[str]:
    for sub in schema.get("allOf", ()):
        yield from _check(value, sub, root, path)
    for key in ("anyOf", "oneOf"):
        if key in schema:
            matches = sum(_fits(value, sub, root) for sub in schema[key])
            if matches == 0 or (key == "oneOf" and matches > 1):
                wanted = "exactly one" if key == "oneOf" else "any"
                yield f"{path}: does not match {wanted} of {key}"
    if "not" in schema and _fits(value, schema["not"], root):
        yield f"{path}: matches the schema under not, which it must not"


def _check_object(
    value: dict[str, Any], schema: Any, root: dict[str, Any], path: str
) -> Iterator[str]:
    for name in schema.get("required", ()):
        if name not in value:
            yield f"{path}.{name}: required property is missing"
    if "minProperties" in schema and len(value) < schema["minProperties"]:
        yield f"{path}: needs at least {schema['minProperties']} properties"
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        yield f"{path}: allows at most {schema['maxProperties']} properties"
    properties = schema.get("properties", {})
    patterns = schema.get("patternProperties", {})
    names = schema.get("propertyNames")
    extra = schema.get("additionalProperties", True)
    for name, item in value.items():
        where = f"{path}.{name}"
        if names is not None:
            yield from _check(name, names, root, f"{where} (its name)")
        matched = name in properties
        if matched:
            yield from _check(item, properties[name], root, where)
        for pattern, sub in patterns.items():
            if re.search(pattern, name):
                matched = True
                yield from _check(item, sub, root, where)
        if matched or extra is True:
            continue
        if extra is False:
            yield f"{where}: unexpected property"
        else:
            yield from _check(item, extra, root, where)


def _check_array(value: list[Any], schema: Any, root: dict[str, Any], path: str) -> Iterator[str]:
    if "minItems" in schema and len(value) < schema["minItems"]:
        yield f"{path}: needs at least {schema['minItems']} items"
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        yield f"{path}: allows at most {schema['maxItems']} items"
    prefix, rest = schema.get("prefixItems", ()), schema.get("items", True)
    if isinstance(rest, (list, tuple)):  # the older form of prefixItems
        prefix, rest = rest, schema.get("additionalItems", True)
    for index, item in enumerate(value):
        yield from _check(
            item, prefix[index] if index < len(prefix) else rest, root, f"{path}[{index}]"
        )
    if schema.get("uniqueItems") is True:
        first: dict[Any, int] = {}
        for index, item in enumerate(value):
            earlier = first.setdefault(_json_key(item), index)
            if earlier != index:
                yield f"{path}: items [{earlier}] and [{index}] are equal; they must be unique"
                break


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
    if "multipleOf" in schema and not _multiple(value, schema["multipleOf"]):
        yield f"{path}: not a multiple of {schema['multipleOf']}"


def _multiple(value: float, step: float) -> bool:
    """Whether ``value`` is a whole multiple of ``step``, as the decimals they are written
    with (``0.3`` is a multiple of ``0.1``, which binary floats would deny)."""
    try:
        return (_exact(value) / _exact(step)).denominator == 1
    except (ValueError, OverflowError, ZeroDivisionError):  # infinity, NaN
        return False


def _exact(number: float) -> Fraction:
    return Fraction(number) if isinstance(number, int) else Fraction(repr(number))


def target(ref: object, root: Any) -> Any:
    """What ``ref`` points at in ``root``; ``LookupError`` saying why it points at nothing."""
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise LookupError(
            "is not a JSON pointer within the schema (such as '#/$defs/Name'): refs to other "
            "documents, and anchors, are not supported"
        )
    pointer = unquote(ref[1:])
    if pointer and not pointer.startswith("/"):
        raise LookupError("is not a JSON pointer (after '#' it must start with '/')")
    node = root
    for token in pointer.split("/")[1:]:
        token = token.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list) and _index(token) < len(node):
            node = node[_index(token)]
        else:
            raise LookupError(f"points at nothing: the schema has no {token!r} there")
    if not isinstance(node, (dict, bool)):
        raise LookupError(f"points at a {type(node).__name__}, not at a schema")
    return node


def _index(token: str) -> int:
    """The array index ``token`` names (digits, no leading zero), or a huge number."""
    if token.isascii() and token.isdigit() and (token == "0" or not token.startswith("0")):
        return int(token)
    return 2**63


def _resolve(ref: str, root: dict[str, Any]) -> Any:
    try:
        return target(ref, root)
    except LookupError as exc:
        raise UserError(f"the schema's $ref {ref!r} {exc}") from None
