"""What a kind declares about its output, and checking a value sent from outside against it.

The declaration is the kind's descriptor in ``awa.job_kind_descriptors`` (``output``:
``{"type": name, "schema": {...}}``), not whatever this process happened to register: a
console or an HTTP server handles no kinds, yet must check what it stores. A process that
registered the kind itself (``client.task(..., output=T)``) but has not published its
descriptor yet uses its own declaration, which is what it publishes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from storage.db.pool import Conn
from storage.read import descriptors
from storage.values.decode import JsonDecodeMismatch, decode_value, type_name
from storage.values.errors import OutputError
from storage.values.output import encode_output, output_descriptor
from storage.values.schema import schema_violations

_SHOWN_VIOLATIONS = 5


@dataclass(frozen=True)
class DeclaredOutput:
    """A kind's declared output: the published descriptor entry and, when this process has
    it, the model class of that type."""

    output: dict[str, Any] | None
    model: type[Any] | None = None

    @property
    def type_name(self) -> str | None:
        name = None if self.output is None else self.output.get("type")
        return name if isinstance(name, str) else None

    @property
    def schema(self) -> Any:
        return None if self.output is None else self.output.get("schema")


LocalModels = Callable[[str], type[Any] | None]
"""The output model this process registered for a kind (its task spec), or None."""


async def declared_output(conn: Conn, kind: str, local: LocalModels) -> DeclaredOutput:
    """The kind's declaration: the published descriptor, else this process's own task spec.

    The local model class is used only when it is the type the descriptor declares, so a
    process with an outdated class does not decide for the published one.
    """
    published = (await descriptors.fetch(conn, kind)).get(kind)
    return declaration(None if published is None else published.output, local(kind))


def declaration(published: dict[str, Any] | None, model: type[Any] | None) -> DeclaredOutput:
    """``declared_output`` from a descriptor's ``output`` the caller read already, and the
    model class this process registered for the kind (or None)."""
    if published is not None:
        declared = DeclaredOutput(published)
        if model is not None and declared.type_name == type_name(model):
            return DeclaredOutput(published, model)
        return declared
    if model is not None:
        return DeclaredOutput(output_descriptor(model), model)
    return DeclaredOutput(None)


def external_output_text(value: object, declared: DeclaredOutput) -> str | None:
    """The text to store for an output sent from outside, or ``OutputError``; writes nothing.

    - With the model class (the caller's ``output_for`` type, or this process's task spec for
      the declared type): plain JSON is validated as the model (pydantic's lax mode: ``"42"``
      becomes ``42``, unknown keys are dropped) and its JSON dump is stored; an instance of
      another class is refused.
    - Without it, but with the descriptor's schema: the value is stored as sent when it fits
      the schema (jsonschema, Draft 2020-12) and refused, with every violation's path, when not.
    - Neither: stored as sent, after the rules every output follows.
    """
    if value is None:
        return None
    model = declared.model
    if model is not None:
        if isinstance(value, dict | list | str | int | float | bool):
            try:
                value = decode_value(value, model)
            except JsonDecodeMismatch as exc:
                raise OutputError(
                    "wrong_type",
                    f"output does not fit {exc.target_name}: {exc.detail}",
                    path=exc.path,
                    rule=exc.rule,
                ) from None
        return encode_output(value, expected_type=model)
    text = encode_output(value)
    schema = declared.schema
    if text is None or not isinstance(schema, dict | bool):
        return text
    violations = schema_violations(orjson.loads(text), schema)
    if violations:
        shown = "; ".join(map(str, violations[:_SHOWN_VIOLATIONS]))
        more = len(violations) - _SHOWN_VIOLATIONS
        raise OutputError(
            "wrong_type",
            f"output does not fit the declared {declared.type_name or 'output'} schema: {shown}"
            + (f" and {more} more" if more > 0 else ""),
            path=violations[0].path,
            rule=violations[0].message,
        )
    return text
