"""A refused external output names its first failing path and that path's rule, whether the
model (pydantic) or the published schema (jsonschema) refused it, and never quotes the value."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, field_validator

from storage import DeclaredOutput, OutputError, external_output_text
from storage.values.output import output_descriptor

SECRET = "s3cr3t-0utput-v4lue"


class Item(BaseModel):
    n: int = Field(ge=0)


class Batch(BaseModel):
    ref: str
    items: list[Item]

    @field_validator("ref")
    @classmethod
    def ref_prefix(cls, value: str) -> str:
        if not value.startswith("b-"):
            raise ValueError(f"bad ref {value}")  # an author's message may quote the value
        return value


def refusal(value: object, declared: DeclaredOutput) -> OutputError:
    with pytest.raises(OutputError) as caught:
        external_output_text(value, declared)
    return caught.value


def test_the_model_names_the_first_failing_path_and_its_rule() -> None:
    declared = DeclaredOutput(output_descriptor(Batch), Batch)
    error = refusal({"ref": "b-1", "items": [{"n": 1}, {"n": -1}]}, declared)
    assert (error.path, error.rule) == (
        "$.items[1].n",
        "Input should be greater than or equal to 0",
    )
    error = refusal({"ref": "b-1"}, declared)
    assert (error.path, error.rule) == ("$.items", "Field required")


def test_an_authored_validator_message_is_named_by_its_type_not_quoted() -> None:
    error = refusal({"ref": SECRET, "items": []}, DeclaredOutput(output_descriptor(Batch), Batch))
    assert (error.path, error.rule) == ("$.ref", "refused by a validator (value_error)")
    assert SECRET not in str(error)


def test_the_schema_names_the_first_failing_path_and_its_rule() -> None:
    declared = DeclaredOutput(output_descriptor(Batch))  # no model here: the published schema
    error = refusal({"ref": SECRET, "items": [{"n": -1}]}, declared)
    assert (error.path, error.rule) == ("$.items[0].n", "must be >= 0")
    assert SECRET not in str(error)
