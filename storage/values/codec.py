"""The one converter between Python values and JSON, shared by job args and job outputs.

orjson alone is not strict enough: it writes NaN as ``null``, serializes datetimes, UUIDs and
dataclasses its own way and accepts unsigned 64-bit integers. Every value therefore goes
through one recursive walk that either converts it to plain JSON types or names the position
and type that cannot be converted, then orjson serializes the result once. Errors never quote
the value: outputs may hold data that must not reach logs. Decoding JSON back into a
registered type lives in ``storage.values.decode``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable, Sequence
from math import isfinite
from typing import Any

import orjson
from pydantic import BaseModel

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
MAX_DEPTH = 128
"""Containers nested deeper than this are refused (orjson stops at 254; a cycle never ends)."""


class JsonConversionError(ValueError):
    """A value, or something inside it, cannot be converted to JSON."""

    def __init__(self, path: str, type_name: str, problem: str) -> None:
        self.path = path
        self.type_name = type_name
        self.problem = problem
        super().__init__(f"value at {path} cannot be converted to JSON: {problem}")


class _Reject(Exception):
    """Raised inside the walk; containers add their path segment as it unwinds.

    Building the path only on failure keeps the common case free of string work.
    """

    def __init__(self, type_name: str, problem: str) -> None:
        super().__init__(problem)
        self.type_name = type_name
        self.problem = problem
        self.segments: list[str | int] = []
        self.locate = True


def format_path(segments: Sequence[str | int]) -> str:
    """``$``, ``$.items[3].name``, ``$["weird key"]``: a position without the value."""
    parts = ["$"]
    for segment in segments:
        if isinstance(segment, int):
            parts.append(f"[{segment}]")
        elif segment.isidentifier():
            parts.append(f".{segment}")
        else:
            # Readable keys stay readable; control characters and surrogates are escaped.
            parts.append(f"[{json.dumps(segment, ensure_ascii=not segment.isprintable())}]")
    return "".join(parts)


def _convert(value: Any, depth: int) -> Any:
    """Return ``value`` as plain JSON types (dict, list, str, int, float, bool, None).

    ``Any`` rather than ``object`` keeps ``cast`` calls off this hot path.
    """
    kind = type(value)
    if kind is str:
        if "\x00" in value:
            raise _Reject("str", _NUL)
    elif kind is int:
        if not INT64_MIN <= value <= INT64_MAX:
            raise _Reject("int", _OUT_OF_RANGE)
    elif kind is float:
        if not isfinite(value):
            raise _Reject("float", _NOT_FINITE)
    elif kind is dict:
        return _convert_dict(value, depth)
    elif kind is list or kind is tuple:
        return _convert_list(value, depth)
    elif value is not None and kind is not bool:
        return _convert_other(value, depth)
    return value


_NUL = "str contains a NUL character"
_OUT_OF_RANGE = "int value is outside the signed 64-bit range"
_NOT_FINITE = "float value is not finite (NaN and infinity are not JSON)"


def _too_deep(container: object) -> _Reject:
    problem = f"value is nested more than {MAX_DEPTH} levels deep or contains itself"
    reject = _Reject(type(container).__name__, problem)
    reject.locate = False  # a path 128 segments long helps nobody
    return reject


def _convert_dict(value: dict[Any, Any], depth: int) -> dict[str, Any]:
    if depth >= MAX_DEPTH:
        raise _too_deep(value)
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str:
            if not isinstance(key, str):
                name = type(key).__name__
                raise _Reject(name, f"dict key of type {name} is not a string")
            key = str.__str__(key)
        if "\x00" in key:
            raise _Reject("str", "dict key contains a NUL character")
        try:
            # Scalars are checked inline (as in _convert): calls dominate the common case.
            kind = type(item)
            if kind is str:
                if "\x00" in item:
                    raise _Reject("str", _NUL)
            elif kind is int:
                if not INT64_MIN <= item <= INT64_MAX:
                    raise _Reject("int", _OUT_OF_RANGE)
            elif kind is float:
                if not isfinite(item):
                    raise _Reject("float", _NOT_FINITE)
            elif item is not None and kind is not bool:
                item = _convert(item, depth + 1)
            out[key] = item
        except _Reject as reject:
            if reject.locate:
                reject.segments.append(key)
            raise
    return out


def _convert_list(value: list[Any] | tuple[Any, ...], depth: int) -> list[Any]:
    if depth >= MAX_DEPTH:
        raise _too_deep(value)
    out: list[Any] = []
    for index, item in enumerate(value):
        try:
            kind = type(item)
            if kind is str:
                if "\x00" in item:
                    raise _Reject("str", _NUL)
            elif kind is int:
                if not INT64_MIN <= item <= INT64_MAX:
                    raise _Reject("int", _OUT_OF_RANGE)
            elif kind is float:
                if not isfinite(item):
                    raise _Reject("float", _NOT_FINITE)
            elif item is not None and kind is not bool:
                item = _convert(item, depth + 1)
            out.append(item)
        except _Reject as reject:
            if reject.locate:
                reject.segments.append(index)
            raise
    return out


def _convert_other(value: object, depth: int) -> object:
    """Models, dataclasses and subclasses of the JSON types: the rare, slower cases."""
    name = type(value).__name__
    if isinstance(value, BaseModel):
        try:
            dumped = value.model_dump(mode="json", warnings=False)
            # Under pydantic's default ser_json_inf_nan="null", JSON mode silently turns NaN and
            # infinity in inferred (Any) fields into None; the python-mode dump still shows
            # them. Other settings keep the float, which the walk below refuses.
            located = None
            if value.model_config.get("ser_json_inf_nan", "null") == "null":
                located = _non_finite_path(value.model_dump(warnings=False), 0)
        except Exception as exc:  # user serializers run here; their messages may quote values
            cause = type(exc).__name__
            problem = f"pydantic model {name} could not be dumped in JSON mode ({cause})"
            raise _Reject(name, problem) from None
        if located is not None:
            reject = _Reject("float", _NOT_FINITE)
            reject.segments = located[::-1]
            raise reject
        return _convert(dumped, depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        if depth >= MAX_DEPTH:
            raise _too_deep(value)
        out: dict[str, object] = {}
        fields = dataclasses.fields(value)
        _DATACLASS_FIELDS[type(value)] = tuple(field.name for field in fields)
        for field in fields:
            try:
                out[field.name] = _convert(getattr(value, field.name), depth + 1)
            except _Reject as reject:
                if reject.locate:
                    reject.segments.append(field.name)
                raise
        return out
    # Subclasses (StrEnum, IntEnum, OrderedDict, NamedTuple...) become their plain base type.
    if isinstance(value, str):
        return _convert(str.__str__(value), depth)
    if isinstance(value, int):
        return _convert(int.__int__(value), depth)
    if isinstance(value, float):
        return _convert(float.__float__(value), depth)
    if isinstance(value, dict):
        return _convert_dict(value, depth)
    if isinstance(value, list | tuple):
        return _convert_list(value, depth)
    if isinstance(value, set | frozenset):
        raise _Reject(name, f"{name} is not JSON (convert it to a list)")
    raise _Reject(name, f"type {name} cannot be converted to JSON")


# Field names of the dataclasses the walk has seen: the same type again is the dict of its fields.
_DATACLASS_FIELDS: dict[type, tuple[str, ...]] = {}


def _non_finite_path(value: object, depth: int) -> list[str | int] | None:
    """Where a python-mode model dump holds a NaN or infinity, root first; None if nowhere."""
    if isinstance(value, float):
        return None if isfinite(value) else []
    items: Iterable[tuple[str | int, object]]
    if isinstance(value, dict):
        items = ((key if isinstance(key, str) else str(key), item) for key, item in value.items())
    elif isinstance(value, list | tuple | set | frozenset):
        items = enumerate(value)
    else:
        return None
    if depth >= MAX_DEPTH:
        return None
    for segment, item in items:
        found = _non_finite_path(item, depth + 1)
        if found is not None:
            return [segment, *found]
    return None


def _find_unencodable(value: object, segments: list[str | int]) -> bool:
    """Locate a string orjson refused (a lone surrogate); fills ``segments`` root first."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    items: list[tuple[str | int, object]]
    if isinstance(value, dict):
        for key in value:
            if _find_unencodable(key, segments):
                return True
        items = list(value.items())
    elif isinstance(value, list):
        items = list(enumerate(value))
    else:
        return False
    for segment, item in items:
        segments.append(segment)
        if _find_unencodable(item, segments):
            return True
        segments.pop()
    return False


def to_json_value(value: object) -> object:
    """Convert ``value`` to plain JSON types; raises JsonConversionError naming path and type."""
    try:
        return _convert(value, 0)
    except _Reject as reject:
        raise JsonConversionError(
            format_path(reject.segments[::-1]), reject.type_name, reject.problem
        ) from None


# orjson alone for values that are plain JSON already. Anything it would write its own way
# (dataclasses, datetimes, subclasses of the JSON types, integers past 53 bits) raises, and
# anything else it writes differently from the walk (NaN as null, enums and UUIDs as their
# values, tuples as arrays) reads back unequal, so all of those take the walk.
PLAIN_ONLY = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME
PLAIN_ONLY |= orjson.OPT_PASSTHROUGH_SUBCLASS | orjson.OPT_STRICT_INTEGER

JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Exact types orjson writes as the walk does, except a NaN or infinity (written ``null``)."""
_LOOP_AT_MOST = 8
"""Up to this many items a Python loop checks types with fewer instructions than a set."""


def _plain_json_text(value: Any) -> bytes | None:
    """orjson's text for ``value`` when the walk would produce the same text; None otherwise.

    Six times faster than the walk on a 4 KiB numeric array; a False "plain" verdict only
    costs time (the walk then decides, and names the position of any problem). Exact str,
    int, float, bool or None, or a dict or list of them (the common output) need no read-back:
    orjson writes them as the walk does, except a NaN or infinity, written ``null``, so a float
    beside a ``null`` in the text takes the read-back (inline: on a 100 B object a function
    call is a tenth of the instructions spent here).
    """
    try:
        raw = orjson.dumps(value, option=PLAIN_ONLY)
    except orjson.JSONEncodeError:
        return None
    if raw.find(b"\\u0000") >= 0:  # a NUL escape (or a string that merely looks like one)
        return None
    # Nesting deeper than MAX_DEPTH needs more than MAX_DEPTH opening brackets.
    if len(raw) > 2 * MAX_DEPTH and raw.count(b"[") + raw.count(b"{") > MAX_DEPTH:
        return None
    kind = type(value)
    items: Collection[object] | None = None
    if kind is dict:
        items = value.values()
    elif kind is list:
        items = value
    elif kind in JSON_SCALARS and (kind is not float or raw != b"null"):
        return raw
    if items is not None:
        flat = True
        floats = False
        if len(items) <= _LOOP_AT_MOST:
            for item in items:
                kind = type(item)
                if kind is float:
                    floats = True
                elif kind is not str and kind is not int and kind is not bool and item is not None:
                    flat = False
                    break
        else:
            types = set(map(type, items))
            flat = types <= JSON_SCALARS
            floats = float in types
        if flat and (not floats or raw.find(b"null") < 0):
            return raw
    try:
        plain = orjson.loads(raw) == value
    except Exception:  # an enum member's own __eq__ may raise
        return None
    return raw if plain else None


def to_json_text(value: object) -> bytes:
    """Convert ``value`` and serialize it as compact UTF-8 JSON text, keeping key order."""
    names = _DATACLASS_FIELDS.get(type(value))
    if names is not None:  # what the walk makes of it, without the walk (insert_many's args)
        value = {name: getattr(value, name) for name in names}
    raw = _plain_json_text(value)
    if raw is not None:
        return raw
    converted = to_json_value(value)
    try:
        return orjson.dumps(converted)
    except orjson.JSONEncodeError:
        segments: list[str | int] = []
        if _find_unencodable(converted, segments):
            problem = "str is not valid UTF-8 (it contains a lone surrogate)"
            raise JsonConversionError(format_path(segments), "str", problem) from None
        name = type(value).__name__
        raise JsonConversionError("$", name, f"{name} could not be serialized") from None


__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "JSON_SCALARS",
    "MAX_DEPTH",
    "PLAIN_ONLY",
    "JsonConversionError",
    "format_path",
    "to_json_text",
    "to_json_value",
]


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without encoding it when it is ASCII (the common case)."""
    return len(text) if text.isascii() else len(text.encode())
