"""What a form shows from a kind's declared JSON schema: a skeleton to fill in, and its fields.

Both walk the schema the same way: local references (``#/$defs/Name``, which pydantic writes
for nested models) are followed, ``anyOf``/``oneOf`` take their first branch that is not
``null``, and nesting stops at ``MAX_DEPTH``. What the walk cannot follow (a remote ``$ref``,
a boolean schema, an unknown shape) becomes ``null`` in the skeleton and ``any`` in the field
list: the form still opens, and the live check says what is wrong with the value.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

MAX_DEPTH = 4
"""Objects nested deeper than this are written ``{}`` and their fields are not listed."""

MAX_FIELDS = 60
"""The field list stops after this many fields (a schema can be large)."""

_PLACEHOLDERS: dict[str, object] = {
    "string": "",
    "integer": 0,
    "number": 0,
    "boolean": False,
    "array": [],
    "object": {},
    "null": None,
}
_FORMATS = {  # a string that fits its format, so the skeleton's only faults are its values
    "date-time": "1970-01-01T00:00:00Z",
    "date": "1970-01-01",
    "time": "00:00:00Z",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "email": "name@example.com",
    "uri": "https://example.com/",
}


@dataclass(frozen=True)
class FieldRule:
    """One declared field: ``amount_cents``, ``address.city``, ``items[].sku``."""

    name: str
    type: str
    required: bool
    choices: tuple[str, ...] = ()  # enum values as JSON text, in the schema's order
    description: str | None = None


def skeleton_text(schema: object) -> str:
    """Indented JSON with every required field at a placeholder of its type, or ``""`` when
    there is no schema or nothing in it can be followed (the form then opens empty)."""
    if not isinstance(schema, Mapping):
        return ""
    value = _placeholder(schema, schema, 0)
    if value is None:
        return ""
    return json.dumps(value, indent=2, ensure_ascii=False)


def field_rules(schema: object) -> list[FieldRule]:
    """The declared fields, required ones first at each level, nested objects dotted."""
    if not isinstance(schema, Mapping):
        return []
    rules = _fields(schema, schema, "", frozenset())
    return [rule for _, rule in zip(range(MAX_FIELDS), rules, strict=False)]


def _resolve(schema: object, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """``schema`` with local references followed (a few hops), None when it cannot be."""
    for _ in range(8):
        if not isinstance(schema, Mapping):
            return None
        ref = schema.get("$ref")
        if ref is None:
            branch = _single_all_of(schema)
            if branch is None:
                return schema
            schema = branch
            continue
        if not isinstance(ref, str) or not ref.startswith("#/"):
            return None
        target: object = root
        for part in ref[2:].split("/"):
            key = part.replace("~1", "/").replace("~0", "~")
            target = target.get(key) if isinstance(target, Mapping) else None
        schema = target
    return None


def _single_all_of(schema: Mapping[str, Any]) -> object | None:
    """``{"allOf": [{"$ref": ...}]}`` (older pydantic wraps a described reference so)."""
    branches = schema.get("allOf")
    if isinstance(branches, list) and len(branches) == 1 and "type" not in schema:
        return cast(object, branches[0])
    return None


def _branch(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The first shape of ``anyOf``/``oneOf`` that is not null (``str | None`` is a string)."""
    for key in ("anyOf", "oneOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            resolved = [_resolve(b, root) for b in branches]
            usable = [b for b in resolved if b is not None and b.get("type") != "null"]
            return usable[0] if usable else resolved[0]
    return schema


def _type_of(schema: Mapping[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        named = [k for k in kind if isinstance(k, str) and k != "null"]
        return named[0] if named else None
    if isinstance(kind, str):
        return kind
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return None


def _placeholder(schema: object, root: Mapping[str, Any], depth: int) -> object:
    resolved = _resolve(schema, root)
    if resolved is None:
        return None
    shape = _branch(resolved, root)
    if shape is None:
        return None
    if "const" in shape:
        const: object = shape["const"]
        return const
    choices = shape.get("enum")
    if isinstance(choices, list) and choices:
        return cast(object, choices[0])
    kind = _type_of(shape)
    if kind == "object":
        if depth >= MAX_DEPTH:
            return {}
        properties = shape.get("properties")
        if not isinstance(properties, Mapping):
            return {}
        return {
            name: _placeholder(properties[name], root, depth + 1)
            for name in _required(shape)
            if name in properties
        }
    if kind == "array":
        wanted = shape.get("minItems")
        if isinstance(wanted, int) and wanted > 0 and depth < MAX_DEPTH:
            item = _placeholder(shape.get("items", {}), root, depth + 1)
            return [item] * min(wanted, 3)
        return []
    if kind == "string":
        form = shape.get("format")
        return _FORMATS.get(form, "") if isinstance(form, str) else ""
    if kind in ("integer", "number"):
        low = shape.get("minimum", shape.get("exclusiveMinimum"))
        if isinstance(low, int | float) and not isinstance(low, bool) and low > 0:
            return int(low) + 1 if "exclusiveMinimum" in shape else low
        return 0
    return _PLACEHOLDERS.get(kind) if kind is not None else None


def _required(schema: Mapping[str, Any]) -> list[str]:
    names = schema.get("required")
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _fields(
    schema: Mapping[str, Any], root: Mapping[str, Any], prefix: str, within: frozenset[int]
) -> Iterator[FieldRule]:
    """``within``: the objects being listed around this one; a model that contains itself
    (a tree) is listed once, and nesting stops at ``MAX_DEPTH``."""
    shape = _object_shape(schema, root)
    if shape is None or id(shape) in within or len(within) >= MAX_DEPTH:
        return
    within = within | {id(shape)}
    properties = shape.get("properties")
    if not isinstance(properties, Mapping):
        return
    required = _required(shape)
    ordered = [n for n in required if n in properties] + [
        n for n in properties if n not in required
    ]
    for name in ordered:
        sub = properties[name]
        path = f"{prefix}{name}"
        yield _rule(path, sub, root, required=name in required)
        resolved = _resolve(sub, root)
        branch = None if resolved is None else _branch(resolved, root)
        if branch is None:
            continue
        if _type_of(branch) == "array":
            items = _resolve(branch.get("items"), root)
            if items is not None:
                yield from _fields(items, root, f"{path}[].", within)
        else:
            yield from _fields(branch, root, f"{path}.", within)


def _object_shape(schema: object, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    resolved = _resolve(schema, root)
    shape = None if resolved is None else _branch(resolved, root)
    return shape if shape is not None and _type_of(shape) == "object" else None


def _rule(name: str, schema: object, root: Mapping[str, Any], *, required: bool) -> FieldRule:
    resolved = _resolve(schema, root)
    if resolved is None:
        return FieldRule(name, "any (not followed)", required)
    described = schema if isinstance(schema, Mapping) else {}
    description = described.get("description", resolved.get("description"))
    choices = _choices(resolved, root)
    return FieldRule(
        name,
        _type_text(resolved, root),
        required,
        tuple(json.dumps(c, ensure_ascii=False) for c in choices),
        description if isinstance(description, str) else None,
    )


def _choices(schema: Mapping[str, Any], root: Mapping[str, Any]) -> list[object]:
    shape = _branch(schema, root)
    if shape is None:
        return []
    if "const" in shape:
        return [shape["const"]]
    choices = shape.get("enum")
    return list(choices) if isinstance(choices, list) else []


def _type_text(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and branches:
        names = []
        for branch in branches:
            resolved = _resolve(branch, root)
            names.append("any" if resolved is None else _one_type(resolved, root))
        return " | ".join(dict.fromkeys(names))
    return _one_type(schema, root)


def _one_type(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    name = _type_of(schema)
    if name == "array":
        items = _resolve(schema.get("items"), root)
        inner = "any" if items is None else _one_type(items, root)
        return f"array of {inner}"
    if name == "object" and isinstance(schema.get("title"), str) and schema is not root:
        return f"object ({schema['title']})"
    if name is None:
        return "enum" if "enum" in schema else "const" if "const" in schema else "any"
    fmt = schema.get("format")
    return f"{name} ({fmt})" if isinstance(fmt, str) else name
