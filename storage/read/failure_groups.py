"""Failure groups: failed, retryable and dead-lettered jobs grouped by kind and error signature.

A job's signature comes from its latest error entry: the error's class (the ``Name:`` prefix
the runtime writes) plus its message with the parts that differ between occurrences of one
cause replaced, in this order: quoted values (``'...'`` and ``"..."``) by ``<str>``, UUIDs by
``<uuid>``, hex values (``0x...``, or words of 8 or more hex digits with a digit in them) by
``<hex>``, and every other run of digits (ids, counts, ports, tenant numbers) by ``<n>``.
``ConnectionError: smtp refused for tenant 7`` and ``... tenant 12`` share the signature
``ConnectionError: smtp refused for tenant <n>``. The ``(max attempts N exhausted)`` suffix
of a last attempt is dropped first. The rule lives in one SQL expression
(``SIGNATURE``), used both to group and to find a group's members, so they always agree.

Bounded: each of the three sources is read newest first up to ``SCAN_CAP`` jobs (after the
filters); when a source had more, counts are lower bounds (``FailureGroup.capped``).
Listing a group's members for a bulk action is exact, like ``Client.count_matching``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from storage.db.pool import Conn
from storage.values.models import FailureGroup

SCAN_CAP = 2_000
"""Jobs read per source (failed, retryable, dead-lettered) for one grouping."""

RETRIED_AT = (
    "COALESCE((f.payload -> 'errors' -> -1 ->> 'at')::timestamptz, f.attempted_at, f.run_at)"
)
"""When the retryable deferred job ``f`` failed last (its latest error entry's time)."""


def kept_output_of(errors: str) -> str:
    """The output the error entries ``errors`` (an SQL jsonb array) kept: the latest entry's
    that recorded one (only one does, ``storage.finalize``); NULL when none did."""
    return f"jsonb_path_query_array({errors}, '$[*].output') -> -1"


# $1 since, $2 kind, $3 queue, $4 rows per source. Each source yields the job, where it is,
# when it failed and its error entries (the latest one signs it; any may have kept an output).
_FAILURES = """
failures AS (
    (SELECT d.job_id, r.kind, r.queue, 'failed' AS source, d.finalized_at AS at,
            COALESCE(d.payload, r.payload) -> 'errors' AS errors
       FROM done_entries d
      CROSS JOIN LATERAL (  -- one index probe per row; a join hashed every ready row
            SELECT r.kind, r.queue, r.payload FROM ready_entries r
             WHERE r.job_id = d.job_id AND r.run_lease = d.run_lease LIMIT 1) r
      WHERE d.state = 'failed' AND ($1::timestamptz IS NULL OR d.finalized_at >= $1)
        AND ($2::text IS NULL OR r.kind = $2) AND ($3::text IS NULL OR r.queue = $3)
      ORDER BY d.job_id DESC LIMIT $4)
    UNION ALL
    (SELECT f.job_id, f.kind, f.queue, 'retryable', %(retried_at)s, f.payload -> 'errors'
       FROM deferred_jobs f
      WHERE f.state = 'retryable'
        AND ($1::timestamptz IS NULL
             OR COALESCE((f.payload -> 'errors' -> -1 ->> 'at')::timestamptz, f.run_at) >= $1)
        AND ($2::text IS NULL OR f.kind = $2) AND ($3::text IS NULL OR f.queue = $3)
      ORDER BY f.job_id DESC LIMIT $4)
    UNION ALL
    (SELECT q.job_id, q.kind, q.queue, 'dead_lettered', q.dlq_at, q.payload -> 'errors'
       FROM dlq_entries q
      WHERE ($1::timestamptz IS NULL OR q.dlq_at >= $1)
        AND ($2::text IS NULL OR q.kind = $2) AND ($3::text IS NULL OR q.queue = $3)
      ORDER BY q.job_id DESC LIMIT $4)
), texts AS (
    -- first_at: the job's first recorded failure, which a retry keeps (it resets ``at``)
    SELECT failures.*, left(COALESCE(errors -> -1 ->> 'error', ''), 500) AS error,
           COALESCE((errors -> 0 ->> 'at')::timestamptz, at) AS first_at
      FROM failures
), signatures AS (
    -- Each distinct error text is normalised once: the regular expressions cost far more
    -- than the rest of the read, and failures of one cause often repeat their text.
    SELECT e.error, %(signature)s AS signature FROM (SELECT DISTINCT error FROM texts) e
), signed AS (
    SELECT t.*, s.signature, COALESCE(t.errors @? '$[*].output', false) AS kept
      FROM texts t JOIN signatures s USING (error)
)"""

# The normalised error text ``e.error`` (see the module docstring), cut at 500 characters,
# and the suffix the runtime adds to a last attempt's error (storage.transitions) is dropped, so
# an attempt that will be retried and the one that exhausted the job share their signature.
SIGNATURE = r"""
regexp_replace(regexp_replace(regexp_replace(regexp_replace(regexp_replace(
    e.error,
    ' \(max attempts [0-9]+ exhausted\)$', ''),
    '"[^"]*"|''[^'']*''', '<str>', 'g'),
    '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<uuid>', 'g'),
    '\m0x[0-9a-fA-F]+\M|\m(?=[a-fA-F]*[0-9])[0-9a-fA-F]{8,}\M', '<hex>', 'g'),
    '[0-9]+', '<n>', 'g')"""

SIGNED = _FAILURES % {"signature": SIGNATURE, "retried_at": RETRIED_AT}

CAPPED = """(SELECT count(*) FILTER (WHERE source = 'failed') >= $4
            OR count(*) FILTER (WHERE source = 'retryable') >= $4
            OR count(*) FILTER (WHERE source = 'dead_lettered') >= $4 FROM signed)"""
"""Whether a source filled its $4 rows: the counts read from ``SIGNED`` are lower bounds."""

GROUPS = f"""
WITH {SIGNED}
SELECT kind, signature, count(*) AS n,
       count(*) FILTER (WHERE source = 'failed') AS failed,
       count(*) FILTER (WHERE source = 'retryable') AS retryable,
       count(*) FILTER (WHERE source = 'dead_lettered') AS dead_lettered,
       min(first_at) AS first_seen, max(at) AS last_seen, max(job_id) AS sample_job_id,
       (array_agg(error ORDER BY job_id DESC))[1] AS sample_error,
       bool_or(kept) AS kept_output,
       array_agg(DISTINCT queue ORDER BY queue) AS queues,
       {CAPPED} AS capped
  FROM signed
 GROUP BY kind, signature
 ORDER BY n DESC, last_seen DESC, kind, signature
 LIMIT $5
"""

MEMBERS = f"""
WITH {SIGNED}
SELECT job_id, source FROM signed WHERE kind = $5 AND signature = $6 ORDER BY job_id DESC
"""

NO_CAP = 2**62


@dataclass(frozen=True)
class FailureGroupMembers:
    """A group's jobs by where they are, newest first: what each bulk action can touch."""

    failed: list[int]
    retryable: list[int]
    dead_lettered: list[int]

    @property
    def total(self) -> int:
        return len(self.failed) + len(self.retryable) + len(self.dead_lettered)


async def failure_groups(
    conn: Conn,
    *,
    since: datetime | None,
    kind: str | None,
    queue: str | None,
    limit: int,
) -> list[FailureGroup]:
    """The largest ``limit`` groups, biggest first."""
    rows = await conn.fetch(GROUPS, since, kind, queue, SCAN_CAP, limit)
    return [
        FailureGroup(
            kind=r["kind"],
            signature=r["signature"],
            count=r["n"],
            failed=r["failed"],
            retryable=r["retryable"],
            dead_lettered=r["dead_lettered"],
            first_seen=r["first_seen"],
            last_seen=r["last_seen"],
            sample_job_id=r["sample_job_id"],
            sample_error=r["sample_error"],
            kept_output=bool(r["kept_output"]),
            queues=list(r["queues"]),
            capped=bool(r["capped"]),
        )
        for r in rows
    ]


async def group_members(
    conn: Conn,
    kind: str,
    signature: str,
    *,
    since: datetime | None,
    queue: str | None,
) -> FailureGroupMembers:
    """Every job of one group (no scan cap), read in one statement."""
    rows = await conn.fetch(MEMBERS, since, kind, queue, NO_CAP, kind, signature)
    by_source: dict[str, list[int]] = {"failed": [], "retryable": [], "dead_lettered": []}
    for r in rows:
        by_source[r["source"]].append(r["job_id"])
    return FailureGroupMembers(**by_source)
