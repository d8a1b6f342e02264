"""The shared JSON converter and the output slot (ADR-048): what is accepted, what is refused.

No database: these are the checks that run when a handler records an output, before anything
reaches a transition. Every refusal must name a position and a type, never the value.
"""

from __future__ import annotations

import dataclasses
import enum
import threading
import traceback
import uuid
from collections import OrderedDict
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, NamedTuple, TypedDict

import orjson
import pytest
from pydantic import BaseModel, ConfigDict, RootModel, create_model, field_serializer
from pydantic import model_serializer as pydantic_model_serializer

from storage.values.codec import INT64_MAX, INT64_MIN, MAX_DEPTH, JsonConversionError, to_json_text
from storage.values.decode import JsonDecodeMismatch, decode_value
from storage.values.errors import OutputDecodeError, OutputError
from storage.values.output import (
    MAX_OUTPUT_BYTES,
    OutputSlot,
    decode_output,
    encode_output,
    output_descriptor,
)

SECRET = "s3cr3t-c0rgi-7781"
NAN_WIDTH: dict[str, Any] = {"width": float("nan")}  # unvalidated, as model_construct allows


class Thumbnail(BaseModel):
    width: int
    height: int
    url: str


@dataclasses.dataclass
class Size:
    width: int
    height: int


@dataclasses.dataclass
class Crop:
    size: Size
    corners: tuple[int, ...]
    thumb: Thumbnail | None = None


class Colour(enum.StrEnum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


class Shade(enum.Enum):
    DARK = "dark"


class Pair(NamedTuple):
    left: int
    right: str


class Leaky:
    """An object whose repr and str would leak a secret if a message ever used them."""

    def __repr__(self) -> str:
        return SECRET

    __str__ = __repr__


def assert_no_secret(err: BaseException) -> None:
    """The value must not be in the message, nor anywhere in the printed traceback."""
    assert SECRET not in str(err)
    assert SECRET not in "".join(traceback.format_exception(err))


# --- accepted values -------------------------------------------------------------------------


def test_plain_json_values_pass_through_compactly_in_key_order() -> None:
    value = {"zeta": 1, "alpha": [1.0, True, None, "x"], "mid": {"b": 2, "a": -0.5}}
    assert to_json_text(value) == b'{"zeta":1,"alpha":[1.0,true,null,"x"],"mid":{"b":2,"a":-0.5}}'


def test_float_one_stays_a_float_in_the_text() -> None:
    assert encode_output({"ratio": 1.0}) == '{"ratio":1.0}'
    assert encode_output(1.0) == "1.0"


def test_tuples_become_lists_at_any_depth() -> None:
    assert to_json_text((1, ("a", (2.5,)), {"t": ()})) == b'[1,["a",[2.5]],{"t":[]}]'


def test_pydantic_models_are_dumped_in_json_mode() -> None:
    class Event(BaseModel):
        at: datetime
        id: uuid.UUID
        tags: set[str]

    event = Event(at=datetime(2024, 5, 1, 12, tzinfo=UTC), id=uuid.UUID(int=7), tags={"a"})
    assert orjson.loads(to_json_text({"event": event})) == {
        "event": {
            "at": "2024-05-01T12:00:00Z",
            "id": "00000000-0000-0000-0000-000000000007",
            "tags": ["a"],
        }
    }


def test_dataclasses_convert_at_any_depth_including_models_inside() -> None:
    thumb = Thumbnail(width=1, height=2, url="u")
    value = {"crops": [Crop(Size(3, 4), (1, 2), thumb)]}
    assert to_json_text(value) == (
        b'{"crops":[{"size":{"width":3,"height":4},"corners":[1,2],'
        b'"thumb":{"width":1,"height":2,"url":"u"}}]}'
    )


def test_subclasses_of_json_types_become_their_base_type() -> None:
    value = {"c": Colour.RED, "l": Level.HIGH, "o": OrderedDict(b=1, a=2), "p": Pair(1, "r")}
    assert to_json_text(value) == b'{"c":"red","l":3,"o":{"b":1,"a":2},"p":[1,"r"]}'


@pytest.mark.parametrize("number", [INT64_MAX, INT64_MIN, 0, -1])
def test_signed_64_bit_integers_are_accepted(number: int) -> None:
    assert to_json_text([number]) == f"[{number}]".encode()


def test_escaped_backslash_u0000_is_text_not_a_nul() -> None:
    """Six characters that look like an escape are an ordinary string."""
    assert encode_output({"raw": "\\u0000"}) == '{"raw":"\\\\u0000"}'


# --- refused values --------------------------------------------------------------------------


@dataclasses.dataclass
class Holder:
    payload: Any


@pytest.mark.parametrize(
    ("value", "path", "type_name", "problem"),
    [
        ({"a": [0, 1, float("nan")]}, "$.a[2]", "float", "not finite"),
        ([float("inf")], "$[0]", "float", "not finite"),
        ({"x": float("-inf")}, "$.x", "float", "not finite"),
        ({"tags": {SECRET}}, "$.tags", "set", "set is not JSON"),
        ([frozenset([SECRET])], "$[0]", "frozenset", "frozenset is not JSON"),
        ({"weird key": {7: SECRET}}, '$["weird key"]', "int", "dict key of type int"),
        ({(1, 2): SECRET}, "$", "tuple", "dict key of type tuple"),
        ({"n": INT64_MAX + 1}, "$.n", "int", "outside the signed 64-bit range"),
        ({"n": INT64_MIN - 1}, "$.n", "int", "outside the signed 64-bit range"),
        ([2**64 - 1], "$[0]", "int", "outside the signed 64-bit range"),
        ({"items": [{}, {}, {}, {"name": f"{SECRET}\x00"}]}, "$.items[3].name", "str", "NUL"),
        ({f"{SECRET}\x00": 1}, "$", "str", "dict key contains a NUL"),
        ({"b": SECRET.encode()}, "$.b", "bytes", "type bytes"),
        ({"when": datetime(2024, 1, 1, tzinfo=UTC)}, "$.when", "datetime", "type datetime"),
        ({"price": Decimal("1.5")}, "$.price", "Decimal", "type Decimal"),
        ({"obj": Leaky()}, "$.obj", "Leaky", "type Leaky"),
        ({"id": uuid.UUID(int=1)}, "$.id", "UUID", "type UUID"),
        ({"shade": Shade.DARK}, "$.shade", "Shade", "type Shade"),
        ({"s": f"{SECRET}\ud800"}, "$.s", "str", "lone surrogate"),
        (Holder([Holder({"deep": {SECRET}})]), "$.payload[0].payload.deep", "set", "set"),
        ({"m": Thumbnail.model_construct(**NAN_WIDTH)}, "$.m.width", "float", "finite"),
    ],
)
def test_refusals_name_path_and_type_but_never_the_value(
    value: object, path: str, type_name: str, problem: str
) -> None:
    with pytest.raises(JsonConversionError) as caught:
        to_json_text(value)
    err = caught.value
    assert (err.path, err.type_name) == (path, type_name)
    assert problem in err.problem
    assert path in str(err)
    assert_no_secret(err)


def test_a_value_that_contains_itself_is_refused_not_a_recursion_error() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(JsonConversionError, match="nested more than") as caught:
        to_json_text({"loop": loop})
    assert (caught.value.path, caught.value.type_name) == ("$", "list")


def nested_lists(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = [value]
    return value


def test_nesting_is_accepted_up_to_max_depth_and_refused_beyond() -> None:
    """orjson alone would accept 254 levels; the walk's limit holds on every path."""
    assert to_json_text(nested_lists(MAX_DEPTH)) == b"[" * MAX_DEPTH + b"1" + b"]" * MAX_DEPTH
    for value in (nested_lists(MAX_DEPTH + 1), {"k": [nested_lists(MAX_DEPTH)]}):
        with pytest.raises(JsonConversionError, match="nested more than"):
            to_json_text(value)


def test_many_decode_errors_are_summarised() -> None:
    fields: dict[str, Any] = {f"f{n}": (int, ...) for n in range(8)}
    wide = create_model("Wide", **fields)
    with pytest.raises(JsonDecodeMismatch) as caught:
        decode_value({}, wide)
    assert caught.value.detail.endswith("$.f4 (missing) and 3 more")


def test_a_failing_pydantic_serializer_is_refused_without_its_message() -> None:
    class Sealed(BaseModel):
        token: str

        @field_serializer("token")
        def _reveal(self, token: str) -> str:
            raise ValueError(f"cannot serialize {token}")

    with pytest.raises(JsonConversionError, match="could not be dumped") as caught:
        to_json_text({"x": [Sealed(token=SECRET)]})
    assert caught.value.path == "$.x[0]"
    assert_no_secret(caught.value)


def test_nan_in_an_untyped_model_field_is_refused_not_written_as_null() -> None:
    """pydantic's JSON mode would quietly write null for NaN held in an ``Any`` field."""

    class Loose(BaseModel):
        data: Any

    with pytest.raises(JsonConversionError) as caught:
        to_json_text({"m": Loose(data={"xs": [1.0, float("nan")]})})
    assert (caught.value.path, caught.value.type_name) == ("$.m.data.xs[1]", "float")


def test_nan_is_refused_whatever_the_models_inf_nan_setting() -> None:
    """Only model_dump_json writes "Infinity" strings; JSON-mode dumps keep the float."""

    class Measured(BaseModel):
        model_config = ConfigDict(ser_json_inf_nan="strings")

        value: Any

    with pytest.raises(JsonConversionError) as caught:
        to_json_text(Measured(value=[float("inf")]))
    assert caught.value.path == "$.value[0]"


def test_path_quotes_keys_that_are_not_identifiers() -> None:
    with pytest.raises(JsonConversionError) as caught:
        to_json_text({"a b": {"ok": [{"c.d": None, "é": {"x": set()}}]}})
    assert caught.value.path == '$["a b"].ok[0].é.x'


# --- encode_output ---------------------------------------------------------------------------


def _string_of_text_size(size: int, char: str = "x") -> str:
    """A string whose JSON text (with its two quotes) is ``size`` bytes."""
    width = len(char.encode())
    assert (size - 2) % width == 0
    return char * ((size - 2) // width)


def test_none_means_clear() -> None:
    assert encode_output(None) is None
    assert encode_output(RootModel[int | None](None)) is None


def test_exactly_the_limit_is_accepted_and_one_byte_more_is_not() -> None:
    at_limit = encode_output(_string_of_text_size(MAX_OUTPUT_BYTES))
    assert at_limit is not None
    assert len(at_limit.encode()) == MAX_OUTPUT_BYTES == 4096
    with pytest.raises(OutputError) as caught:
        encode_output(_string_of_text_size(MAX_OUTPUT_BYTES + 1))
    err = caught.value
    assert (err.reason, err.size_bytes, err.limit_bytes) == ("too_large", 4097, 4096)
    assert str(err) == "output is 4097 bytes of JSON text; the limit is 4096"


@pytest.mark.parametrize("char", ["é", "€", "😀"])
def test_the_limit_counts_utf8_bytes_not_characters(char: str) -> None:
    width = len(char.encode())
    count, pad = divmod(MAX_OUTPUT_BYTES - 2, width)
    fits = char * count + "x" * pad
    text = encode_output(fits)
    assert text is not None
    assert len(text.encode()) == MAX_OUTPUT_BYTES
    too_big = fits + char
    assert len(too_big) + 2 < MAX_OUTPUT_BYTES  # fewer characters than the limit, more bytes
    with pytest.raises(OutputError) as caught:
        encode_output(too_big)
    assert caught.value.reason == "too_large"
    assert caught.value.size_bytes == MAX_OUTPUT_BYTES + width


def test_invalid_values_raise_output_error_with_path() -> None:
    with pytest.raises(OutputError) as caught:
        encode_output({"a": [1, 2, float("nan")]})
    err = caught.value
    assert err.reason == "invalid"
    assert err.path == "$.a[2]"
    assert str(err) == (
        "output is invalid at $.a[2]: float value is not finite (NaN and infinity are not JSON)"
    )


def test_nul_decoded_from_a_json_escape_is_refused() -> None:
    decoded = orjson.loads(b'{"note": "a\\u0000b"}')
    with pytest.raises(OutputError, match=r"at \$\.note: str contains a NUL"):
        encode_output(decoded)


def test_declared_class_refuses_other_values_naming_both_types() -> None:
    with pytest.raises(OutputError) as caught:
        encode_output({"width": 1, "height": 2, "url": SECRET}, expected_type=Thumbnail)
    assert caught.value.reason == "wrong_type"
    assert str(caught.value) == "this kind records Thumbnail outputs; got dict"
    thumb = Thumbnail(width=1, height=2, url="u")
    assert encode_output(thumb, expected_type=Thumbnail) == '{"width":1,"height":2,"url":"u"}'
    assert encode_output(Size(1, 2), expected_type=Size) == '{"width":1,"height":2}'
    assert encode_output(None, expected_type=Thumbnail) is None


def test_types_isinstance_cannot_check_are_not_enforced() -> None:
    class Shape(TypedDict):
        sides: int

    assert encode_output({"other": 1}, expected_type=Shape) == '{"other":1}'
    assert encode_output(["x"], expected_type=list[int]) == '["x"]'


def test_numbers_follow_json_not_python_subclassing() -> None:
    assert encode_output(3, expected_type=float) == "3"
    with pytest.raises(OutputError, match="records int outputs; got bool"):
        encode_output(True, expected_type=int)


# --- OutputSlot ------------------------------------------------------------------------------


def test_slot_records_replaces_and_clears() -> None:
    slot = OutputSlot()
    assert (slot.get(), slot.text, slot.sealed) == (None, None, False)
    slot.set({"updated": 3, "skipped": 1})
    assert slot.get() == {"updated": 3, "skipped": 1}
    assert slot.text == '{"updated":3,"skipped":1}'
    slot.set([1.0])
    assert slot.text == "[1.0]"
    slot.clear()
    assert slot.text is None
    slot.set("again")
    slot.set(None)
    assert slot.get() is None


def test_get_returns_a_copy_that_cannot_change_the_slot() -> None:
    slot = OutputSlot()
    slot.set({"items": [1]})
    got = slot.get()
    assert isinstance(got, dict)
    got["items"].append(2)
    assert slot.get() == {"items": [1]}


@pytest.mark.parametrize(
    ("bad", "reason"),
    [({"x": float("nan")}, "invalid"), ("x" * 5000, "too_large"), ({"w": 1}, "wrong_type")],
    ids=["invalid", "too_large", "wrong_type"],
)
def test_a_failed_call_clears_the_slot(bad: object, reason: str) -> None:
    slot = OutputSlot(expected_type=Thumbnail if reason == "wrong_type" else None)
    slot.set({"good": True} if reason != "wrong_type" else Thumbnail(width=1, height=1, url=""))
    assert slot.text is not None
    with pytest.raises(OutputError) as caught:
        slot.set(bad)
    assert caught.value.reason == reason
    assert slot.text is None
    assert slot.get() is None


def test_sealing_freezes_the_value() -> None:
    slot = OutputSlot()
    slot.set({"done": 1})
    assert slot.seal() == '{"done":1}'
    assert slot.sealed
    assert slot.seal() == '{"done":1}'  # idempotent: a finalize retry gets the same text
    for late in ({"done": 2}, None, {"bad": float("nan")}):
        with pytest.raises(OutputError) as caught:
            slot.set(late)
        assert caught.value.reason == "sealed"
        assert str(caught.value) == "the handler already returned; its output is sealed"
    slot.clear()  # does nothing after the seal
    assert slot.text == '{"done":1}'
    assert slot.get() == {"done": 1}


def test_sealing_an_empty_slot_returns_none() -> None:
    slot = OutputSlot()
    assert slot.seal() is None
    assert slot.seal() is None


class Gated(BaseModel):
    """A model whose conversion waits for a gate, to hold a call between start and lock."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    label: str
    poison: bool = False
    entered: threading.Event
    gate: threading.Event

    @pydantic_model_serializer(mode="plain")
    def _dump(self) -> dict[str, object]:
        self.entered.set()
        assert self.gate.wait(timeout=30)
        return {"label": self.label, "nan": float("nan")} if self.poison else {"label": self.label}


def _start_blocked_set(
    slot: OutputSlot, value: Gated
) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            slot.set(value)
        except OutputError as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    assert value.entered.wait(timeout=30)
    return thread, errors


def _gated(label: str, *, poison: bool = False) -> Gated:
    return Gated(label=label, poison=poison, entered=threading.Event(), gate=threading.Event())


def test_concurrent_calls_take_effect_in_lock_order_so_the_slow_starter_wins() -> None:
    slot = OutputSlot()
    slow = _gated("slow")
    thread, errors = _start_blocked_set(slot, slow)  # started first, still converting
    slot.set({"label": "fast"})  # started later, reaches the lock first
    assert slot.get() == {"label": "fast"}
    slow.gate.set()
    thread.join(timeout=30)
    assert errors == []
    assert slot.get() == {"label": "slow"}


def test_a_slow_failing_call_that_finishes_last_clears_the_slot() -> None:
    slot = OutputSlot()
    slow = _gated("slow", poison=True)
    thread, errors = _start_blocked_set(slot, slow)
    slot.set({"label": "fast"})
    slow.gate.set()
    thread.join(timeout=30)
    assert [getattr(err, "reason", None) for err in errors] == ["invalid"]
    assert slot.text is None


def test_a_call_still_converting_at_seal_time_is_refused() -> None:
    slot = OutputSlot()
    slot.set({"label": "before"})
    slow = _gated("slow")
    thread, errors = _start_blocked_set(slot, slow)
    assert slot.seal() == '{"label":"before"}'
    slow.gate.set()
    thread.join(timeout=30)
    assert [getattr(err, "reason", None) for err in errors] == ["sealed"]
    assert slot.text == '{"label":"before"}'


# --- decode_value / decode_output ------------------------------------------------------------


def test_decode_value_follows_dispatch_rules() -> None:
    assert decode_value({"width": 1, "height": 2, "url": "u"}, Thumbnail) == Thumbnail(
        width=1, height=2, url="u"
    )
    assert decode_value({"width": 1, "height": 2}, Size) == Size(1, 2)
    assert decode_value("x", str) == "x"
    assert decode_value(2, float) == 2.0
    unchecked: object = decode_value(["x"], list[int])
    assert unchecked == ["x"]


@pytest.mark.parametrize(
    ("value", "target", "detail"),
    [
        (
            {"width": SECRET},
            Thumbnail,
            "$.width (int_parsing), $.height (missing), $.url (missing)",
        ),
        ([SECRET], Size, "it is built from a JSON object; got list"),
        ({"width": 1, "colour": SECRET}, Size, "its constructor raised TypeError"),
        (SECRET, int, "got str"),
        (True, int, "got bool"),
        (None, str, "got null"),
    ],
)
def test_decode_mismatches_name_the_type_never_the_value(
    value: object, target: type[Any], detail: str
) -> None:
    with pytest.raises(JsonDecodeMismatch) as caught:
        decode_value(value, target)
    assert caught.value.detail == detail
    assert target.__name__ in str(caught.value)
    assert_no_secret(caught.value)


def test_decode_output_absent_is_none() -> None:
    assert decode_output("resize", None, Thumbnail, present=False) is None


def test_decode_output_refuses_a_type_the_kind_does_not_declare() -> None:
    value = {"width": 1, "height": 2, "url": "u"}
    assert decode_output("resize", value, Thumbnail, present=True, declared="Thumbnail") == (
        Thumbnail(**value)
    )
    assert decode_output("x", value, Thumbnail, present=True) == Thumbnail(**value)
    with pytest.raises(OutputDecodeError) as caught:
        decode_output("x", value, Thumbnail, present=True, declared="Size")
    assert str(caught.value) == "job kind 'x' declares output type Size, not Thumbnail"


def test_decode_output_translates_mismatches() -> None:
    with pytest.raises(OutputDecodeError) as caught:
        decode_output("resize", {"width": SECRET}, Thumbnail, present=True)
    assert str(caught.value).startswith("the stored output does not fit Thumbnail: $.width")
    assert_no_secret(caught.value)


def test_job_row_output_as_decodes_through_the_same_path() -> None:
    from storage.values.models import JobRow

    now = datetime(2024, 1, 1, tzinfo=UTC)
    row = JobRow(
        id=1,
        kind="resize",
        queue="default",
        state="completed",
        args={},
        priority=2,
        attempt=1,
        max_attempts=3,
        run_lease=1,
        run_at=now,
        created_at=now,
        output_text='{"width":1,"height":2,"url":"u"}',
        errors=[{"error": "boom", "output": {"width": 9, "height": 9}}],
    )
    assert row.output_as(Thumbnail) == Thumbnail(width=1, height=2, url="u")
    assert row.error_output_as(Size) == Size(9, 9)


# --- descriptors ---------------------------------------------------------------------------


def test_descriptor_publishes_name_and_serialization_schema() -> None:
    assert output_descriptor(Thumbnail) == {
        "type": "Thumbnail",
        "schema": Thumbnail.model_json_schema(mode="serialization"),
    }
    size = output_descriptor(Size)
    assert size["type"] == "Size"
    assert size["schema"]["required"] == ["width", "height"]
    assert output_descriptor(Leaky) == {"type": "Leaky"}


def test_descriptor_drops_a_schema_larger_than_64_kib() -> None:
    fields: dict[str, Any] = {f"field_{n}": (int, ...) for n in range(3000)}
    huge = create_model("Huge", **fields)
    assert len(orjson.dumps(huge.model_json_schema())) > 64 * 1024
    assert output_descriptor(huge) == {"type": "Huge"}
