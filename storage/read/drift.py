"""Schema drift: a kind's recent stored outputs that no longer fit its current declared schema
(a handler changed, an older deployment, another language, a schema tightened later): its
completed outputs, and the outputs its failed attempts kept in their error entries.

Bounded like the last good output (``storage.read.last_output``, the same window and the same
fragments): the newest compact completion batches holding up to ``COMPACT_SCAN_CAP`` jobs (at
most ``BATCH_SCAN_CAP`` batches) and the newest ``DONE_SCAN_CAP`` completed done entries; and,
for the kept outputs, the newest ``KEPT_SCAN_CAP`` failed done entries (by finish time),
deferred jobs and DLQ entries, whichever kind they are (the rows read are bounded, not the
kind's rows found). The kind's outputs among them are checked by ``schema_violations``, the one
checker. A batch's output array is read once (one ``unnest`` beside its job ids). The
descriptor and every source are read in one snapshot, then checked once the connection is
back. An output is named by its job, its path (or ``error entry`` and where its job is now)
and what it breaks (path, keyword, the checker's value-free words), never by its value.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from storage.db.pool import Conn, snapshot
from storage.read import descriptors
from storage.read.failure_groups import RETRIED_AT, kept_output_of
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

KEPT_SCAN_CAP = 1_000
"""Failed done entries, deferred jobs and DLQ entries read at most, each (newest first)."""

# $1 kind, $2 queue (NULL: any), $3 rows per source; ``at``: when the job failed (as
# ``storage.read.failure_groups`` dates it). A failed done entry's kind is one index probe.
KIND_KEPT = f"""
SELECT * FROM (
SELECT k.job_id, k.at AS finalized_at, k.source, ({kept_output_of("k.errors")})::text AS output
  FROM ((SELECT d.job_id, d.finalized_at AS at, 'failed' AS source,
                COALESCE(d.payload, r.payload) -> 'errors' AS errors
           FROM (SELECT job_id, run_lease, finalized_at, payload FROM done_entries
                  WHERE state = 'failed' ORDER BY finalized_at DESC, job_id DESC LIMIT $3) d
          CROSS JOIN LATERAL (
                SELECT r.kind, r.queue, r.payload FROM ready_entries r
                 WHERE r.job_id = d.job_id AND r.run_lease = d.run_lease LIMIT 1) r
          WHERE r.kind = $1 AND ($2::text IS NULL OR r.queue = $2))
        UNION ALL
        (SELECT f.job_id, {RETRIED_AT}, 'retryable', f.payload -> 'errors'
           FROM (SELECT job_id, state, kind, queue, payload, attempted_at, run_at
                   FROM deferred_jobs ORDER BY job_id DESC LIMIT $3) f
          WHERE f.state = 'retryable' AND f.kind = $1 AND ($2::text IS NULL OR f.queue = $2))
        UNION ALL
        (SELECT q.job_id, q.dlq_at, 'dead_lettered', q.payload -> 'errors'
           FROM (SELECT job_id, kind, queue, dlq_at, payload FROM dlq_entries
                  ORDER BY dlq_at DESC LIMIT $3) q
          WHERE q.kind = $1 AND ($2::text IS NULL OR q.queue = $2))) k
) kept WHERE output IS NOT NULL
"""

DRIFT_WINDOW = (
    f"{LAST_GOOD_BOUND}, and the outputs kept by the newest {KEPT_SCAN_CAP:,} failed, "
    "deferred and dead-lettered jobs each"
)
"""What a drift read looked at, for a person."""

KEPT = "error entry"
"""The path of a failed attempt's kept output."""

UNDECODABLE = Violation(
    "$", "json", "is JSON this reader cannot decode (e.g. a number past 64 bits)"
)


Stored = tuple[datetime, int, str, str, str | None]
"""A stored output read: stored at, job id, its text, its path (compact, general or error
entry), and for a kept one where its job is now (failed, retryable, dead_lettered)."""


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
    kept_cap: int = KEPT_SCAN_CAP,
) -> Window:
    """The declared schema of ``kind`` and its outputs within ``DRIFT_WINDOW``, in one
    snapshot. A schema without output columns (v001) is refused: it keeps none to check.
    ``caps`` (compact jobs, done entries) and ``kept_cap`` (rows per failure source) are for
    tests of the bound."""
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
        kept = await conn.fetch(KIND_KEPT, kind, None, kept_cap)
    found: list[Stored] = [
        (r["finalized_at"], r["job_id"], r["output"], path, None)
        for rows, path in ((compact, "compact"), (general, "general"))
        for r in rows
    ]
    found += [(r["finalized_at"], r["job_id"], r["output"], KEPT, r["source"]) for r in kept]
    found.sort(key=lambda stored: (stored[0], stored[1]), reverse=True)
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
            window=DRIFT_WINDOW,
        )
    drifted = kept_drifted = 0
    listed: list[DriftedOutput] = []
    for n, (finalized_at, job_id, text, path, kept_by) in enumerate(window.outputs):
        if n and n % CHECK_CHUNK == 0:
            await asyncio.sleep(0)
        violations = _violations(text, window.schema)
        if not violations:
            continue
        drifted += 1
        kept_drifted += kept_by is not None
        if len(listed) < MAX_DRIFT_LISTED:
            listed.append(
                DriftedOutput(
                    job_id=job_id,
                    finalized_at=finalized_at,
                    storage_path=path,
                    violations=violations[:DRIFT_VIOLATIONS],
                    more=max(len(violations) - DRIFT_VIOLATIONS, 0),
                    kept_by=kept_by,
                )
            )
    return SchemaDrift(
        kind=window.kind,
        schema_declared=True,
        checked=len(window.outputs),
        drifted=drifted,
        outputs=listed,
        window=DRIFT_WINDOW,
        kept_checked=sum(stored[4] is not None for stored in window.outputs),
        kept_drifted=kept_drifted,
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
