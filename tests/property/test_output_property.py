"""Property tests for outputs (ADR-048): any value either fails or reads back equal.

An independent oracle applies the documented rules (tuples become lists, dataclasses and
pydantic models become objects; sets, non-finite floats, non-string keys, integers outside 64
bits, NUL characters and other types are refused). The converter must agree with it exactly.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
from hypothesis import event, example, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from storage.values import codec
from storage.values.errors import OutputError
from storage.values.output import MAX_OUTPUT_BYTES, OutputSlot, encode_output

PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


class Invalid(Exception):
    """The oracle's verdict that a value cannot be an output."""


@dataclasses.dataclass
class Box:
    item: Any
    label: str = "box"


class Point(BaseModel):
    x: float
    name: str
    tags: tuple[int, ...] = ()


def oracle(value: object) -> object:
    """The documented conversion, written independently of storage.values.codec."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise Invalid
        return value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise Invalid
        return value
    if isinstance(value, str):
        if "\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            raise Invalid
        return value
    if isinstance(value, list | tuple):
        return [oracle(item) for item in value]
    if isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise Invalid
        return {oracle(key): oracle(item) for key, item in value.items()}
    if isinstance(value, Box):
        return {"item": oracle(value.item), "label": oracle(value.label)}
    if isinstance(value, Point):
        return {"x": oracle(value.x), "name": oracle(value.name), "tags": oracle(value.tags)}
    raise Invalid


def same(left: object, right: object) -> bool:
    """Equality that tells 1 from 1.0 and True from 1, so a float must stay a float."""
    if type(left) is not type(right):
        return False
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(map(same, left, right))
    if isinstance(left, dict) and isinstance(right, dict):
        return list(left) == list(right) and all(same(left[k], right[k]) for k in left)
    if isinstance(left, float) and isinstance(right, float):
        return left == right and math.copysign(1, left) == math.copysign(1, right)
    return left == right


texts = st.one_of(
    st.text(max_size=12),
    st.text(alphabet=st.sampled_from("ab\x00\ud800é😀\\\"'"), max_size=6),
)
# Long strings, built cheaply, to reach the size limit from both sides.
long_texts = st.builds(
    lambda n, c: c * n, st.integers(300, 2100), st.sampled_from(["x", "é", "😀"])
)
json_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**65), max_value=2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    texts,
    long_texts,
)
other_leaves = st.one_of(
    st.binary(max_size=4),
    st.sets(st.integers(0, 3), max_size=2),
    st.frozensets(st.text(max_size=2), max_size=2),
    st.just(datetime(2024, 1, 1, tzinfo=UTC)),
    st.just(Decimal("1.5")),
    st.complex_numbers(max_magnitude=2, allow_nan=False),
)
keys = st.one_of(texts, st.integers(0, 3))


def containers(children: st.SearchStrategy[object]) -> st.SearchStrategy[object]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.text(max_size=6), children, max_size=4),
        st.dictionaries(keys, children, max_size=3),
        st.builds(Box, children),
        st.builds(
            Point,
            x=st.floats(),
            name=texts,
            tags=st.lists(st.integers(-(2**64), 2**64), max_size=3).map(tuple),
        ),
    )


values = st.recursive(st.one_of(json_leaves, json_leaves, other_leaves), containers, max_leaves=12)


def check_one(value: object) -> str | None:
    """Encode ``value`` and hold the result against the oracle; returns the text."""
    try:
        expected = oracle(value)
    except Invalid:
        expected_failure: str | None = "invalid"
    else:
        size = len(orjson.dumps(expected))
        expected_failure = "too_large" if size > MAX_OUTPUT_BYTES else None
    event(f"outcome: {expected_failure or 'recorded'}")
    failure: str | None = None
    try:
        text = encode_output(value)
    except OutputError as exc:
        failure = exc.reason
    assert failure == expected_failure
    if failure is not None:
        return None
    if expected is None:
        assert text is None  # JSON null means "no output"
        return None
    assert text is not None
    assert len(text.encode()) <= MAX_OUTPUT_BYTES
    assert same(orjson.loads(text), expected)
    return text


@PROPERTY_SETTINGS
@given(values)
def test_any_value_fails_or_reads_back_equal(value: object) -> None:
    check_one(value)


_SAFE_INT = 2**53 - 1  # orjson's strict-integer range


def _plain_text(text: str) -> bool:
    return (
        "\x00" not in text
        and "\\u0000" not in text  # looks like a NUL escape once serialized
        and not any("\ud800" <= char <= "\udfff" for char in text)
    )


def _plain_tree(value: object) -> bool:
    kind = type(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return -_SAFE_INT <= value <= _SAFE_INT  # type: ignore[operator]
    if kind is float:
        return math.isfinite(value)  # type: ignore[arg-type]
    if kind is str:
        return _plain_text(value)  # type: ignore[arg-type]
    if kind is list:
        return all(_plain_tree(item) for item in value)  # type: ignore[attr-defined]
    if kind is dict:
        return all(
            type(key) is str and _plain_text(key) and _plain_tree(item)
            for key, item in value.items()  # type: ignore[attr-defined]
        )
    return False


def built_for_the_shortcut(value: object) -> bool:
    """Plain JSON the shortcut exists for: exact str/int/float/bool/None and dicts and lists of
    them, finite floats, 53-bit integers, no NUL, within the shortcut's cheap bracket bound."""
    if not _plain_tree(value):
        return False
    raw = orjson.dumps(value)
    return len(raw) <= 2 * codec.MAX_DEPTH or raw.count(b"[") + raw.count(b"{") <= codec.MAX_DEPTH


@PROPERTY_SETTINGS
@given(values)
def test_the_orjson_shortcut_answers_only_with_the_walks_text(value: object) -> None:
    """The shortcut may decline anything; when it answers, the walk accepts the value and
    serializes it to the same bytes."""
    shortcut = codec._plain_json_text(value)
    event(f"shortcut: {'answered' if shortcut is not None else 'declined'}")
    if built_for_the_shortcut(value):
        assert shortcut is not None, "the shortcut declined a value built for it"
    if shortcut is not None:
        assert shortcut == orjson.dumps(codec.to_json_value(value))


class Level(enum.IntEnum):
    LOW = 1


class Colour(enum.StrEnum):
    RED = "red"


class Tag(str):
    """A str subclass: orjson would write it as a string; the walk decides."""


# Items that are, or look like, the JSON scalars: the flat case skips the read-back.
flat_items = st.one_of(
    json_leaves,
    st.just(Level.LOW),
    st.just(Colour.RED),
    st.builds(Tag, st.text(max_size=4)),
    st.uuids(),
)
flat_values = st.one_of(
    flat_items,
    st.dictionaries(st.text(max_size=6), flat_items, max_size=6),
    st.lists(flat_items, max_size=6),
    st.lists(flat_items, min_size=9, max_size=14),  # past the inline loop's length
)


@PROPERTY_SETTINGS
@given(flat_values)
@example(math.nan)
@example(-math.inf)
@example({"rows": 3, "ratio": 0.5, "name": "a", "ok": True, "none": None})
@example([*range(10), 1.5])
@example({"rows": 3, "ratio": math.nan})
@example([1.5, None, math.inf])
@example([*range(10), math.nan])
def test_the_shortcut_on_flat_containers_answers_only_with_the_walks_text(value: object) -> None:
    shortcut = codec._plain_json_text(value)
    event(f"shortcut: {'answered' if shortcut is not None else 'declined'}")
    if built_for_the_shortcut(value):
        assert shortcut is not None, "the shortcut declined a value built for it"
    if shortcut is not None:
        assert shortcut == orjson.dumps(codec.to_json_value(value))


@PROPERTY_SETTINGS
@given(st.lists(st.one_of(long_texts, json_leaves), max_size=5).map(tuple), st.text(max_size=3))
def test_values_near_the_limit_are_measured_in_utf8_bytes(
    items: tuple[object, ...], key: str
) -> None:
    check_one({key: items})


@PROPERTY_SETTINGS
@given(values, values)
def test_slot_holds_the_last_good_value_or_nothing_after_a_failure(
    first: object, second: object
) -> None:
    slot = OutputSlot()
    for value in (first, second):
        try:
            expected_text = encode_output(value)
        except OutputError:
            expected_text = None
        try:
            slot.set(value)
        except OutputError:
            assert expected_text is None
        assert slot.text == expected_text  # a failed call cleared the slot
        assert slot.get() == (None if expected_text is None else orjson.loads(expected_text))
    assert slot.seal() == slot.text


@PROPERTY_SETTINGS
@given(st.text(alphabet=st.characters(exclude_categories=())), st.text(max_size=4))
def test_fuzz_unicode_strings_as_values_and_keys(text: str, other: str) -> None:
    for value in (text, {text: other}, {"k": [text]}):
        check_one(value)


@PROPERTY_SETTINGS
@given(st.floats(allow_nan=True, allow_infinity=True, allow_subnormal=True))
def test_fuzz_floats_round_trip_exactly_or_are_refused(number: float) -> None:
    text = check_one({"v": number})
    if math.isfinite(number):
        assert text is not None
        loaded = orjson.loads(text)["v"]
        assert type(loaded) is float
        assert loaded.hex() == number.hex()  # bit for bit, -0.0 and subnormals included
    else:
        assert text is None
