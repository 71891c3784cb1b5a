"""The JSON Schema validator behind ``Agent(output_schema={...})``: a table of each keyword
pydantic emits, with values that fit and values that do not (booleans never equal to
numbers), checked against the reference implementation (``jsonschema``) when it is
installed; the texts a model reads; and schemas refused when the agent is built."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional

import pydantic
import pytest

from aniki import Agent, UserError
from aniki._jsonschema import check_schema, schema_errors
from aniki.testing import MockProvider


@dataclass(frozen=True)
class Case:
    name: str
    schema: dict[str, Any]
    fits: list[Any]
    breaks: list[Any]


CASES = [
    Case("type integer", {"type": "integer"}, [1, -5, 1.0, 10**30], [True, 1.5, "1", None]),
    Case("type number", {"type": "number"}, [1, 2.5, -0.0], [True, False, "1", None]),
    Case("type boolean", {"type": "boolean"}, [True, False], [0, 1, "true", None]),
    Case("type null", {"type": "null"}, [None], [0, False, "", []]),
    Case("type string", {"type": "string"}, ["", "x"], [1, None, ["x"]]),
    Case("type object", {"type": "object"}, [{}, {"a": 1}], [[], "{}", None]),
    Case("type array", {"type": "array"}, [[], [1, "a"]], [{}, "[]", None]),
    Case("type list", {"type": ["string", "null"]}, ["a", None], [1, False, []]),
    Case("enum of numbers", {"enum": [1, 2]}, [1, 2, 1.0], [True, False, "1", 3]),
    Case("enum of true and null", {"enum": [True, None]}, [True, None], [1, 0, False, "null"]),
    Case(
        "enum of containers",
        {"enum": [[1], {"a": 0}]},
        [[1], [1.0], {"a": 0}],
        [[True], {"a": False}, [1, 1], {}],
    ),
    Case("const true", {"const": True}, [True], [1, 1.0, "true", False]),
    Case("const zero", {"const": 0}, [0, 0.0], [False, None, "0"]),
    Case(
        "const object",
        {"const": {"a": [1, False]}},
        [{"a": [1, False]}, {"a": [1.0, False]}],
        [{"a": [True, 0]}, {"a": [1, False], "b": 1}],
    ),
    Case(
        "properties and required",
        {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"],
        },
        [{"name": "A"}, {"name": "A", "age": 3}, {"name": "A", "other": 1}],
        [{}, {"age": 3}, {"name": 1}, {"name": "A", "age": "3"}],
    ),
    Case(
        "additionalProperties false",
        {"properties": {"a": {}}, "additionalProperties": False},
        [{}, {"a": 1}, "not an object"],
        [{"b": 1}, {"a": 1, "b": 2}],
    ),
    Case(
        "additionalProperties schema",
        {"type": "object", "additionalProperties": {"type": "integer"}},
        [{}, {"x": 1, "y": 2}],
        [{"x": "1"}, {"x": True}],
    ),
    Case(
        "patternProperties",
        {
            "type": "object",
            "patternProperties": {"^[a-z]+$": {"type": "integer"}},
            "additionalProperties": False,
        },
        [{}, {"abc": 1}],
        [{"abc": "1"}, {"ABC": 1}, {"a1": 1}],
    ),
    Case(
        "propertyNames",
        {"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}},
        [{}, {"abc": 1}],
        [{"abcd": 1}, {"A": 1}],
    ),
    Case(
        "minProperties and maxProperties",
        {"type": "object", "minProperties": 1, "maxProperties": 2},
        [{"a": 1}, {"a": 1, "b": 2}],
        [{}, {"a": 1, "b": 2, "c": 3}],
    ),
    Case(
        "items",
        {"type": "array", "items": {"type": "integer"}},
        [[], [1, 2, 3.0]],
        [["1"], [1, True], [1, 2.5]],
    ),
    Case(
        "prefixItems, nothing after",
        {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "items": False,
        },
        [[1, "a"], [1], []],
        [["a", 1], [1, "a", 2], [True, "a"]],
    ),
    Case(
        "prefixItems, then items",
        {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "string"}},
        [[1], [1, "a", "b"]],
        [[1, 2], ["a"], [1, "a", None]],
    ),
    Case(
        "minItems and maxItems",
        {"type": "array", "minItems": 1, "maxItems": 2},
        [[1], [1, 2]],
        [[], [1, 2, 3]],
    ),
    Case(
        "uniqueItems",
        {"type": "array", "uniqueItems": True},
        [[], [1, True], [0, False], [1, "1"], [{"a": 1}, {"a": True}], [[1], [True]], [None]],
        [[1, 1.0], ["a", "a"], [{"a": 1, "b": 2}, {"b": 2, "a": 1}], [[0], [0.0]], [None, None]],
    ),
    Case("uniqueItems false", {"uniqueItems": False}, [[1, 1]], []),
    Case(
        "minimum and maximum",
        {"type": "number", "minimum": 1, "maximum": 2.5},
        [1, 2.5, 1.5],
        [0.99, 2.51, -1],
    ),
    Case(
        "exclusive bounds",
        {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
        [1, 9],
        [0, 10, -3],
    ),
    Case("multipleOf an integer", {"multipleOf": 5}, [0, 10, -15, 10.0], [7, 2.5]),
    Case("multipleOf a decimal", {"multipleOf": 0.5}, [1, 1.5, -0.5], [0.75, 1.2]),
    Case(
        "minLength and maxLength",
        {"type": "string", "minLength": 2, "maxLength": 3},
        ["ab", "abc", "é😀"],  # characters, not bytes
        ["a", "abcd", ""],
    ),
    Case("pattern", {"type": "string", "pattern": "^[A-Z]{3}$"}, ["ABC"], ["abc", "ABCD"]),
    Case("pattern searches", {"pattern": "b"}, ["abc", 12], ["ac"]),
    Case(
        "anyOf",
        {"anyOf": [{"type": "integer"}, {"type": "string", "minLength": 2}]},
        [1, "ab"],
        ["a", None, 1.5],
    ),
    Case(
        "oneOf",
        {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 10}]},
        [1, 10.5],
        [10, "x"],  # 10 fits both
    ),
    Case(
        "allOf",
        {"allOf": [{"type": "integer"}, {"minimum": 3}]},
        [3, 4],
        [2, 3.5, "3"],
    ),
    Case("not", {"not": {"type": "integer"}}, ["1", 1.5, None, True], [1, 0, 2.0]),
    Case(
        "nullable, as pydantic writes Optional",
        {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        [1, None],
        ["1", True, 1.5],
    ),
    Case(
        "$ref to $defs",
        {
            "type": "object",
            "properties": {"city": {"$ref": "#/$defs/City"}},
            "$defs": {
                "City": {
                    "type": "object",
                    "properties": {"name": {"type": "string"}},
                    "required": ["name"],
                }
            },
        },
        [{}, {"city": {"name": "Oslo"}}],
        [{"city": {}}, {"city": {"name": 1}}, {"city": "Oslo"}],
    ),
    Case(
        "$ref with escapes",
        {
            "properties": {
                "a": {"$ref": "#/$defs/a~1b"},
                "b": {"$ref": "#/$defs/c~0d"},
                "c": {"$ref": "#/$defs/e%25f"},
                "d": {"$ref": "#/$defs/g%20h"},
            },
            "$defs": {
                "a/b": {"type": "integer"},
                "c~d": {"type": "string"},
                "e%f": {"type": "null"},
                "g h": {"type": "boolean"},
            },
        },
        [{"a": 1, "b": "x", "c": None, "d": True}],
        [{"a": "1"}, {"b": 1}, {"c": 0}, {"d": 1}],
    ),
    Case(
        "recursive $ref",
        {
            "$ref": "#/$defs/Node",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}
                    },
                    "additionalProperties": False,
                }
            },
        },
        [{}, {"children": [{"children": [{}]}]}],
        [{"children": [{"x": 1}]}, {"children": [1]}],
    ),
    Case(
        "$ref to the root",
        {"properties": {"next": {"$ref": "#"}}, "type": "object"},
        [{"next": {}}],
        [{"next": 1}],
    ),
    Case(
        "format is not checked",
        {"type": "string", "format": "date-time"},
        ["2024-01-01T00:00:00Z", "not a date"],
        [1],
    ),
    Case(
        "boolean schemas",
        {"properties": {"never": False, "any": True}},
        [{}, {"any": [1, {}]}],
        [{"never": None}],
    ),
]


def test_the_table_covers_every_keyword_checked() -> None:
    from aniki._jsonschema._schemas import _SHAPES

    seen: set[str] = set()
    pending: list[Any] = [case.schema for case in CASES]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            seen.update(node)
            pending += node.values()
        elif isinstance(node, list):
            pending += node
    legacy = {"additionalItems", "definitions"}  # the pre-2020 spellings: tested below
    assert set(_SHAPES) - legacy <= seen


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_each_keyword_with_values_that_fit_and_values_that_do_not(case: Case) -> None:
    check_schema(case.schema, "output_schema")
    for value in case.fits:
        assert schema_errors(value, case.schema) == [], f"{value!r} should fit"
    for value in case.breaks:
        assert schema_errors(value, case.schema), f"{value!r} should not fit"


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_verdicts_agree_with_the_reference_implementation(case: Case) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    reference = jsonschema.Draft202012Validator(case.schema)
    for value in case.fits:
        assert reference.is_valid(value), f"the reference refuses {value!r}"
    for value in case.breaks:
        assert not reference.is_valid(value), f"the reference accepts {value!r}"


def test_multiple_of_a_decimal_goes_by_the_decimals_written() -> None:
    # 0.07 / 0.01 is 7.000000000000001 in binary floats: the decimals are what was meant.
    schema = {"type": "number", "multipleOf": 0.01}
    for value in (0.07, 19.99, 5, 0.3):
        assert schema_errors(value, schema) == []
    assert schema_errors(0.075, schema) == ["$: not a multiple of 0.01"]
    assert schema_errors(1e308, {"multipleOf": 0.123456789}) == ["$: not a multiple of 0.123456789"]
    assert schema_errors(float("inf"), {"multipleOf": 2}) == ["$: not a multiple of 2"]


def test_the_older_spellings_of_tuples_and_definitions() -> None:
    schema = {
        "items": [{"type": "integer"}, {"$ref": "#/definitions/word"}],
        "additionalItems": False,
        "definitions": {"word": {"type": "string"}},
    }
    check_schema(schema, "output_schema")
    assert schema_errors([1, "a"], schema) == []
    assert schema_errors([1, 2], schema) == ["$[1]: expected string, got int"]
    assert schema_errors([1, "a", 3], schema) == ["$[2]: no value is allowed here"]


def test_the_texts_a_model_reads() -> None:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "population": {"type": "integer", "minimum": 0},
            "kind": {"enum": [1, 2]},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
            "pair": {"type": "array", "prefixItems": [{"type": "integer"}], "items": False},
            "code": {"not": {"const": "XXX"}},
        },
        "required": ["name", "population"],
        "additionalProperties": False,
    }
    value = {
        "population": "many",
        "kind": True,
        "tags": ["a", "b", "a"],
        "pair": [1, 2],
        "code": "XXX",
        "extra": 1,
    }
    assert schema_errors(value, schema) == [
        "$.name: required property is missing",
        "$.population: expected integer, got str",
        "$.kind: True is not one of [1, 2]",
        "$.tags: items [0] and [2] are equal; they must be unique",
        "$.pair[1]: no value is allowed here",
        "$.code: matches the schema under not, which it must not",
        "$.extra: unexpected property",
    ]
    assert schema_errors(1, {"const": True}) == ["$: expected True"]
    assert schema_errors(-1, schema["properties"]["population"]) == ["$: less than the minimum 0"]


def test_pydantic_schemas_are_accepted_and_agree_with_pydantic() -> None:
    class Place(pydantic.BaseModel):
        name: Annotated[str, pydantic.StringConstraints(min_length=1, pattern=r"^\S")]

    class Trip(pydantic.BaseModel):
        where: Place
        stops: list[Place] = []
        legs: tuple[int, str]
        codes: set[int] = set()
        scores: dict[Annotated[str, pydantic.StringConstraints(max_length=3)], int] = {}
        mode: Literal["car", "train"]
        seats: Optional[Annotated[int, pydantic.Field(ge=1, multiple_of=2)]] = None  # noqa: UP045
        ratio: Annotated[float, pydantic.Field(gt=0, lt=1)] = 0.5

    schema = pydantic.TypeAdapter(Trip).json_schema()
    check_schema(schema, "output_schema")
    good = {"where": {"name": "Oslo"}, "legs": [1, "a"], "mode": "car", "seats": 4}
    bad = [
        {**good, "legs": [1, "a", 2]},
        {**good, "legs": ["a", 1]},
        {**good, "mode": "boat"},
        {**good, "seats": 3},
        {**good, "seats": True},
        {**good, "ratio": 1},
        {**good, "where": {"name": " x"}},
        {**good, "stops": [{}]},
        {**good, "scores": {"abcd": 1}},
    ]
    assert schema_errors(good, schema) == []
    Trip.model_validate_json(json.dumps(good), strict=True)
    for value in bad:
        assert schema_errors(value, schema), value
        with pytest.raises(pydantic.ValidationError):
            Trip.model_validate_json(json.dumps(value), strict=True)
    # pydantic makes a set of a list with repeats; its schema (uniqueItems) refuses them.
    assert schema_errors({**good, "codes": [1, 1]}, schema) == [
        "$.codes: items [0] and [1] are equal; they must be unique"
    ]


@pytest.mark.parametrize(
    ("schema", "problem"),
    [
        (
            {"properties": {"a": {"$ref": "#/$defs/Missing"}}, "$defs": {}},
            "the $ref '#/$defs/Missing' at #/properties/a points at nothing",
        ),
        ({"$ref": "#/$defs/a/b"}, "the $ref '#/$defs/a/b' at # points at nothing"),
        ({"$ref": "other.json#/x"}, "refs to other documents, and anchors, are not supported"),
        ({"$ref": "#anchor"}, "'#anchor' at # is not a JSON pointer"),
        ({"$ref": "#/x", "x": 3}, "points at a int, not at a schema"),
        ({"pattern": "("}, "#/pattern must be a regular expression that compiles, not '('"),
        ({"items": {"minLength": "3"}}, "#/items/minLength must be a whole number from 0"),
        ({"type": "str"}, "#/type must be one of ['object', 'array'"),
        ({"exclusiveMinimum": True}, "#/exclusiveMinimum must be a number, not True"),
        ({"multipleOf": 0}, "#/multipleOf must be a number greater than 0"),
        ({"anyOf": []}, "#/anyOf must be a non-empty list of schemas"),
        ({"properties": {"a": 1}}, "#/properties must map names to schemas"),
        ({"required": "a"}, "#/required must be a list of property names"),
        ({"enum": [{1, 2}]}, "#/enum must be a list of JSON values"),
        (
            {"$ref": "#/$defs/A", "$defs": {"A": {"allOf": [{"$ref": "#/$defs/A"}]}}},
            "the schema at #/$defs/A applies itself again",
        ),
        ({"anyOf": [{"$ref": "#"}, {"type": "null"}]}, "the schema at # applies itself again"),
    ],
)
def test_a_schema_that_cannot_be_used_fails_when_the_agent_is_built(
    schema: dict[str, Any], problem: str
) -> None:
    with pytest.raises(UserError) as info:
        Agent("A", model="m", provider=MockProvider(), output_schema=schema)
    message = str(info.value)
    assert message.startswith("output_schema is not a usable JSON schema: "), message
    assert problem in message, message


def test_a_ref_that_resolves_nowhere_is_a_clear_error_even_unchecked() -> None:
    with pytest.raises(UserError, match=r"the schema's \$ref '#/\$defs/a~1b' points at nothing"):
        schema_errors(1, {"$ref": "#/$defs/a~1b", "$defs": {"a": {}}})


def test_values_nested_deeper_than_python_can_walk_are_an_error_not_a_crash() -> None:
    deep: Any = 0
    for _ in range(5000):
        deep = [deep]
    schema = {"$defs": {"n": {"anyOf": [{"type": "integer"}, {"items": {"$ref": "#/$defs/n"}}]}}}
    schema["$ref"] = "#/$defs/n"
    check_schema(schema, "output_schema")
    assert schema_errors(deep, schema) == ["$: nested too deeply to check"]
