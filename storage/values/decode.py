"""Decoding a JSON value as a registered type: job args at dispatch, outputs when read.

The other direction of ``storage.values.codec``. Pydantic models are validated, dataclasses
built from keywords, other classes checked with isinstance. Errors name the type and the
positions, never the value: args and outputs may hold data that must not reach logs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar, cast, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails
from pydantic_core.core_schema import ErrorType

from storage.values.codec import format_path

T = TypeVar("T")


class JsonDecodeMismatch(ValueError):
    """A decoded JSON value does not fit the requested type."""

    def __init__(
        self, target_name: str, detail: str, path: str | None = None, rule: str | None = None
    ) -> None:
        self.target_name = target_name
        self.detail = detail
        self.path = path  # the first failing position and its rule, when the type names them
        self.rule = rule
        super().__init__(f"value does not fit {target_name}: {detail}")


def type_name(target: object) -> str:
    """A readable name for a class or a typing construct (``Thumbnail``, ``list[int]``)."""
    if isinstance(target, type):
        return target.__name__
    return str(target).removeprefix("typing.")


def instance_check(value: object, target: object) -> bool | None:
    """Whether ``value`` is a ``target``; None when isinstance cannot tell (list[int], TypedDict).

    A JSON number is accepted for ``float``, and a bool is not taken for an int or a float.
    """
    if not isinstance(target, type):
        return None
    try:
        if isinstance(value, bool) and target in (int, float):
            return False
        if target is float and isinstance(value, int):
            return True
        return isinstance(value, target)
    except TypeError:  # TypedDict, non-runtime Protocol: unchecked by design
        return None


def decode_value(value: object, target: type[T]) -> T:
    """Decode a JSON value as ``target`` the way dispatch decodes args.

    Pydantic models are validated, dataclasses built from keywords, other classes checked with
    isinstance; typing constructs isinstance cannot check come back unchecked. Messages name
    the type and positions, never the value, so the cause is not chained. Once per dispatched
    job: C checks (``issubclass`` would run BaseModel's metaclass in Python), names on error.
    """
    if isinstance(target, type) and BaseModel in target.__mro__:
        try:
            return cast(T, target.model_validate(value))  # type: ignore[attr-defined]
        except ValidationError as exc:
            errors = exc.errors(include_input=False, include_url=False)
            places = ", ".join(_loc_text(e["loc"], e["type"]) for e in errors[:_SHOWN_ERRORS])
            if len(errors) > _SHOWN_ERRORS:
                places += f" and {len(errors) - _SHOWN_ERRORS} more"
            path, rule = _first_rule(errors)
            raise JsonDecodeMismatch(type_name(target), places, path, rule) from None
    if isinstance(target, type) and hasattr(target, "__dataclass_fields__"):
        if not isinstance(value, dict):
            detail = f"it is built from a JSON object; got {_kind(value)}"
            raise JsonDecodeMismatch(type_name(target), detail)
        try:
            return target(**value)
        except (TypeError, ValueError) as exc:
            detail = f"its constructor raised {type(exc).__name__}"
            raise JsonDecodeMismatch(type_name(target), detail) from None
    fits = instance_check(value, target)
    if fits is False:
        raise JsonDecodeMismatch(type_name(target), f"got {_kind(value)}")
    if target is float and type(value) is int:
        return cast(T, float(value))
    return cast(T, value)


_SHOWN_ERRORS = 5


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _loc_text(loc: tuple[int | str, ...], error_type: str) -> str:
    return f"{format_path(loc)} ({error_type})"


_CORE_TYPES = frozenset(get_args(ErrorType))
_QUOTES_INPUT = {"value_error", "assertion_error", "union_tag_invalid"}
"""Error types whose message a validator's author wrote, or that quotes part of the input."""


def _first_rule(errors: Sequence[ErrorDetails]) -> tuple[str | None, str | None]:
    """The first error's position and rule: pydantic's own message for its built-in checks
    (made from the type, e.g. "Input should be a valid integer"), else which validator
    type refused it, since an author's message may quote the value."""
    if not errors:
        return None, None
    first = errors[0]
    kind = first["type"]
    builtin = kind in _CORE_TYPES and kind not in _QUOTES_INPUT
    rule = first["msg"] if builtin else f"refused by a validator ({kind})"
    return format_path(first["loc"]), rule


__all__ = ["JsonDecodeMismatch", "decode_value", "instance_check", "type_name"]
