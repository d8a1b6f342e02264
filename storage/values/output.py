"""Retained job output (ADR-048): validation, the attempt's slot, typed reads, descriptors.

An output is at most ``MAX_OUTPUT_BYTES`` of compact JSON text. It is converted and checked
when the handler records it, so nothing that can fail reaches the completion transition, and it
is stored as that exact text (``json``, not ``jsonb``) so ``1.0`` and key order read back as
written. Errors name positions and types, never the value.
"""

from __future__ import annotations

import threading
from threading import get_ident
from typing import Any, Literal, TypeVar

import orjson
from pydantic import BaseModel, PydanticUserError, TypeAdapter

from storage.values.codec import JSON_SCALARS, PLAIN_ONLY, JsonConversionError, to_json_text
from storage.values.decode import JsonDecodeMismatch, decode_value, instance_check, type_name
from storage.values.errors import OutputDecodeError, OutputError

T = TypeVar("T")

MAX_OUTPUT_BYTES = 4096
"""The largest output, in bytes of compact UTF-8 JSON text."""

MAX_DESCRIPTOR_BYTES = 64 * 1024
"""The output descriptor column's cap; a larger schema is dropped and the type name kept."""

_SEALED_MESSAGE = "the handler already returned; its output is sealed"
_EXACT_SCALARS = JSON_SCALARS - {float}
"""Exact types orjson writes as the walk does, always (a float may be a NaN, written null)."""


def encode_output(value: object, *, expected_type: type[Any] | None = None) -> str | None:
    """The JSON text to store for ``value``, or None for "no output" (``None`` clears).

    ``expected_type`` is the kind's declared output type; it is enforced only when isinstance
    can check it (a TypedDict or ``list[int]`` is not enforced).
    """
    kind = type(value)
    if (kind is dict or kind is list) and expected_type is None:
        # The common output, a dict or list of exact JSON scalars: orjson writes it as the walk
        # would (codec._plain_json_text says why), so only a NUL, a NaN written as null and
        # the size are left to check. Inline, with C-level checks: this runs per job.
        plain: Any = value  # a dict or a list: typed as such without a call
        try:
            raw = orjson.dumps(plain, None, PLAIN_ONLY)
        except orjson.JSONEncodeError:
            raw = None
        if raw is not None and len(raw) <= MAX_OUTPUT_BYTES:
            text = raw.decode()
            if "\\u0000" not in text:
                items = plain.values() if kind is dict else plain
                if _EXACT_SCALARS.issuperset(map(type, items)):
                    return text
                if "null" not in text and JSON_SCALARS.issuperset(map(type, items)):
                    return text
    elif value is None:
        return None
    if expected_type is not None and instance_check(value, expected_type) is False:
        raise OutputError(
            "wrong_type",
            f"this kind records {type_name(expected_type)} outputs; got {type(value).__name__}",
        )
    try:
        raw = to_json_text(value)
    except JsonConversionError as exc:
        raise OutputError(
            "invalid", f"output is invalid at {exc.path}: {exc.problem}", path=exc.path
        ) from exc
    size = len(raw)
    if size > MAX_OUTPUT_BYTES:
        raise OutputError(
            "too_large",
            f"output is {size} bytes of JSON text; the limit is {MAX_OUTPUT_BYTES}",
            size_bytes=size,
            limit_bytes=MAX_OUTPUT_BYTES,
        )
    if raw == b"null":  # e.g. a RootModel holding None: recording JSON null clears
        return None
    return raw.decode()


class OutputSlot:
    """One attempt's output: replaced by each call, sealed when the handler returns.

    Handlers may record from threads. Calls take effect in the order they store their text,
    so among concurrent calls the last to finish wins, whether it succeeded or failed.
    Conversion runs before that store. The thread that builds the slot (the attempt's event
    loop) must be the one that seals it: its own calls cannot overlap the seal, so they store
    without a lock. A call from another thread stores under the lock, after marking the slot
    shared, and the seal takes the lock only then: one lock serves every slot, and the common
    attempt (no threads) takes it never.
    """

    __slots__ = ("_expected_type", "_owner", "_sealed", "_shared", "_text")
    _lock = threading.Lock()

    def __init__(self, expected_type: type[Any] | None = None) -> None:
        self._text: str | None = None
        self._sealed = False
        self._shared = False
        self._expected_type = expected_type
        self._owner = get_ident()

    def set(self, value: object) -> None:
        """Record ``value``, replacing any earlier one; ``None`` clears.

        A failed call clears the slot, since an earlier value left in place would look current.
        """
        if self._sealed:
            raise OutputError("sealed", _SEALED_MESSAGE)
        text = None
        try:
            text = encode_output(value, expected_type=self._expected_type)
        finally:  # stored inline (no call per output), cleared when encoding raised
            if self._owner == get_ident():
                self._text = text
            else:
                self._store_shared(text)

    def _store_shared(self, text: str | None) -> None:
        """Another thread's store: marked shared before the sealed check, both under the lock,
        so a seal either sees the mark and waits for the lock or came first and is seen."""
        with self._lock:
            self._shared = True
            if self._sealed:
                raise OutputError("sealed", _SEALED_MESSAGE)
            self._text = text

    def clear(self) -> None:
        """Empty the slot; after the handler returned this does nothing."""
        if self._owner == get_ident():
            if not self._sealed:
                self._text = None
            return
        with self._lock:
            self._shared = True
            if not self._sealed:
                self._text = None

    def get(self) -> object | None:
        """The value recorded so far, decoded afresh (callers cannot mutate the slot)."""
        text = self._text
        return None if text is None else orjson.loads(text)

    @property
    def text(self) -> str | None:
        """The exact JSON text recorded so far."""
        return self._text

    @property
    def sealed(self) -> bool:
        return self._sealed

    @property
    def expected_type(self) -> type[Any] | None:
        return self._expected_type

    def seal(self) -> str | None:
        """Seal the slot and return its text; sealing again returns the same text. Called by
        the thread that built the slot."""
        self._sealed = True
        if self._shared:  # a call from another thread may be storing: wait for it
            with self._lock:
                return self._text
        return self._text


def decode_output(
    kind: str, value: object, output_type: type[T], *, present: bool, declared: str | None = None
) -> T | None:
    """Decode a stored output as ``output_type`` (reader-side typing; storage stays JSON).

    ``declared`` is the output type name the kind's descriptor declares (``JobRow`` carries it
    when it was read with it). A row whose kind declares another type is refused, so it cannot
    be read as the wrong shape by accident; when the kind declares nothing the value decodes
    like dispatched args.
    """
    if not present:
        return None
    name = type_name(output_type)
    if declared is not None and declared != name:
        raise OutputDecodeError(f"job kind {kind!r} declares output type {declared}, not {name}")
    try:
        return decode_value(value, output_type)
    except JsonDecodeMismatch as exc:
        raise OutputDecodeError(
            f"the stored output does not fit {exc.target_name}: {exc.detail}"
        ) from exc


def output_descriptor(output_type: type[Any]) -> dict[str, Any]:
    """What a kind publishes about its output: the type name and, when pydantic can, a schema.

    The schema is the serialization-mode one, since stored values are JSON-mode dumps.
    """
    descriptor: dict[str, Any] = {"type": type_name(output_type)}
    schema = _json_schema(output_type, "serialization")
    if schema is None:
        return descriptor
    with_schema = {**descriptor, "schema": schema}
    return with_schema if _fits(with_schema) else descriptor


def args_schema(args_type: type[Any] | None) -> dict[str, Any] | None:
    """What a kind publishes about its args (``JobKindDescriptor.args_schema``): the
    validation-mode schema of a pydantic args model, the shape its args are validated as at
    insert and dispatch. None for any other args type, or a schema over the descriptor cap."""
    if not (isinstance(args_type, type) and issubclass(args_type, BaseModel)):
        return None
    schema = _json_schema(args_type, "validation")
    return schema if schema is not None and _fits(schema) else None


def _fits(published: dict[str, Any]) -> bool:
    try:
        return len(orjson.dumps(published)) <= MAX_DESCRIPTOR_BYTES
    except orjson.JSONEncodeError:
        return False


def _json_schema(
    of: type[Any], mode: Literal["validation", "serialization"]
) -> dict[str, Any] | None:
    try:
        if isinstance(of, type) and issubclass(of, BaseModel):
            return of.model_json_schema(mode=mode)
        return TypeAdapter(of).json_schema(mode=mode)
    except PydanticUserError:  # no schema for arbitrary classes: publish the name only
        return None
