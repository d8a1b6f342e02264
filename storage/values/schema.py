"""JSON Schema checks of stored and typed values, through ``jsonschema`` (Draft 2020-12).

Pydantic emits Draft 2020-12 schemas, so every keyword they use is checked (``minimum``,
``maxLength``, ``pattern``, ``format`` where jsonschema can check it without extra packages,
``$ref``, ...). Each violation names its JSON path and keyword. Messages may quote the schema
(its enum values, bounds, pattern) but never the checked value: a stored output can be long
or secret, so the value appears only as its JSON type.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, ValidationError
from referencing.exceptions import Unresolvable

from storage.values.codec import format_path

_FORMAT_CHECKER = Draft202012Validator.FORMAT_CHECKER
_SHOWN_SCHEMA_CHARS = 80  # quoted schema values (an enum, a const) are cut after this


@dataclass(frozen=True)
class Violation:
    """One violated keyword at one JSON position, e.g. ``$.bytes: expected integer, got string``."""

    path: str
    keyword: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


def schema_violations(value: object, schema: Mapping[str, Any] | bool) -> list[Violation]:
    """Every keyword of ``schema`` that ``value`` (decoded JSON) violates; empty when it fits.

    An invalid schema, or one whose ``$ref`` cannot be resolved locally, is itself reported as
    a violation at ``$`` (keyword ``schema``): a value cannot be said to fit it. References
    are never fetched over the network.
    """
    try:
        validator = _validator(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    except SchemaError as exc:
        where = "/".join(str(part) for part in exc.absolute_path) or "its root"
        return [Violation("$", "schema", f"the declared schema is invalid at {where}")]
    except orjson.JSONEncodeError:
        return [Violation("$", "schema", "the declared schema is not JSON")]
    try:
        errors = list(validator.iter_errors(value))
    except RecursionError:  # a $ref that refers to itself without consuming the value
        return [Violation("$", "schema", "the declared schema's references loop")]
    except Unresolvable as exc:
        reference = _quote(getattr(exc, "ref", "a reference"))
        return [Violation("$", "schema", f"the declared schema's $ref {reference} is unresolvable")]
    found = [violation for error in errors for violation in _describe(error)]
    return sorted(set(found), key=lambda v: (v.path, v.keyword, v.message))


@lru_cache(maxsize=64)
def _validator(schema_text: bytes) -> Draft202012Validator:
    """A checked validator per distinct schema: checking the schema against the metaschema
    costs more than validating a typical output, and the console checks on every keystroke."""
    schema = orjson.loads(schema_text)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(_explicit(schema), format_checker=_FORMAT_CHECKER)


def _describe(error: ValidationError) -> Iterable[Violation]:
    path = list(error.absolute_path)
    here = format_path(path)
    keyword = str(error.validator)
    expected: Any = error.validator_value
    instance: Any = error.instance
    match keyword:
        case "type":
            names = [expected] if isinstance(expected, str) else list(expected)
            message = f"expected {' or '.join(names)}, got {_json_type(instance)}"
        case "enum":
            allowed = ", ".join(_quote(option) for option in expected)
            message = f"is not one of the allowed values: {allowed}"
        case "const":
            message = f"is not the allowed value {_quote(expected)}"
        case "required":
            missing = [
                key for key in expected if isinstance(instance, dict) and key not in instance
            ]
            return [
                Violation(format_path([*path, key]), keyword, "is required but missing")
                for key in missing
            ]
        case "additionalProperties" | "unevaluatedProperties":
            keys: list[str | None] = [*_extra_keys(error)] or [None]
            return [
                Violation(
                    format_path(path if key is None else [*path, key]),
                    keyword,
                    "is not an allowed property",
                )
                for key in keys
            ]
        case "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf":
            relation = {
                "minimum": ">=",
                "maximum": "<=",
                "exclusiveMinimum": ">",
                "exclusiveMaximum": "<",
                "multipleOf": "a multiple of",
            }[keyword]
            message = f"must be {relation} {_quote(expected)}"
        case "minLength" | "maxLength":
            bound = "at least" if keyword == "minLength" else "at most"
            message = f"must be {bound} {expected} characters long"
        case "minItems" | "maxItems" | "minProperties" | "maxProperties":
            bound = "at least" if keyword.startswith("min") else "at most"
            noun = "items" if keyword.endswith("Items") else "properties"
            message = f"must have {bound} {expected} {noun}"
        case "pattern":
            message = f"does not match the pattern {_quote(expected)}"
        case "format":
            message = f"is not a valid {_quote(expected)}"
        case "uniqueItems":
            message = "has items that are not unique"
        case "anyOf" | "oneOf":
            # oneOf with no sub-errors failed because more than one shape fits.
            message = (
                f"fits none of the {len(expected)} allowed shapes"
                if error.context
                else f"fits more than one of the {len(expected)} shapes where one is allowed"
            )
        case "not":
            message = "is not allowed here" if expected == {} else "matches a forbidden shape"
        case _:
            message = f"violates the schema's {keyword!r} keyword"
    return [Violation(here, keyword, message)]


# Keywords whose value is a subschema, a list of them, or a mapping of names to them.
_ONE = {
    "items",
    "additionalProperties",
    "unevaluatedItems",
    "unevaluatedProperties",
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
}
_MANY = {"prefixItems", "allOf", "anyOf", "oneOf"}
_NAMED = {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"}


def _explicit(schema: Any) -> Any:
    """``schema`` with every ``false`` subschema written ``{"not": {}}`` (the same meaning).

    jsonschema reports a ``false`` subschema at its parent's position without the keyword;
    ``{"not": {}}`` is reported where the value is, so the path names the offending item.
    """
    if schema is False:
        return {"not": {}}
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, sub in schema.items():
        if key == "additionalProperties" and sub is False:
            out[key] = sub  # reported per extra key below, with a clearer message
        elif key in _ONE:
            out[key] = _explicit(sub)
        elif key in _MANY and isinstance(sub, list):
            out[key] = [_explicit(item) for item in sub]
        elif key in _NAMED and isinstance(sub, dict):
            out[key] = {name: _explicit(item) for name, item in sub.items()}
        else:
            out[key] = sub
    return out


def _extra_keys(error: ValidationError) -> list[str]:
    """The keys of an object that its schema's properties and patterns do not cover."""
    schema: Any = error.schema
    instance: Any = error.instance
    if not isinstance(instance, dict) or not isinstance(schema, dict):
        return []
    known = set(schema.get("properties", {}))
    patterns = list(schema.get("patternProperties", {}))
    validator = Draft202012Validator({})
    return [
        key
        for key in instance
        if key not in known
        and not any(validator.is_valid(key, {"pattern": pattern}) for pattern in patterns)
    ]


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _quote(schema_value: object) -> str:
    """A value taken from the schema (never from the checked value), as JSON, cut if long."""
    try:
        text = orjson.dumps(schema_value).decode()
    except TypeError:
        text = type(schema_value).__name__
    if len(text) > _SHOWN_SCHEMA_CHARS:
        return text[: _SHOWN_SCHEMA_CHARS - 1] + "…"
    return text
