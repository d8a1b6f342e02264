"""The one check of a job's args typed by an operator (an edit-and-retry's new args, an
enqueue from a form), and how an edit-and-retry uses it.

Args are checked as an insert checks them (``storage.insert.plan.InsertPlan.encode``: the
args type this process registered for the kind) or, when no process here declares one,
against the JSON Schema a runtime published in the kind's descriptor
(``JobKindDescriptor.args_schema``, checked by ``storage.values.schema``). Nothing is written
when they do not fit; the message names positions and rules, never values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from storage.db.pool import Conn
from storage.insert.plan import InsertPlan, KindSpec
from storage.read import descriptors
from storage.values.errors import ArgsValidationError
from storage.values.models import JobKindDescriptor, JobRow
from storage.values.schema import schema_violations

SHOWN_VIOLATIONS = 3

NewArgs = Callable[[Conn, JobRow], Awaitable[str]]
"""The new args' JSON text for the job as read (``storage.ops.admin.retry``)."""


def args_text(
    kind: str,
    args: Any,
    specs: Mapping[str, KindSpec],
    published: JobKindDescriptor | None,
    *,
    nothing: str = "nothing was written",
) -> str:
    """``args`` as the JSON text a job of ``kind`` would store, or ``ArgsValidationError``
    naming the first failing path and rule (``nothing`` ends its message: what was not done).

    Pure (no connection), so a form can run it on every keystroke with the descriptor it read.
    """
    _, _, text = InsertPlan(specs, {"kind": kind}).encode(args)
    spec = specs.get(kind)
    schema = published.args_schema if published is not None else None
    if (spec is None or spec.args_type is None) and schema is not None:
        violations = schema_violations(orjson.loads(text), schema)
        if violations:
            shown = "; ".join(map(str, violations[:SHOWN_VIOLATIONS]))
            first = violations[0]
            raise ArgsValidationError(
                f"The args do not fit kind {kind!r}'s published args schema: {shown}; {nothing}.",
                path=first.path,
                rule=first.message,
            )
    return text.decode()


def edited(args: Any, specs: Callable[[], Mapping[str, KindSpec]]) -> NewArgs:
    """How ``args`` become the new args of a job of whatever kind it turns out to be."""

    async def encode(conn: Conn, row: JobRow) -> str:
        published = (await descriptors.fetch(conn, row.kind)).get(row.kind)
        return args_text(row.kind, args, specs(), published, nothing="nothing was retried")

    return encode
