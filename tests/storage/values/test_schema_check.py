"""``storage.schema_violations``: every violated keyword with its path, never the value."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from storage import Violation, schema_violations

SECRET = "s3cr3t-c0rgi-7781"


class Colour(enum.StrEnum):
    RED = "red"
    GREEN = "green"


class Tag(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(max_length=8)
    colour: Colour


class Report(BaseModel):
    count: int = Field(ge=0)
    tags: list[Tag]
    note: str | None = None
    code: str = Field(default="A1", pattern=r"^[A-Z][0-9]$")


REPORT_SCHEMA = Report.model_json_schema(mode="serialization")


def shown(violations: list[Violation]) -> list[str]:
    return [str(violation) for violation in violations]


@pytest.mark.parametrize(
    "value",
    [
        {"count": 1, "tags": [{"name": "a", "colour": "red"}], "note": None},
        {"count": 1.0, "tags": []},  # JSON has one number type: 1.0 is an integer
        {"count": 0, "tags": [], "code": "B7"},
    ],
)
def test_a_fitting_value_has_no_violations(value: Any) -> None:
    assert schema_violations(value, REPORT_SCHEMA) == []


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"tags": []}, ["$.count: is required but missing"]),
        ({"count": True, "tags": []}, ["$.count: expected integer, got boolean"]),
        ({"count": SECRET, "tags": []}, ["$.count: expected integer, got string"]),
        ({"count": -1, "tags": []}, ["$.count: must be >= 0"]),
        (
            {"count": 1, "tags": [], "code": SECRET},
            ['$.code: does not match the pattern "^[A-Z][0-9]$"'],
        ),
        (
            {"count": 1, "tags": [{"name": SECRET, "colour": "red"}]},
            ["$.tags[0].name: must be at most 8 characters long"],
        ),
        (
            {"count": 1, "tags": [{"name": "a", "colour": "red"}, {"name": "b", "colour": SECRET}]},
            ['$.tags[1].colour: is not one of the allowed values: "red", "green"'],
        ),
        (
            {"count": 1, "tags": [{"name": "a", "colour": "red", SECRET: 1}]},
            [f'$.tags[0]["{SECRET}"]: is not an allowed property'],
        ),
        ({"count": 1, "tags": [], "note": [SECRET]}, ["$.note: fits none of the 2 allowed shapes"]),
    ],
)
def test_each_misfit_names_its_path_and_keyword_never_the_value(
    value: Any, expected: list[str]
) -> None:
    got = schema_violations(value, REPORT_SCHEMA)
    assert shown(got) == expected
    if SECRET not in expected[0]:  # a key is a position; values never appear
        assert all(SECRET not in text for text in shown(got))


def test_every_violated_keyword_is_reported_not_only_the_first() -> None:
    value = {"count": "42", "tags": [{"name": "a", "colour": "blue", "extra": 1}], "code": "x"}
    got = schema_violations(value, REPORT_SCHEMA)
    assert [(v.path, v.keyword) for v in got] == [
        ("$.code", "pattern"),
        ("$.count", "type"),
        ("$.tags[0].colour", "enum"),
        ("$.tags[0].extra", "additionalProperties"),
    ]


def test_one_of_const_format_and_false_schemas() -> None:
    one_of = {"oneOf": [{"type": "integer"}, {"type": "number"}, {"const": "a"}]}
    assert shown(schema_violations(True, one_of)) == ["$: fits none of the 3 allowed shapes"]
    assert shown(schema_violations(1, one_of)) == [
        "$: fits more than one of the 3 shapes where one is allowed"
    ]
    assert shown(schema_violations("b", {"const": "a"})) == ['$: is not the allowed value "a"']
    assert shown(schema_violations("2024-13-01", {"format": "date"})) == [
        '$: is not a valid "date"'
    ]
    closed = {"type": "object", "properties": {"gone": False}}
    assert shown(schema_violations({"gone": 1}, closed)) == ["$.gone: is not allowed here"]
    assert shown(schema_violations(1, {"allOf": [False]})) == ["$: is not allowed here"]
    pair = {"type": "array", "prefixItems": [{"type": "integer"}], "items": False}
    assert schema_violations([1], pair) == []
    assert shown(schema_violations([1, 2], pair)) == ["$[1]: is not allowed here"]


def test_a_broken_schema_is_reported_rather_than_said_to_fit() -> None:
    looping = {"$ref": "#/$defs/A", "$defs": {"A": {"$ref": "#/$defs/A"}}}
    assert shown(schema_violations({"a": 1}, looping)) == [
        "$: the declared schema's references loop"
    ]
    assert shown(schema_violations(1, {"type": 5})) == ["$: the declared schema is invalid at type"]
    missing = schema_violations(1, {"$ref": "#/$defs/nowhere"})
    assert [(v.path, v.keyword) for v in missing] == [("$", "schema")]
    assert "unresolvable" in missing[0].message
