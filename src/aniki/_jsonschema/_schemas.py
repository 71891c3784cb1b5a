"""Whether a JSON schema can be used at all, checked once when the agent is built: each
``$ref`` points at a schema, each pattern compiles, each checked keyword holds the right kind
of value, and no schema applies itself again before looking into the value."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from .._checks import shown
from ..errors import UserError
from ._validate import TYPES, target

__all__ = ["check_schema"]


def _is_schema(value: Any) -> bool:
    return isinstance(value, (dict, bool))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, int, float)):  # bool is an int
        return True
    if isinstance(value, (list, tuple)):
        return all(map(_is_json, value))
    return (
        isinstance(value, dict)
        and all(isinstance(key, str) for key in value)
        and all(map(_is_json, value.values()))
    )


def _compiles(pattern: Any) -> bool:
    try:
        re.compile(pattern)
    except (re.error, TypeError):
        return False
    return True


def _names_types(value: Any) -> bool:
    names = [value] if isinstance(value, str) else value
    return isinstance(names, list) and bool(names) and all(name in TYPES for name in names)


# Each keyword checked, the shape its value must have (and what it holds, for the walk).
_SHAPES: dict[str, tuple[str, Callable[[Any], bool], str]] = {
    **dict.fromkeys(
        ("not", "additionalProperties", "propertyNames", "additionalItems"),
        ("schema", _is_schema, "must be a schema (a dict, true or false)"),
    ),
    **dict.fromkeys(
        ("allOf", "anyOf", "oneOf", "prefixItems"),
        (
            "schemas",
            lambda v: isinstance(v, list) and bool(v) and all(map(_is_schema, v)),
            "must be a non-empty list of schemas (dicts, true or false)",
        ),
    ),
    **dict.fromkeys(
        ("properties", "$defs", "definitions"),
        (
            "schema map",
            lambda v: isinstance(v, dict) and all(map(_is_schema, v.values())),
            "must map names to schemas (dicts, true or false)",
        ),
    ),
    "patternProperties": (
        "schema map",
        lambda v: (
            isinstance(v, dict) and all(map(_compiles, v)) and all(map(_is_schema, v.values()))
        ),
        "must map regular expressions to schemas (dicts, true or false)",
    ),
    "items": (
        "schema or schemas",
        lambda v: _is_schema(v) or (isinstance(v, list) and all(map(_is_schema, v))),
        "must be a schema (a dict, true or false)",
    ),
    **dict.fromkeys(
        ("minItems", "maxItems", "minLength", "maxLength", "minProperties", "maxProperties"),
        (
            "",
            lambda v: _is_number(v) and isinstance(v, int) and v >= 0,
            "must be a whole number from 0",
        ),
    ),
    **dict.fromkeys(
        ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"),
        ("", _is_number, "must be a number"),
    ),
    "multipleOf": ("", lambda v: _is_number(v) and v > 0, "must be a number greater than 0"),
    "required": (
        "",
        lambda v: isinstance(v, list) and all(isinstance(name, str) for name in v),
        "must be a list of property names (strings)",
    ),
    "uniqueItems": ("", lambda v: isinstance(v, bool), "must be true or false"),
    "pattern": ("", _compiles, "must be a regular expression that compiles"),
    "type": ("", _names_types, f"must be one of {list(TYPES)} or a list of them"),
    "enum": ("", lambda v: isinstance(v, list) and _is_json(v), "must be a list of JSON values"),
    "const": ("", _is_json, "must be a JSON value"),
    "$ref": ("ref", lambda v: True, ""),
}


def check_schema(schema: object, what: str) -> None:
    """:class:`~aniki.UserError` naming the first places where ``schema`` cannot be used (by
    JSON pointer, ``#/properties/city``), with ``what`` (``"output_schema"``) saying whose."""
    problems = _schema_problems(schema)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise UserError(f"{what} is not a usable JSON schema: {'; '.join(problems[:3])}{more}")


def _schema_problems(root: object) -> list[str]:
    if not isinstance(root, dict):
        return [f"it must be a dict, not a {type(root).__name__}"]
    problems: list[str] = []
    seen: dict[int, tuple[Any, str]] = {}  # each schema met, by id, and where it is
    pending: list[tuple[Any, str]] = [(root, "#")]
    while pending:
        node, at = pending.pop()
        if not isinstance(node, dict) or id(node) in seen:
            continue
        seen[id(node)] = (node, at)
        for key, value in node.items():
            if key not in _SHAPES:
                continue
            holds, fits, needs = _SHAPES[key]
            place = f"{at}/{_escaped(key)}"
            if not fits(value):
                problems.append(f"{place} {needs}, not {shown(value)}")
            elif holds == "ref":
                try:  # what it points at may lie outside the keywords walked
                    pending.append((target(value, root), value))
                except LookupError as exc:
                    problems.append(f"the $ref {value!r} at {at} {exc}")
            else:
                pending += _subschemas(holds, value, place)
    loop = None if problems else _first_loop(root, seen)
    if loop is not None:
        problems.append(
            f"the schema at {loop} applies itself again (through $ref, allOf, anyOf, oneOf "
            "or not) before looking into the value, so checking a value would never end"
        )
    return problems


def _escaped(name: str) -> str:
    """``name`` as a JSON pointer's token."""
    return name.replace("~", "~0").replace("/", "~1")


def _subschemas(holds: str, value: Any, place: str) -> list[tuple[Any, str]]:
    """The schemas in a keyword's ``value``, with where each is."""
    if holds == "schema map":
        return [(item, f"{place}/{_escaped(name)}") for name, item in value.items()]
    if holds in ("schemas", "schema or schemas") and isinstance(value, list):
        return [(item, f"{place}/{index}") for index, item in enumerate(value)]
    return [(value, place)] if holds else []


def _first_loop(root: dict[str, Any], seen: dict[int, tuple[Any, str]]) -> str | None:
    """Where a schema applies itself to the same value again, through ``$ref`` and the
    combinators, before looking into it; ``None`` when none does."""
    done: dict[int, bool] = {}  # False while being followed

    def follow(node: Any) -> str | None:
        if id(node) in done:
            return None if done[id(node)] else seen[id(node)][1]
        done[id(node)] = False
        for sub in _in_place(node, root):
            found = follow(sub)
            if found is not None:
                return found
        done[id(node)] = True
        return None

    return next((at for node, _ in seen.values() if (at := follow(node)) is not None), None)


def _in_place(node: Any, root: dict[str, Any]) -> list[Any]:
    """The schemas ``node`` applies to the very value it checks."""
    if not isinstance(node, dict):
        return []
    found = [*node.get("allOf", ()), *node.get("anyOf", ()), *node.get("oneOf", ())]
    if "not" in node:
        found.append(node["not"])
    if "$ref" in node:
        found.append(target(node["$ref"], root))
    return found
