"""Schema drift: a kind's recent completed outputs that no longer fit its current declared
schema (a handler changed, an older deployment, another language, a schema tightened later).

Bounded like the last good output (``storage.read.last_output``, the same window and the same
fragments): the newest compact completion batches holding up to ``COMPACT_SCAN_CAP`` jobs (at
most ``BATCH_SCAN_CAP`` batches) and the newest ``DONE_SCAN_CAP`` completed done entries; the
kind's outputs among them are checked by ``schema_violations``, the one checker. A batch's
output array is read once (one ``unnest`` beside its job ids). The descriptor and both paths
are read in one snapshot, then checked once the connection is back. An output is named by its
job and what it breaks (path, keyword, the checker's value-free words), never by its value.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from storage.db.pool import Conn, snapshot
from storage.read import descriptors
from storage.read.last_output import (
    BATCH_SCAN_CAP,
    COMPACT_SCAN_CAP,
    DONE_SCAN_CAP,
    KIND_OF,
    LAST_GOOD_BOUND,
    NEWEST_BATCHES,
    NEWEST_DONE,
    NOT_TOMBSTONED,
)
from storage.read.listing import NO_OUTPUTS
from storage.values.errors import InvalidFilter
from storage.values.names import check_stored_name
from storage.values.schema import Violation, schema_violations
from storage.values.shapes import DriftedOutput, SchemaDrift

MAX_DRIFT_LISTED = 20
"""Drifted outputs listed at most (newest first); all of them are counted."""
DRIFT_VIOLATIONS = 3
"""Violations named per listed output; the rest are counted."""
CHECK_CHUNK = 50
"""Outputs checked between two turns of the event loop."""

# $1 kind, $2 queue (NULL: any), $3 batches and $4 compact jobs at most, as the last good read.
KIND_COMPACT = f"""
SELECT m.job_id, b.finalized_at, m.output
  FROM {NEWEST_BATCHES}
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.outputs) AS m(job_id, run_lease, output)
 CROSS JOIN LATERAL {KIND_OF % {"job": "m"}}
 WHERE b.jobs_before < $4 AND b.outputs IS NOT NULL AND ($2::text IS NULL OR b.queue = $2)
   AND m.output IS NOT NULL AND r.kind = $1 AND {NOT_TOMBSTONED % {"job": "m"}}
"""

# $1 kind, $2 queue (NULL: any), $3 done entries at most.
KIND_DONE = f"""
SELECT d.job_id, d.finalized_at, d.output
  FROM {NEWEST_DONE % {"cap": "$3"}}
 CROSS JOIN LATERAL {KIND_OF % {"job": "d"}}
 WHERE d.output IS NOT NULL AND r.kind = $1 AND ($2::text IS NULL OR r.queue = $2)
"""

UNDECODABLE = Violation(
    "$", "json", "is JSON this reader cannot decode (e.g. a number past 64 bits)"
)


Stored = tuple[datetime, int, str, str]
"""A stored output read: finished at, job id, its text, its path (compact or general)."""


@dataclass(frozen=True)
class Window:
    """What ``read_window`` read in one snapshot: the kind's schema and its outputs, newest
    first (none when it declares no schema)."""

    kind: str
    schema: dict[str, Any] | None
    outputs: list[Stored]


async def read_window(
    conn: Conn,
    kind: str,
    *,
    outputs: bool = True,
    caps: tuple[int, int] = (COMPACT_SCAN_CAP, DONE_SCAN_CAP),
) -> Window:
    """The declared schema of ``kind`` and its outputs among ``LAST_GOOD_BOUND``, in one
    snapshot. A schema without output columns (v001) is refused: it keeps none to check.
    ``caps`` (compact jobs, done entries) is for tests of the bound."""
    check_stored_name(kind, "Kind")
    if not outputs:
        raise InvalidFilter(NO_OUTPUTS)
    async with snapshot(conn):
        descriptor = (await descriptors.fetch(conn, kind)).get(kind)
        schema = descriptor.output_schema if descriptor is not None else None
        if schema is None:
            return Window(kind, None, [])
        compact = await conn.fetch(KIND_COMPACT, kind, None, BATCH_SCAN_CAP, caps[0])
        general = await conn.fetch(KIND_DONE, kind, None, caps[1])
    found = [
        (r["finalized_at"], r["job_id"], r["output"], path)
        for rows, path in ((compact, "compact"), (general, "general"))
        for r in rows
    ]
    found.sort(reverse=True)
    return Window(kind, schema, found)


async def check_window(window: Window) -> SchemaDrift:
    """Check the window's outputs against its schema, the newest first; after connections are
    given back (checking 2,000 outputs takes a good part of a second on a busy host), letting
    the event loop run between chunks of ``CHECK_CHUNK``, so a console stays responsive."""
    if window.schema is None:
        return SchemaDrift(
            kind=window.kind,
            schema_declared=False,
            checked=0,
            drifted=0,
            outputs=[],
            window=LAST_GOOD_BOUND,
        )
    drifted = 0
    listed: list[DriftedOutput] = []
    for n, (finalized_at, job_id, text, path) in enumerate(window.outputs):
        if n and n % CHECK_CHUNK == 0:
            await asyncio.sleep(0)
        violations = _violations(text, window.schema)
        if not violations:
            continue
        drifted += 1
        if len(listed) < MAX_DRIFT_LISTED:
            listed.append(
                DriftedOutput(
                    job_id=job_id,
                    finalized_at=finalized_at,
                    storage_path=path,
                    violations=violations[:DRIFT_VIOLATIONS],
                    more=max(len(violations) - DRIFT_VIOLATIONS, 0),
                )
            )
    return SchemaDrift(
        kind=window.kind,
        schema_declared=True,
        checked=len(window.outputs),
        drifted=drifted,
        outputs=listed,
        window=LAST_GOOD_BOUND,
    )


async def schema_drift(conn: Conn, kind: str, **options: Any) -> SchemaDrift:
    """``read_window`` then ``check_window`` on ``conn`` (tests of the bound)."""
    return await check_window(await read_window(conn, kind, **options))


def _violations(text: str, schema: dict[str, Any]) -> list[Violation]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return [UNDECODABLE]
    return schema_violations(value, schema)
