"""A structural diff of two decoded JSON values: which paths were added, removed or changed.

Pure (no I/O), for outputs: the console's side-by-side view and ``GET /api/jobs/{id}?compare``
compare a failed attempt's kept output with the completed one; any two values compare the same
way. Objects compare key by key (the second value's key order, then keys only the first has: a
completed output keeps its key order, a kept one read from jsonb does not),
arrays index by index; a value whose JSON type changes (object to array, number to string) is
one ``retyped`` change at its path, not a change per member. ``1`` and ``1.0`` are equal
numbers, ``true`` and ``1`` are not (JSON types differ). Values are shown as compact JSON cut at
``value_chars``; the whole diff never exceeds ``limit_bytes`` (the ADR's 4 KiB by default):
past it the remaining changes are counted in ``omitted``, never shown in part.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import orjson

from storage.values.codec import format_path, utf8_size
from storage.values.output import MAX_OUTPUT_BYTES

Change = Literal["added", "removed", "changed", "retyped"]
VALUE_CHARS = 60


@dataclass(frozen=True)
class JsonChange:
    """One difference: at ``path``, ``before`` became ``after`` (compact JSON, cut short;
    None on the side where the path does not exist)."""

    path: str
    change: Change
    before: str | None
    after: str | None

    def size(self) -> int:
        return sum(utf8_size(part) for part in (self.path, self.before or "", self.after or ""))


@dataclass(frozen=True)
class JsonDiff:
    """The changes in document order, at most ``limit_bytes`` of them; ``omitted`` more."""

    changes: tuple[JsonChange, ...] = ()
    omitted: int = 0
    counts: dict[Change, int] = field(default_factory=dict)

    @property
    def equal(self) -> bool:
        return not self.changes and not self.omitted


def json_type(value: Any) -> str:
    """The JSON type name of a decoded value (``bool`` before ``int``: True is an int)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def shown(value: Any, chars: int = VALUE_CHARS) -> str:
    """``value`` as compact JSON, cut to ``chars`` characters with an ellipsis."""
    return cut_text(orjson.dumps(value).decode(), chars)


def cut_text(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters with an ellipsis."""
    return text if len(text) <= chars else text[: max(chars - 1, 0)] + "…"


def json_diff(
    before: Any,
    after: Any,
    *,
    value_chars: int = VALUE_CHARS,
    limit_bytes: int = MAX_OUTPUT_BYTES,
) -> JsonDiff:
    """What changed from ``before`` to ``after`` (decoded JSON values)."""
    changes: list[JsonChange] = []
    counts: dict[Change, int] = {}
    used = omitted = 0
    for path, change, old, new in _walk(before, after, []):
        counts[change] = counts.get(change, 0) + 1
        entry = JsonChange(
            format_path(path),
            change,
            None if change == "added" else shown(old, value_chars),
            None if change == "removed" else shown(new, value_chars),
        )
        if omitted or used + entry.size() > limit_bytes:
            omitted += 1
            continue
        used += entry.size()
        changes.append(entry)
    return JsonDiff(tuple(changes), omitted, counts)


_Found = tuple[list[str | int], Change, Any, Any]
_MISSING = object()


def _walk(before: Any, after: Any, path: Sequence[str | int]) -> Iterator[_Found]:
    old_type, new_type = json_type(before), json_type(after)
    if old_type != new_type:
        yield [*path], "retyped", before, after
    elif old_type == "object":
        for key, new in after.items():
            old = before.get(key, _MISSING)
            if old is _MISSING:
                yield [*path, key], "added", None, new
            else:
                yield from _walk(old, new, [*path, key])
        for key, old in before.items():
            if key not in after:
                yield [*path, key], "removed", old, None
    elif old_type == "array":
        for index, (old, new) in enumerate(zip(before, after, strict=False)):
            yield from _walk(old, new, [*path, index])
        for index in range(len(after), len(before)):
            yield [*path, index], "removed", before[index], None
        for index in range(len(before), len(after)):
            yield [*path, index], "added", None, after[index]
    elif before != after:
        yield [*path], "changed", before, after
