"""Strict JSON schemas for OpenAI's APIs (pure, no I/O).

Strict mode makes the model's tool arguments and structured replies always parse and match
the schema, but it takes a subset of JSON Schema: every object lists all its properties as
``required`` and forbids others (``additionalProperties: false``), and a ``$ref`` stands
alone. :func:`strict_schema` rewrites a schema into that form when it can: the optional
properties become required (the model then always gives them; a default of ``null`` is
dropped, as the model now says it), a ``$ref`` with sibling keys is inlined. A schema it
cannot rewrite faithfully (an object open to other properties, a recursive ``$ref`` with
siblings) gives ``None``, and is sent as it is, without strict mode.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = ["strict_schema"]

_NESTED_LISTS = ("anyOf", "allOf", "oneOf", "prefixItems")
_NESTED_MAPS = ("properties", "$defs", "definitions")
_MAX_DEPTH = 64


class _NotStrict(Exception):
    """The schema cannot be made strict without changing what it accepts."""


def strict_schema(schema: Any) -> dict[str, Any] | None:
    """``schema`` rewritten for strict mode, or ``None`` when it cannot be (see the module).

    The root must be an object, as the APIs require for function parameters and replies.
    """
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return None
    root = copy.deepcopy(dict(schema))
    try:
        rewritten: dict[str, Any] = _rewrite(root, root, 0)
    except _NotStrict:
        return None
    return rewritten


def _rewrite(node: Any, root: dict[str, Any], depth: int) -> Any:
    if depth > _MAX_DEPTH:
        raise _NotStrict
    if isinstance(node, list):
        return [_rewrite(item, root, depth + 1) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node and len(node) > 1:
        node = _inlined(node, root)
    if node.get("type") == "object" or "properties" in node:
        extra = node.get("additionalProperties", False)
        if extra is not False:
            raise _NotStrict  # open to other keys: strict mode would forbid what is allowed
        properties = node.get("properties") or {}
        if not isinstance(properties, dict):
            raise _NotStrict
        node["additionalProperties"] = False
        node["properties"] = properties
        node["required"] = list(properties)
    if "default" in node and node["default"] is None:
        del node["default"]
    for key in _NESTED_MAPS:
        children = node.get(key)
        if isinstance(children, dict):
            node[key] = {name: _rewrite(child, root, depth + 1) for name, child in children.items()}
    for key in _NESTED_LISTS:
        if isinstance(node.get(key), list):
            node[key] = _rewrite(node[key], root, depth + 1)
    if isinstance(node.get("items"), (dict, list)):
        node["items"] = _rewrite(node["items"], root, depth + 1)
    return node


def _inlined(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    """A ``$ref`` with sibling keys (a description, say) as the definition it names, with
    those keys on top."""
    ref = node["$ref"]
    if not isinstance(ref, str) or not ref.startswith("#/"):
        raise _NotStrict
    target: Any = root
    for part in ref[2:].split("/"):
        if not isinstance(target, dict) or part not in target:
            raise _NotStrict
        target = target[part]
    if not isinstance(target, dict) or "$ref" in target:
        raise _NotStrict
    merged = copy.deepcopy(target)
    merged.update({key: value for key, value in node.items() if key != "$ref"})
    return merged
