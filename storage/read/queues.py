"""Queues: pause and resume, and one summary per queue for the on-call view.

A pause is a flag on the queue's ``queue_settings`` row (migration v004). The claim
(``storage.runtime.claim``) passes over the lanes of a paused queue, so every runtime on the schema
stops taking its jobs at its next claim, within one poll interval; attempts already claimed
run to their end and inserts still land. Resume clears the flag and wakes the runtimes that
serve the queue (``storage.insert.enqueue.resume_queue``).

A summary must stay cheap on a long history, so it never counts terminal jobs: it reads the
live states (bounded by the work in flight; the available count stops at ``COUNT_CAP`` per
lane, as the tab counts do) and the last hour of completions by time through the
``finalized_at`` indexes: at most ``BATCH_SCAN_CAP`` compact completion batch rows (one per
flushed group of jobs) and at most ``DONE_SCAN_CAP`` general-path done entries, newest first.
When the hour holds more than that, the hour's numbers are lower bounds and
``QueueSummary.exact_since`` says from when on they are exact.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import asyncpg

from storage.db.pool import Conn
from storage.db.sql import OPEN_ATTEMPTS
from storage.read.counting import COUNT_CAP
from storage.values.errors import SchemaNotMigrated
from storage.values.models import JobState, QueueSummary

MINUTES = 60
"""The throughput window: completions per minute over the last hour."""
DONE_SCAN_CAP = 2_000
"""General-path done entries read for one summary (newest first)."""
BATCH_SCAN_CAP = 5_000
"""Compact completion batch rows read for one summary (newest first; each holds many jobs)."""

SET_PAUSED = """
INSERT INTO queue_settings (queue, paused, paused_at)
VALUES ($1, $2, CASE WHEN $2 THEN now() END)
ON CONFLICT (queue) DO UPDATE
   SET paused = excluded.paused,
       paused_at = CASE WHEN excluded.paused THEN COALESCE(queue_settings.paused_at, now()) END
"""

# to_jsonb: a schema v004 has not reached yet reads as "nothing paused" (see storage.runtime.claim).
SETTINGS = """
SELECT queue, COALESCE((to_jsonb(qs) ->> 'paused')::boolean, false) AS paused,
       (to_jsonb(qs) ->> 'paused_at')::timestamptz AS paused_at
  FROM queue_settings qs
"""

# Per lane: unclaimed live rows (at most $1 read) and the oldest one's run_at.
LANES = """
SELECT l.queue, COALESCE(sum(n.n), 0)::bigint AS available,
       bool_or(n.n >= $1) AS capped, min(o.run_at) AS oldest
  FROM queue_lanes l
 CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM (
            SELECT 1 FROM ready_entries r
             WHERE r.queue = l.queue AND r.priority = l.priority AND r.lane_seq >= l.claim_seq
               AND NOT EXISTS (SELECT 1 FROM ready_tombstones t
                                WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)
             ORDER BY r.lane_seq LIMIT $1) x) n  -- in lane order: the index, never a scan
  LEFT JOIN LATERAL (
        SELECT r.run_at FROM ready_entries r
         WHERE r.queue = l.queue AND r.priority = l.priority AND r.lane_seq >= l.claim_seq
           AND NOT EXISTS (SELECT 1 FROM ready_tombstones t
                            WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)
         ORDER BY r.lane_seq LIMIT 1) o ON true
 GROUP BY l.queue
"""

DEFERRED = "SELECT queue, state, count(*) AS n FROM deferred_jobs GROUP BY queue, state"

OPEN = f"""
WITH {OPEN_ATTEMPTS}
SELECT r.queue, COALESCE(s.state, 'running') AS state, count(*) AS n
  FROM open o
  JOIN ready_entries r ON r.job_id = o.job_id AND r.run_lease = o.run_lease
  LEFT JOIN attempt_state s ON s.job_id = o.job_id AND s.run_lease = o.run_lease
 GROUP BY 1, 2
"""

# Completed and failed per queue and minute (0 = the current minute) over the last hour: the
# newest $2 compact batch rows (an index-only scan: the index carries queue and count), the
# newest $1 general-path done entries, and dead-lettered jobs. The last row (queue NULL) says
# from when on the counts are exact: the oldest row read of a source that stopped at its cap.
RECENT = """
WITH done AS MATERIALIZED (
    SELECT d.job_id, d.run_lease, d.state, d.finalized_at FROM done_entries d
     WHERE d.finalized_at >= now() - interval '1 hour' AND d.state <> 'cancelled'
     ORDER BY d.finalized_at DESC
     LIMIT $1
), batches AS MATERIALIZED (
    SELECT b.queue, b.finalized_at, b.completed_count FROM receipt_completion_batches b
     WHERE b.finalized_at >= now() - interval '1 hour'
     ORDER BY b.finalized_at DESC
     LIMIT $2
), events AS (
    SELECT b.queue, 'completed' AS state, b.finalized_at AS at, b.completed_count AS n
      FROM batches b
    UNION ALL
    SELECT r.queue, d.state, d.finalized_at, 1
      FROM done d
     CROSS JOIN LATERAL (  -- one index probe per row; a join hashed every ready row
            SELECT r.queue FROM ready_entries r
             WHERE r.job_id = d.job_id AND r.run_lease = d.run_lease LIMIT 1) r
    UNION ALL
    SELECT q.queue, 'failed', q.dlq_at, 1 FROM dlq_entries q
     WHERE q.dlq_at >= now() - interval '1 hour'
)
SELECT queue, state,
       LEAST(59, GREATEST(0, floor(extract(epoch FROM now() - at) / 60)))::int AS minute,
       sum(n)::bigint AS n, NULL::timestamptz AS oldest
  FROM events GROUP BY 1, 2, 3
UNION ALL
SELECT NULL, NULL, NULL, NULL,
       GREATEST((SELECT min(finalized_at) FROM done HAVING count(*) >= $1),
                (SELECT min(finalized_at) FROM batches HAVING count(*) >= $2))
"""


async def set_paused(conn: Conn, queue: str, paused: bool) -> None:
    """Pause or resume ``queue``; refuses on a schema that migration v004 has not reached."""
    try:
        await conn.execute(SET_PAUSED, queue, paused)
    except asyncpg.UndefinedColumnError as exc:
        raise SchemaNotMigrated(
            "This schema cannot pause queues yet: run `awa-tui migrate` (v004 adds the pause)."
        ) from exc


async def list_queues(conn: Conn) -> list[QueueSummary]:
    """One summary per queue that has lanes, settings or deferred jobs, sorted by name.

    Call inside one snapshot (``Client.list_queues`` does) so the parts agree."""
    now: datetime = await conn.fetchval("SELECT now()")
    found: dict[str, dict[str, Any]] = {}

    def entry(queue: str) -> dict[str, Any]:
        return found.setdefault(
            queue,
            {
                "queue": queue,
                "counts": dict.fromkeys(_LIVE, 0),
                "capped": set(),
                "completions_per_minute": [0] * MINUTES,
                "failures_per_minute": [0] * MINUTES,
            },
        )

    for r in await conn.fetch(SETTINGS):
        entry(r["queue"]).update(paused=r["paused"], paused_at=r["paused_at"])
    for r in await conn.fetch(LANES, COUNT_CAP):
        e = entry(r["queue"])
        e["counts"][JobState.AVAILABLE] = int(r["available"])
        if r["capped"]:
            e["capped"].add(JobState.AVAILABLE)
        e["oldest_available_at"] = r["oldest"]
    for r in await conn.fetch(DEFERRED):
        entry(r["queue"])["counts"][JobState(r["state"])] = int(r["n"])
    for r in await conn.fetch(OPEN):
        entry(r["queue"])["counts"][JobState(r["state"])] = int(r["n"])
    exact_since = now - timedelta(minutes=MINUTES)
    for r in await conn.fetch(RECENT, DONE_SCAN_CAP, BATCH_SCAN_CAP):
        if r["queue"] is None:
            if r["oldest"] is not None:  # a source stopped at its cap
                exact_since = r["oldest"]
            continue
        series = "completions_per_minute" if r["state"] == "completed" else "failures_per_minute"
        entry(r["queue"])[series][MINUTES - 1 - r["minute"]] += int(r["n"])
    return [
        QueueSummary(
            queue=e["queue"],
            paused=e.get("paused", False),
            paused_at=e.get("paused_at"),
            counts=e["counts"],
            capped=frozenset(e["capped"]),
            oldest_available_at=e.get("oldest_available_at"),
            completions_per_minute=e["completions_per_minute"],
            failures_per_minute=e["failures_per_minute"],
            exact_since=exact_since,
            read_at=now,
        )
        for _, e in sorted(found.items())
    ]


_LIVE = (
    JobState.AVAILABLE,
    JobState.SCHEDULED,
    JobState.RETRYABLE,
    JobState.RUNNING,
    JobState.WAITING_EXTERNAL,
)
