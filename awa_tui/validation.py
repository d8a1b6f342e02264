"""Live checks for the forms that take JSON: the external-completion form's output (JSON, the
output rules, the kind's declaration) and the enqueue form's args (``check_args``).

The engine's own check: the text is parsed as JSON (the standard library's parser, which keeps
integers exact, so one beyond 64 bits is refused by the engine's rule rather than turned into a
float), then handed to ``storage.external_output_text`` with the declaration
``Client.output_declaration`` gives, the one ``complete_external`` uses: the kind's model when
this process registered it (pydantic's validation, as the handler would), else the published
schema. Args go through ``Client.check_args``, the check ``enqueue_job`` and an edit-and-retry
make. Messages name reasons, JSON positions and the schema's own values, never the value typed
in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from awa_tui.errors import output_error_text
from awa_tui.present import size_text
from storage import (
    MAX_OUTPUT_BYTES,
    ArgsValidationError,
    Client,
    DeclaredOutput,
    JobKindDescriptor,
    OutputError,
    external_output_text,
)

NO_DECLARATION = DeclaredOutput(None)


@dataclass(frozen=True)
class OutputCheck:
    """The verdict on the output editor's text."""

    ok: bool
    value: Any  # the parsed value; None means "complete without an output"
    stored_text: str | None  # what would be stored (compact JSON)
    size: int | None
    reason: str | None  # "not_json" or an OutputError reason
    path: str | None  # the first offending position
    message: str
    rule: str | None = None  # what failed at ``path``

    @property
    def refusal(self) -> str:
        """One line for the operator who typed it: the first failing path and its rule."""
        if self.path is not None and self.rule is not None:
            return f"output {self.path}: {self.rule}"
        return f"output {self.message}"


def check_output(source: str, declared: DeclaredOutput | None = None) -> OutputCheck:
    """The verdict on ``source``; ``declared`` None: a kind that declares nothing."""
    declared = declared or NO_DECLARATION
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
        text = external_output_text(value, declared)
    except OutputError as exc:
        return OutputCheck(
            False,
            value,
            None,
            exc.size_bytes,
            exc.reason,
            exc.path,
            output_error_text(exc),
            exc.rule,
        )
    if text is None:
        return OutputCheck(
            True, None, None, None, None, None, "JSON null: the job completes without an output."
        )
    size = len(text.encode())
    limit = f"{size_text(size)} of {size_text(MAX_OUTPUT_BYTES)}"
    label = declared.type_name or "declared"
    if declared.model is not None:
        message = f"{limit} · valid as {label} (its model, as the handler checks it)"
    elif declared.schema is not None:
        message = f"{limit} · fits the {label} schema"
    else:
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


@dataclass(frozen=True)
class ArgsCheck:
    """The verdict on the enqueue form's args."""

    ok: bool
    value: Any
    size: int | None
    message: str
    path: str | None = None
    rule: str | None = None

    @property
    def refusal(self) -> str:
        """One line: the first failing path and its rule, or why the text is not JSON."""
        if self.path is not None and self.rule is not None:
            return f"args {self.path}: {self.rule}"
        return f"args {self.message}"


def check_args(
    source: str, client: Client, kind: str, descriptor: JobKindDescriptor | None
) -> ArgsCheck:
    """The verdict on ``source`` as the args of a new job of ``kind`` (``Client.check_args``)."""
    try:
        value = json.loads(source)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno}, column {exc.colno}"
        return ArgsCheck(False, None, None, f"not valid JSON at {where}: {exc.msg}")
    try:
        text = client.check_args(kind, value, descriptor)
    except ArgsValidationError as exc:
        return ArgsCheck(False, value, None, exc.message, exc.path, exc.rule)
    size = len(text.encode())
    if client.task_spec(kind) is not None:
        against = "valid as its registered args type"
    elif descriptor is not None and descriptor.args_schema is not None:
        against = "fits the published args schema"
    else:
        against = "no args schema published for this kind: any JSON"
    return ArgsCheck(True, value, size, f"{size_text(size)} · {against}")
