"""Queues: pause and resume, and one summary per queue for the on-call view.

A pause is a flag on the queue's ``queue_settings`` row (migration v004). The claim
(``storage.runtime.claim``) passes over the lanes of a paused queue, so every runtime on the schema
stops taking its jobs at its next claim, within one poll interval; attempts already claimed
run to their end and inserts still land. Resume clears the flag and wakes the runtimes that
serve the queue (``storage.insert.enqueue.resume_queue``).

The summaries are one statement (one snapshot, one round trip: the Queues screen, ``GET
/api/queues`` and every ``/metrics`` scrape read them), and it must stay cheap on a long
history and a deep backlog, so it never counts terminal jobs and reads at most a cap of rows
for each count: per lane, the available jobs among the first ``COUNT_CAP`` sequence numbers
after its claim cursor (lane sequences are dense, ``storage.runtime.claim``, so a longer lane
holds at least that many and is ``capped``); per queue and deferred state, at most
``COUNT_CAP + 1`` entries of the ``(queue, state)`` index (v011). The last hour of completions
is read by time through the ``finalized_at`` indexes: at most ``BATCH_SCAN_CAP`` compact
completion batch rows (one per flushed group of jobs) and at most ``DONE_SCAN_CAP``
general-path done entries, newest first. When the hour holds more than that, the hour's
numbers are lower bounds and ``QueueSummary.exact_since`` says from when on they are exact.
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

# One row per fact, tagged by ``part``: $1 the count cap, $2 general-path done entries and $3
# compact batch rows read for the hour. Columns: part, queue, state, n, minute, flag, at.
# - settings: paused (flag) and paused_at (at); to_jsonb, so a schema v004 has not reached
#   yet reads as "nothing paused" (see storage.runtime.claim).
# - lane: per lane, the live rows among its first $1 sequence numbers after the claim cursor
#   (both ends of the range written, so each lane is one narrow index range, as
#   ``storage.db.sql.UNCLAIMED_READY`` says), capped (flag) when the lane is longer, and the
#   oldest live row's run_at (at). The rows are counted from the index alone (an index-only
#   scan: 10,000 entries cost a fraction of 10,000 rows read with a tombstone probe each), less
#   the tombstoned ones in the range (``dead``: each tombstone's entry found by its index).
# - deferred: per queue holding deferred jobs (a skip scan of the (queue, state) index) and
#   state, at most $1 + 1 entries counted.
# - open: running and waiting jobs per queue, from the open attempts (bounded by work in
#   flight).
# - recent: completed and failed per queue and minute (0 = the current minute) over the last
#   hour: the newest $3 compact batch rows (an index-only scan: the index carries queue and
#   count), the newest $2 general-path done entries, and dead-lettered jobs.
# - read: the read's now() (at), and from when on the hour's counts are exact (exact): the
#   oldest row read of a source that stopped at its cap, NULL when none did.
SUMMARIES = f"""
WITH RECURSIVE {OPEN_ATTEMPTS},
done AS MATERIALIZED (
    SELECT d.job_id, d.run_lease, d.state, d.finalized_at FROM done_entries d
     WHERE d.finalized_at >= now() - interval '1 hour' AND d.state <> 'cancelled'
     ORDER BY d.finalized_at DESC
     LIMIT $2
), batches AS MATERIALIZED (
    SELECT b.queue, b.finalized_at, b.completed_count FROM receipt_completion_batches b
     WHERE b.finalized_at >= now() - interval '1 hour'
     ORDER BY b.finalized_at DESC
     LIMIT $3
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
), dead AS MATERIALIZED (
    SELECT r.queue, r.priority, r.lane_seq
      FROM ready_tombstones t
     CROSS JOIN LATERAL (  -- one index probe per tombstone; a join hashed every ready row
            SELECT r.queue, r.priority, r.lane_seq FROM ready_entries r
             WHERE r.job_id = t.job_id AND r.run_lease = t.run_lease LIMIT 1) r
), deferred_queues AS (
    (SELECT d.queue FROM deferred_jobs d ORDER BY d.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT d.queue FROM deferred_jobs d WHERE d.queue > q.queue
             ORDER BY d.queue LIMIT 1)
      FROM deferred_queues q WHERE q.queue IS NOT NULL
)
SELECT 'settings'::text AS part, qs.queue, NULL::text AS state, NULL::bigint AS n,
       NULL::int AS minute, COALESCE((to_jsonb(qs) ->> 'paused')::boolean, false) AS flag,
       (to_jsonb(qs) ->> 'paused_at')::timestamptz AS at
  FROM queue_settings qs
UNION ALL
SELECT 'lane', l.queue, NULL, w.n - dead.n, NULL, l.next_seq - l.claim_seq > $1, o.run_at
  FROM queue_lanes l
 CROSS JOIN LATERAL (  -- counted from the index alone, tombstones or not
        SELECT count(*) AS n FROM ready_entries r
         WHERE r.queue = l.queue AND r.priority = l.priority
           AND r.lane_seq >= l.claim_seq AND r.lane_seq < LEAST(l.next_seq, l.claim_seq + $1)) w
 CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM dead d
         WHERE d.queue = l.queue AND d.priority = l.priority
           AND d.lane_seq >= l.claim_seq AND d.lane_seq < LEAST(l.next_seq, l.claim_seq + $1)) dead
  LEFT JOIN LATERAL (
        SELECT r.run_at FROM ready_entries r
         WHERE r.queue = l.queue AND r.priority = l.priority
           AND r.lane_seq >= l.claim_seq AND r.lane_seq < l.next_seq
           AND NOT EXISTS (SELECT 1 FROM ready_tombstones t
                            WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)
         ORDER BY r.lane_seq LIMIT 1) o ON true
UNION ALL
SELECT 'deferred', q.queue, s.state, c.n, NULL, NULL, NULL
  FROM deferred_queues q
 CROSS JOIN (VALUES ('scheduled'), ('retryable')) s(state)
 CROSS JOIN LATERAL (
        SELECT count(*) AS n FROM (
            SELECT 1 FROM deferred_jobs d WHERE d.queue = q.queue AND d.state = s.state
             LIMIT $1 + 1) x) c
 WHERE q.queue IS NOT NULL AND c.n > 0
UNION ALL
SELECT 'open', r.queue, COALESCE(s.state, 'running'), count(*), NULL, NULL, NULL
  FROM open o
 CROSS JOIN LATERAL (  -- one index probe per open attempt, never a hash of every ready row
        SELECT r.queue FROM ready_entries r
         WHERE r.job_id = o.job_id AND r.run_lease = o.run_lease LIMIT 1) r
  LEFT JOIN attempt_state s ON s.job_id = o.job_id AND s.run_lease = o.run_lease
 GROUP BY 2, 3
UNION ALL
SELECT 'recent', queue, state,
       sum(n)::bigint, LEAST(59, GREATEST(0, floor(extract(epoch FROM now() - at) / 60)))::int,
       NULL, NULL
  FROM events GROUP BY 2, 3, 5
UNION ALL
SELECT 'read', NULL, NULL, NULL, NULL, NULL, now()
UNION ALL
SELECT 'exact', NULL, NULL, NULL, NULL, NULL,
       GREATEST((SELECT min(finalized_at) FROM done HAVING count(*) >= $2),
                (SELECT min(finalized_at) FROM batches HAVING count(*) >= $3))
"""


async def set_paused(conn: Conn, queue: str, paused: bool) -> None:
    """Pause or resume ``queue``; refuses on a schema that migration v004 has not reached."""
    try:
        await conn.execute(SET_PAUSED, queue, paused)
    except asyncpg.UndefinedColumnError as exc:
        raise SchemaNotMigrated(
            "This schema cannot pause queues yet: run `awa-tui migrate` (v004 adds the pause)."
        ) from exc


async def list_queues(
    conn: Conn,
    *,
    cap: int = COUNT_CAP,
    done_cap: int = DONE_SCAN_CAP,
    batch_cap: int = BATCH_SCAN_CAP,
) -> list[QueueSummary]:
    """One summary per queue that has lanes, settings or deferred jobs, sorted by name: one
    statement, so one snapshot. ``cap`` bounds each count; ``done_cap`` and ``batch_cap`` the
    hour's history read (lower them only to test what happens past them)."""
    rows = await conn.fetch(SUMMARIES, cap, done_cap, batch_cap)
    found: dict[str, dict[str, Any]] = {}
    now: datetime | None = None
    exact_at: datetime | None = None

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

    for r in rows:
        part = r["part"]
        if part == "read":
            now = r["at"]
        elif part == "exact":
            exact_at = r["at"]
        elif part == "settings":
            entry(r["queue"]).update(paused=r["flag"], paused_at=r["at"])
        elif part == "lane":
            _add_lane(entry(r["queue"]), r)
        elif part == "recent":
            done = r["state"] == "completed"
            series = "completions_per_minute" if done else "failures_per_minute"
            entry(r["queue"])[series][MINUTES - 1 - r["minute"]] += int(r["n"])
        else:  # deferred (at most cap + 1 read), open: one count per queue and state
            state, n = JobState(r["state"]), int(r["n"])
            e = entry(r["queue"])
            e["counts"][state] = min(n, cap) if part == "deferred" else n
            if part == "deferred" and n > cap:
                e["capped"].add(state)
    assert now is not None
    exact_since = exact_at or now - timedelta(minutes=MINUTES)
    return [_summary(e, exact_since, now) for _, e in sorted(found.items())]


def _add_lane(e: dict[str, Any], r: asyncpg.Record) -> None:
    """A queue's lanes (one per priority) add up; its oldest available job is the oldest of
    theirs."""
    e["counts"][JobState.AVAILABLE] += int(r["n"])
    if r["flag"]:
        e["capped"].add(JobState.AVAILABLE)
    oldest = e.get("oldest_available_at")
    if r["at"] is not None and (oldest is None or r["at"] < oldest):
        e["oldest_available_at"] = r["at"]


def _summary(e: dict[str, Any], exact_since: datetime, now: datetime) -> QueueSummary:
    return QueueSummary(
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


_LIVE = (
    JobState.AVAILABLE,
    JobState.SCHEDULED,
    JobState.RETRYABLE,
    JobState.RUNNING,
    JobState.WAITING_EXTERNAL,
)
