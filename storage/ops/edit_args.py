"""Edit-and-retry: the new args of a failed or dead-lettered job, checked as an insert checks
them (``storage.insert.plan.InsertPlan.encode``: the args type this process registered for
the kind), or, when no process here declares one, against the JSON Schema a runtime published
in the kind's descriptor as ``extra["args_schema"]`` (``storage.values.schema``). Nothing is
written when they do not fit; the message names positions, never values.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import orjson

from storage.db.pool import Conn
from storage.insert.plan import InsertPlan, KindSpec
from storage.read import descriptors
from storage.values.errors import ArgsValidationError
from storage.values.models import JobRow
from storage.values.schema import schema_violations

ARGS_SCHEMA = "args_schema"
"""The key of a descriptor's ``extra`` that holds a kind's published args schema."""
SHOWN_VIOLATIONS = 3

NewArgs = Callable[[Conn, JobRow], Awaitable[str]]
"""The new args' JSON text for the job as read (``storage.ops.admin.retry``)."""


def edited(args: Any, specs: Callable[[], Mapping[str, KindSpec]]) -> NewArgs:
    """How ``args`` become the new args of a job of whatever kind it turns out to be."""

    async def encode(conn: Conn, row: JobRow) -> str:
        known = specs()
        _, _, text = InsertPlan(known, {"kind": row.kind}).encode(args)
        spec = known.get(row.kind)
        if spec is None or spec.args_type is None:
            published = (await descriptors.fetch(conn, row.kind)).get(row.kind)
            schema = None if published is None else published.extra.get(ARGS_SCHEMA)
            if isinstance(schema, dict | bool):
                violations = schema_violations(orjson.loads(text), schema)
                if violations:
                    shown = "; ".join(map(str, violations[:SHOWN_VIOLATIONS]))
                    raise ArgsValidationError(
                        f"The new args do not fit kind {row.kind!r}'s published args schema: "
                        f"{shown}; nothing was retried."
                    )
        return text.decode()

    return encode
