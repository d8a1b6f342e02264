"""The completion form's skeleton and field list, built from a declared JSON schema (pure)."""

from __future__ import annotations

import json
from typing import Literal

from pydantic import BaseModel, Field

from awa_tui.skeleton import MAX_DEPTH, FieldRule, field_rules, skeleton_text
from awa_tui.validation import check_output
from awa_tui.widgets.field_list import rules_text
from storage import DeclaredOutput


class Address(BaseModel):
    city: str
    zip: str | None = None


class Line(BaseModel):
    sku: str
    quantity: int = Field(ge=1)


class Order(BaseModel):
    status: Literal["paid", "refused", "pending"]
    reference: str = Field(description="the provider's reference")
    amount_cents: int
    ship_to: Address
    lines: list[Line]
    note: str | None = None
    rush: bool = False


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


def schema_of(model: type[BaseModel]) -> dict[str, object]:
    return model.model_json_schema(mode="serialization")


def test_required_fields_at_placeholders_enums_at_their_first_choice_nested_objects_filled() -> (
    None
):
    schema = schema_of(Order)
    text = skeleton_text(schema)
    assert json.loads(text) == {
        "status": "paid",
        "reference": "",
        "amount_cents": 0,
        "ship_to": {"city": ""},  # nested through $defs, its optional zip left out
        "lines": [],
    }
    assert text.startswith('{\n  "status": "paid",')  # indented, in the schema's order
    # The skeleton fits the schema apart from its values: the form opens on a valid output.
    assert check_output(text, DeclaredOutput({"type": "Order", "schema": schema})).ok


def test_the_field_list_names_every_field_required_first_with_choices_and_descriptions() -> None:
    rules = {rule.name: rule for rule in field_rules(schema_of(Order))}
    assert list(rules)[:5] == ["status", "reference", "amount_cents", "ship_to", "ship_to.city"]
    assert rules["status"] == FieldRule(
        "status", "string", True, ('"paid"', '"refused"', '"pending"'), None
    )
    assert rules["reference"].description == "the provider's reference"
    assert rules["ship_to"].type == "object (Address)"
    assert rules["ship_to.zip"] == FieldRule("ship_to.zip", "string | null", False)
    assert rules["lines"].type == "array of object (Line)"
    assert rules["lines[].quantity"].required
    assert not rules["note"].required
    assert rules["rush"].type == "boolean"
    shown = rules_text(list(rules.values())).plain
    assert 'status string · required\n  one of "paid", "refused", "pending"' in shown
    assert "note string | null · optional" in shown


def test_arrays_with_a_minimum_get_that_many_items_and_numbers_their_lower_bound() -> None:
    schema = {
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
            "count": {"type": "integer", "minimum": 3},
            "ratio": {"type": "number", "exclusiveMinimum": 0},
            "at": {"type": "string", "format": "date-time"},
            "kind": {"const": "v1"},
        },
        "required": ["tags", "count", "ratio", "at", "kind"],
    }
    value = json.loads(skeleton_text(schema))
    assert value == {
        "tags": ["", ""],
        "count": 3,
        "ratio": 0,
        "at": "1970-01-01T00:00:00Z",
        "kind": "v1",
    }
    assert json.loads(skeleton_text({"type": "array", "items": {"type": "integer"}})) == []


def test_no_schema_opens_empty() -> None:
    assert skeleton_text(None) == ""
    assert field_rules(None) == []
    assert skeleton_text(True) == ""  # "anything goes" is a schema with nothing to fill in


def test_references_it_cannot_follow_fall_back_to_null_and_any() -> None:
    remote = {"$ref": "https://example.com/schemas/order.json"}
    assert skeleton_text(remote) == ""  # nothing to follow: the form opens empty
    assert field_rules(remote) == []
    schema = {
        "type": "object",
        "properties": {
            "order": {"$ref": "https://example.com/schemas/order.json"},
            "missing": {"$ref": "#/$defs/Nowhere"},
            "id": {"type": "integer"},
        },
        "required": ["order", "missing", "id"],
    }
    assert json.loads(skeleton_text(schema)) == {"order": None, "missing": None, "id": 0}
    rules = field_rules(schema)
    assert [(r.name, r.type) for r in rules] == [
        ("order", "any (not followed)"),
        ("missing", "any (not followed)"),
        ("id", "integer"),
    ]


def test_a_model_that_contains_itself_is_bounded() -> None:
    schema = schema_of(Tree)
    assert json.loads(skeleton_text(schema)) == {"name": ""}
    assert [r.name for r in field_rules(schema)] == ["name", "children"]  # listed once
    deep: dict[str, object] = {"type": "string"}
    for _ in range(MAX_DEPTH + 3):
        deep = {"type": "object", "properties": {"a": deep}, "required": ["a"]}
    value = json.loads(skeleton_text(deep))
    depth = 0
    while isinstance(value, dict) and value:
        value, depth = value["a"], depth + 1
    assert value == {}
    assert depth == MAX_DEPTH
    assert max(r.name.count(".") for r in field_rules(deep)) == MAX_DEPTH - 1
