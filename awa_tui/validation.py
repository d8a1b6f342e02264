"""Live checks for the external-completion form: JSON, the output rules, the declared schema.

The same rules as the engine: the text is parsed as JSON (the standard library's parser, which
keeps integers exact, so one beyond 64 bits is refused by the engine's rule rather than turned
into a float), then ``encode_output``
(size, NUL characters, ...) and the kind's published schema through ``storage.schema_violations``
(every violated keyword with its JSON path). Messages name reasons, JSON positions and the
schema's own values, never the value typed in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from awa_tui.errors import output_error_text
from awa_tui.present import size_text
from storage import MAX_OUTPUT_BYTES, OutputError, Violation, encode_output, schema_violations


@dataclass(frozen=True)
class OutputCheck:
    """The verdict on the output editor's text."""

    ok: bool
    value: Any  # the parsed value; None means "complete without an output"
    stored_text: str | None  # what would be stored (compact JSON)
    size: int | None
    reason: str | None  # "not_json", an OutputError reason, or "schema"
    path: str | None  # the first offending position
    message: str
    violations: tuple[Violation, ...] = ()  # every violated schema keyword, with its path


def check_output(
    source: str, schema: dict[str, Any] | None, type_name: str | None = None
) -> OutputCheck:
    if not source.strip():
        return OutputCheck(
            True, None, None, None, None, None, "No output: the job completes without one."
        )
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        return OutputCheck(
            False,
            None,
            None,
            None,
            "not_json",
            None,
            f"not_json: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
        )
    try:
        text = encode_output(value, expected_type=None)
    except OutputError as exc:
        return OutputCheck(
            False, value, None, exc.size_bytes, exc.reason, exc.path, output_error_text(exc)
        )
    if text is None:
        return OutputCheck(
            True, None, None, None, None, None, "JSON null: the job completes without an output."
        )
    size = len(text.encode())
    limit = f"{size_text(size)} of {size_text(MAX_OUTPUT_BYTES)}"
    label = type_name or "declared"
    if schema is not None:
        violations = tuple(schema_violations(value, schema))
        if violations:
            listed = "; ".join(map(str, violations))
            message = f"schema at {listed} (does not fit the {label} schema; {limit})"
            path = violations[0].path
            return OutputCheck(False, value, text, size, "schema", path, message, violations)
        return OutputCheck(
            True, value, text, size, None, None, f"{limit} · fits the {label} schema"
        )
    message = f"{limit} · no schema declared for this kind"
    return OutputCheck(True, value, text, size, None, None, message)


@dataclass(frozen=True)
class PayloadCheck:
    ok: bool
    value: Any
    message: str


def check_payload(source: str) -> PayloadCheck:
    """The optional payload handed to ``complete_external`` (never stored)."""
    if not source.strip():
        return PayloadCheck(True, None, "No payload.")
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        return PayloadCheck(
            False,
            None,
            f"Payload is not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}",
        )
    return PayloadCheck(True, value, "Payload is valid JSON (it is passed on, never stored).")
