"""Enqueue: immediate jobs go through their lane into ``ready_entries``; future ones wait in
``deferred_jobs`` until promotion.

Lane order is commit order: the lane row stays locked from reserving its sequence range until
the inserting transaction commits, so the claim cursor never passes a row that commits later.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage.db.pool import Conn
from storage.db.sql import READY_NOTICE, RESERVE_LANE_RANGE
from storage.insert import unique

# Reserve a range of lane sequence numbers (the lane row stays locked until commit), write
# one ready row per job in that range, and wake the queue's idle runtimes when this commits.
INSERT_READY = f"""
WITH {RESERVE_LANE_RANGE}
INSERT INTO ready_entries (slot, job_id, kind, queue, args, priority, attempt, run_lease,
                           max_attempts, lane_seq, run_at, created_at, payload)
SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), nextval('job_id_seq'),
       j.kind, $1, j.args, $2, 0, 1, j.max_attempts, lane.first_seq + j.ord - 1, now(), now(),
       j.payload
  FROM lane, woken,
       unnest($4::text[], $5::jsonb[], $6::int[], $7::jsonb[])
           WITH ORDINALITY AS j(kind, args, max_attempts, payload, ord)
 ORDER BY j.ord
RETURNING job_id, run_at, created_at
"""

INSERT_DEFERRED = """
INSERT INTO deferred_jobs (job_id, state, kind, queue, args, priority, attempt, run_lease,
                           max_attempts, run_at, created_at, payload)
SELECT nextval('job_id_seq'), 'scheduled', j.kind, j.queue, j.args, j.priority, 0, 1,
       j.max_attempts, j.run_at, now(), j.payload
  FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::smallint[], $5::int[],
              $6::timestamptz[], $7::jsonb[])
           WITH ORDINALITY AS j(kind, queue, args, priority, max_attempts, run_at, payload, ord)
 ORDER BY j.ord
RETURNING job_id, run_at, created_at
"""

# Promotion moves due deferred rows into their lanes: one statement, lanes locked until commit,
# each queue that got work woken once. Returns how many rows moved.
PROMOTE_DUE = f"""
WITH due AS (
    DELETE FROM deferred_jobs d
     WHERE d.job_id IN (SELECT job_id FROM deferred_jobs WHERE run_at <= now()
                         ORDER BY run_at, job_id LIMIT $1 FOR UPDATE SKIP LOCKED)
    RETURNING d.*
), numbered AS (
    SELECT due.*, row_number() OVER (PARTITION BY queue, priority ORDER BY run_at, job_id) AS n,
           count(*) OVER (PARTITION BY queue, priority) AS lane_count
      FROM due
), lanes AS (
    INSERT INTO queue_lanes AS l (queue, priority, next_seq)
    SELECT DISTINCT queue, priority, lane_count FROM numbered
    ON CONFLICT (queue, priority) DO UPDATE SET next_seq = l.next_seq + excluded.next_seq
    RETURNING l.queue, l.priority, l.next_seq
), moved AS (
    INSERT INTO ready_entries (slot, job_id, kind, queue, args, priority, attempt, run_lease,
                               max_attempts, lane_seq, run_at, attempted_at, created_at,
                               unique_key, payload)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), n.job_id, n.kind,
           n.queue, n.args, n.priority, n.attempt, n.run_lease, n.max_attempts,
           lanes.next_seq - n.lane_count + n.n - 1, n.run_at, n.attempted_at, n.created_at,
           n.unique_key, n.payload
      FROM numbered n JOIN lanes ON lanes.queue = n.queue AND lanes.priority = n.priority
    RETURNING queue
)
SELECT COALESCE(sum(q.n), 0)::int
  FROM (SELECT queue, count(*) AS n FROM moved GROUP BY queue) q,
       LATERAL (SELECT {READY_NOTICE.format(queue="q.queue")}) woken
"""


@dataclass(frozen=True)
class NewJob:
    """A job ready to be written: args already serialized to JSON text."""

    kind: str
    queue: str
    args_json: bytes
    priority: int
    max_attempts: int
    run_at: datetime | None
    payload: dict[str, Any] | None


@dataclass(frozen=True)
class KeyedJob(NewJob):
    """A job with a unique key (``storage.insert.unique``). Plain jobs stay ``NewJob``: a frozen
    dataclass pays for every field at construction, and they carry none of these."""

    unique_key: str
    unique_states: tuple[str, ...]  # see storage.insert.unique.resolve_states


def key_of(job: NewJob) -> str | None:
    return job.unique_key if isinstance(job, KeyedJob) else None


@dataclass(frozen=True)
class Inserted:
    """A written job, or (``duplicate``) the job that already held the key: only its id is
    meaningful then (the caller reads the holder; the times are the insert's ``now``)."""

    job_id: int
    scheduled: bool
    run_at: datetime
    created_at: datetime
    duplicate: bool = False


async def insert_jobs(conn: Conn, jobs: list[NewJob], *, now: datetime) -> list[Inserted]:
    """Insert jobs in one transaction; results come back in the order given.

    Keyed jobs take their keys first (``storage.insert.unique``); one whose key is held is not
    written and comes back as a duplicate of the holder.
    """
    results: dict[int, Inserted] = {}
    async with conn.transaction():
        ids: dict[int, int] = {}
        keyed = [(i, job) for i, job in enumerate(jobs) if isinstance(job, KeyedJob)]
        if keyed:
            requests = [unique.KeyRequest(j.kind, j.unique_key, j.unique_states) for _, j in keyed]
            outcomes = await unique.claim(conn, requests)
            for (i, _), outcome in zip(keyed, outcomes, strict=True):
                if outcome.duplicate:
                    results[i] = Inserted(outcome.job_id, False, now, now, duplicate=True)
                else:
                    ids[i] = outcome.job_id
        lanes: dict[tuple[str, int], list[int]] = {}
        deferred: list[int] = []
        for index, job in enumerate(jobs):
            if index in results:
                continue
            if job.run_at is not None and job.run_at > now:
                deferred.append(index)
            else:
                lanes.setdefault((job.queue, job.priority), []).append(index)
        # Lanes are locked in a fixed order so concurrent multi-lane inserts cannot deadlock.
        for (queue, priority), indexes in sorted(lanes.items()):
            args: list[Any] = [
                queue,
                priority,
                len(indexes),
                [jobs[i].kind for i in indexes],
                [jobs[i].args_json for i in indexes],
                [jobs[i].max_attempts for i in indexes],
                [jobs[i].payload for i in indexes],
            ]
            rows = await _write(
                conn, INSERT_READY, unique.INSERT_READY_KEYED, args, indexes, jobs, ids
            )
            for i, row in zip(indexes, rows, strict=True):
                results[i] = Inserted(row["job_id"], False, row["run_at"], row["created_at"])
        if deferred:
            args = [
                [jobs[i].kind for i in deferred],
                [jobs[i].queue for i in deferred],
                [jobs[i].args_json for i in deferred],
                [jobs[i].priority for i in deferred],
                [jobs[i].max_attempts for i in deferred],
                [jobs[i].run_at for i in deferred],
                [jobs[i].payload for i in deferred],
            ]
            rows = await _write(
                conn, INSERT_DEFERRED, unique.INSERT_DEFERRED_KEYED, args, deferred, jobs, ids
            )
            for i, row in zip(deferred, rows, strict=True):
                results[i] = Inserted(row["job_id"], True, row["run_at"], row["created_at"])
    return [results[i] for i in range(len(jobs))]


async def _write(
    conn: Conn,
    plain: str,
    keyed: str,
    args: list[Any],
    indexes: list[int],
    jobs: list[NewJob],
    ids: dict[int, int],
) -> list[Any]:
    """Plain jobs take the plain statement, unchanged; a group with a keyed job takes the
    keyed twin, which writes the ids its keys drew and the keys."""
    if not any(i in ids for i in indexes):
        return await conn.fetch(plain, *args)
    keys = [key_of(jobs[i]) for i in indexes]
    return await conn.fetch(keyed, *args, [ids.get(i) for i in indexes], keys)


async def promote_due(conn: Conn, *, limit: int = 5000) -> int:
    """Move due scheduled and retryable jobs into their lanes. Returns how many moved."""
    moved: int = await conn.fetchval(PROMOTE_DUE, limit)
    return moved
