"""Structured output: every kind of schema, and what a failed validation keeps."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

import pydantic
import pytest

from aniki import Agent, OutputValidationError, Runner, UserError
from aniki.testing import MockProvider

from .helpers import MODES, drive


class CityModel(pydantic.BaseModel):
    name: str
    population: int


@dataclass
class CityData:
    name: str
    population: int


class CityDict(TypedDict):
    name: str
    population: int


CITY_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
    "required": ["name", "population"],
    "additionalProperties": False,
}

SCHEMAS: list[tuple[Any, Any]] = [
    (CityModel, CityModel(name="Oslo", population=700000)),
    (CityData, CityData(name="Oslo", population=700000)),
    (CityDict, {"name": "Oslo", "population": 700000}),
    (CITY_SCHEMA, {"name": "Oslo", "population": 700000}),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("schema", "expected"), SCHEMAS)
async def test_valid_output_for_every_schema_kind(mode: str, schema: Any, expected: Any) -> None:
    provider = MockProvider()
    provider.enqueue_response(content='{"name": "Oslo", "population": 700000}')
    agent = Agent("A", model="m", provider=provider, output_schema=schema)
    result = await drive(mode, Runner(), agent, message="biggest city in Norway?")
    assert result.output == expected
    sent = provider.requests[0].output_schema
    assert sent is not None and sent["properties"]["population"]["type"] == "integer"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("schema", [s for s, _ in SCHEMAS])
@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ('{"name": "Oslo"}', "population"),
        ('{"name": "Oslo", "population": "many"}', "population"),
        ("not json at all", "JSON"),
    ],
)
async def test_invalid_output_raises_and_keeps_the_turn_only_in_run(
    mode: str, schema: Any, reply: str, problem: str
) -> None:
    provider = MockProvider()
    provider.enqueue_response(content=reply)
    agent = Agent("A", model="m", provider=provider, output_schema=schema, output_retries=0)
    with pytest.raises(OutputValidationError) as info:
        await drive(mode, Runner(), agent, message="go")
    assert info.value.raw == reply
    assert any(problem.lower() in e.lower() for e in info.value.errors), info.value.errors
    roles = [m.role for m in agent.session.get_messages()]  # type: ignore[union-attr]
    assert roles == (["user"] if mode == "stream" else ["user", "assistant"])


def test_dict_schema_rules() -> None:
    from aniki._jsonschema import schema_errors

    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "kind": {"enum": ["a", "b"]},
            "ref": {"$ref": "#/$defs/code"},
            "either": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        },
        "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{3}$"}},
    }
    assert schema_errors({"tags": ["x"], "kind": "a", "ref": "ABC", "either": None}, schema) == []
    errors = schema_errors({"tags": [], "kind": "c", "ref": "abc", "either": "x"}, schema)
    assert len(errors) == 4
    assert schema_errors(True, {"type": "integer"}) == ["$: expected integer, got bool"]


def test_unusable_output_schema_is_a_user_error() -> None:
    with pytest.raises(UserError, match="output_schema"):
        Agent("A", model="m", provider=MockProvider(), output_schema=object())
    with pytest.raises(UserError, match="empty"):
        Agent("A", model="m", provider=MockProvider(), output_schema={})
