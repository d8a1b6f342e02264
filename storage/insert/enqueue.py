"""Every way a job becomes ready, and the notice that wakes the runtimes serving its queue.

Immediate jobs go through their lane into ``ready_entries``; future ones wait in
``deferred_jobs`` until promotion. Each statement here that makes a job claimable (an insert,
a keyed insert, a COPY chunk's lane range, a promotion, a requeue at attempt 0, a queue's
resume) also sends ``READY_NOTICE`` for its queue, delivered when it commits: an idle runtime
claims at once, and its poll is only the fallback for a notice lost with its listener.

Lane order is commit order: the lane row stays locked from reserving its sequence range until
the inserting transaction commits, so the claim cursor never passes a row that commits later.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import asyncpg

from storage.db.pool import Conn
from storage.db.sql import READY_NOTICE, RESERVE_LANE_RANGE, with_or_without
from storage.insert import unique
from storage.read.queues import SET_PAUSED

# Reserve a range of lane sequence numbers (the lane row stays locked until commit), write
# one ready row per job in that range, and wake the queue's idle runtimes when this commits.
# Keyed (``[True]``): a job id drawn by ``unique.CLAIM`` (NULL: draw one now, for the plain jobs
# of a mixed batch) and the key are written with the row.
_KEYS = {
    "key_column": ("unique_key, ", ""),
    "job_id": ("COALESCE(j.job_id, nextval('job_id_seq'))", "nextval('job_id_seq')"),
    "key_value": ("j.unique_key, ", ""),
    "key_arrays": (", $8::bigint[], $9::text[]", ""),
    "key_names": ("job_id, unique_key, ", ""),
}
INSERT_READY_SQL = with_or_without(
    f"""
WITH {RESERVE_LANE_RANGE}
INSERT INTO ready_entries (slot, job_id, kind, queue, args, priority, attempt, run_lease,
                           max_attempts, lane_seq, run_at, created_at, %(key_column)spayload)
SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), %(job_id)s,
       j.kind, $1, j.args, $2, 0, 1, j.max_attempts, lane.first_seq + j.ord - 1, now(), now(),
       %(key_value)sj.payload
  FROM lane, woken,
       unnest($4::text[], $5::jsonb[], $6::int[], $7::jsonb[]%(key_arrays)s)
           WITH ORDINALITY AS j(kind, args, max_attempts, payload, %(key_names)sord)
 ORDER BY j.ord
RETURNING job_id, run_at, created_at
""",
    **_KEYS,
)

INSERT_DEFERRED_SQL = with_or_without(
    """
INSERT INTO deferred_jobs (job_id, state, kind, queue, args, priority, attempt, run_lease,
                           max_attempts, run_at, created_at, %(key_column)spayload)
SELECT %(job_id)s, 'scheduled', j.kind, j.queue, j.args, j.priority, 0, 1,
       j.max_attempts, j.run_at, now(), %(key_value)sj.payload
  FROM unnest($1::text[], $2::text[], $3::jsonb[], $4::smallint[], $5::int[],
              $6::timestamptz[], $7::jsonb[]%(key_arrays)s)
           WITH ORDINALITY AS j(%(columns)s)
 ORDER BY j.ord
RETURNING job_id, run_at, created_at
""",
    **{name: _KEYS[name] for name in ("key_column", "job_id", "key_value", "key_arrays")},
    columns=(
        "kind, queue, args, priority, max_attempts, run_at, payload,\n"
        "                                job_id, unique_key, ord",
        "kind, queue, args, priority, max_attempts, run_at, payload, ord",
    ),
)

# A ready chunk of ``insert_many`` (``storage.insert.copy``): its lane range, ids, slot and
# time, taken with the lane locked (as the enqueue takes them, so ids and lane sequences rise
# together within a lane); the rows follow by COPY in the same transaction.
RESERVE_READY_CHUNK = f"""
WITH {RESERVE_LANE_RANGE}
SELECT ARRAY(SELECT nextval('job_id_seq') FROM generate_series(1, $3)) AS ids, lane.first_seq,
       (SELECT current_slot FROM ring_state WHERE ring = 'queue') AS slot,
       now() AS at, now()::text AS at_text
  FROM lane, woken
"""
# The per-job columns first, then those a chunk shares (written once, repeated per line).
READY_COPY_COLUMNS = (
    "job_id", "lane_seq", "kind", "args", "slot", "queue", "priority", "attempt", "run_lease",
    "max_attempts", "run_at", "created_at", "payload",
)  # fmt: skip

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

# Requeue at attempt 0: the job's next readiness goes straight into its lane (same id, a new
# run lease, errors kept), and its queue is woken. ``src``, the CTE each requeue below begins
# with, yields the job's row with what it carries on: ``attempted_at`` and the payload
# (``carried``). An empty ``src`` (the job moved on) writes nothing, not even the lane.
REQUEUE = f"""
, lane AS (
    INSERT INTO queue_lanes AS l (queue, priority, next_seq)
    SELECT queue, priority, 1 FROM src
    ON CONFLICT (queue, priority) DO UPDATE SET next_seq = l.next_seq + 1
    RETURNING l.next_seq - 1 AS seq
), woken AS (
    SELECT {READY_NOTICE.format(queue="src.queue")} FROM src
)
INSERT INTO ready_entries (slot, job_id, kind, queue, args, priority, attempt, run_lease,
                           max_attempts, lane_seq, run_at, attempted_at, created_at, unique_key,
                           payload)
SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), src.job_id, src.kind,
       src.queue, src.args, src.priority, 0, src.run_lease + 1, src.max_attempts, lane.seq, now(),
       src.attempted_at, src.created_at, src.unique_key, src.carried
  FROM src, lane, woken
"""
# An operator retry of a failed or cancelled job ($1, run lease $2); the progress is dropped.
# $3, when not NULL, is the JSON text of new args (an edit-and-retry), as in REQUEUE_DLQ.
REQUEUE_DONE = f"""
WITH gone AS (
    DELETE FROM done_entries
     WHERE job_id = $1 AND run_lease = $2 AND state IN ('failed', 'cancelled')
    RETURNING job_id, run_lease, payload
), src AS (
    SELECT r.job_id, r.kind, r.queue, COALESCE($3::text::jsonb, r.args) AS args, r.priority,
           r.run_lease, r.max_attempts,
           NULL::timestamptz AS attempted_at, r.created_at, r.unique_key,
           COALESCE(g.payload, r.payload) - 'progress' AS carried
      FROM ready_entries r JOIN gone g USING (job_id, run_lease)
){REQUEUE}"""
# A dead-lettered job ($1) back to its queue; the progress is dropped.
REQUEUE_DLQ = f"""
WITH gone AS (
    DELETE FROM dlq_entries WHERE job_id = $1 RETURNING *
), src AS (
    SELECT job_id, kind, queue, COALESCE($2::text::jsonb, args) AS args, priority,
           original_run_lease AS run_lease, max_attempts,
           NULL::timestamptz AS attempted_at, created_at, unique_key,
           payload - 'progress' AS carried
      FROM gone
){REQUEUE}"""
# ``retry_external``: the waiting attempt ($1, run lease $2), closed by the caller, runs again
# from scratch (Awa's semantics); attempted_at $3 and payload $4 as the caller computed them.
REQUEUE_WAITING = f"""
WITH src AS (
    SELECT job_id, kind, queue, args, priority, run_lease, max_attempts,
           $3::timestamptz AS attempted_at, created_at, unique_key, $4::jsonb AS carried
      FROM ready_entries WHERE job_id = $1 AND run_lease = $2
){REQUEUE}"""

# A paused queue's jobs become claimable again: the flag cleared (``storage.read.queues``'s
# statement, with $2 false) and the queue woken.
RESUME_QUEUE = f"""
WITH resumed AS (
{SET_PAUSED.strip()}
RETURNING queue
)
SELECT {READY_NOTICE.format(queue="resumed.queue")} FROM resumed
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
            rows = await _write(conn, INSERT_READY_SQL, args, indexes, jobs, ids)
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
            rows = await _write(conn, INSERT_DEFERRED_SQL, args, deferred, jobs, ids)
            for i, row in zip(deferred, rows, strict=True):
                results[i] = Inserted(row["job_id"], True, row["run_at"], row["created_at"])
    return [results[i] for i in range(len(jobs))]


async def _write(
    conn: Conn,
    statement: Mapping[bool, str],
    args: list[Any],
    indexes: list[int],
    jobs: list[NewJob],
    ids: dict[int, int],
) -> list[Any]:
    """Plain jobs take the statement without keys; a group with a keyed job takes it with
    them, writing the ids its keys drew and the keys."""
    if not any(i in ids for i in indexes):
        return await conn.fetch(statement[False], *args)
    keys = [key_of(jobs[i]) for i in indexes]
    return await conn.fetch(statement[True], *args, [ids.get(i) for i in indexes], keys)


async def promote_due(conn: Conn, *, limit: int = 5000) -> int:
    """Move due scheduled and retryable jobs into their lanes. Returns how many moved."""
    moved: int = await conn.fetchval(PROMOTE_DUE, limit)
    return moved


async def copy_ready(
    conn: Conn, queue: str, priority: int, count: int, lines: Callable[[asyncpg.Record], bytes]
) -> asyncpg.Record:
    """Write ``count`` ready jobs of one lane by COPY, in the caller's transaction: reserve
    their lane range and ids (which wakes the queue at commit), then COPY ``lines(reserved)``,
    rows in ``READY_COPY_COLUMNS`` order. Returns what was reserved."""
    reserved = await conn.fetchrow(RESERVE_READY_CHUNK, queue, priority, count)
    assert reserved is not None
    await conn.copy_to_table(
        "ready_entries", source=_once(lines(reserved)), columns=READY_COPY_COLUMNS
    )
    return reserved


async def _once(data: bytes) -> AsyncIterator[bytes]:
    """``data`` as the async iterable COPY reads (a bytes source would be taken for a path)."""
    yield data


async def requeue_done(
    conn: Conn, job_id: int, run_lease: int, args_json: str | None = None
) -> bool:
    """An operator retry of a failed or cancelled job (with new args when ``args_json`` is
    given); False if it is not that any more."""
    return not (await conn.execute(REQUEUE_DONE, job_id, run_lease, args_json)).endswith(" 0")


async def requeue_dlq(conn: Conn, job_id: int, args_json: str | None = None) -> bool:
    """A dead-lettered job back to its queue (with new args when ``args_json`` is given);
    False if it is not dead-lettered any more."""
    return not (await conn.execute(REQUEUE_DLQ, job_id, args_json)).endswith(" 0")


async def requeue_waiting(
    conn: Conn, job_id: int, run_lease: int, attempted_at: datetime | None, payload: Any
) -> None:
    """The attempt the caller just closed runs again from attempt 0 (``retry_external``)."""
    await conn.execute(REQUEUE_WAITING, job_id, run_lease, attempted_at, payload)


async def resume_queue(conn: Conn, queue: str) -> None:
    """Clear ``queue``'s pause flag and wake the runtimes that serve it."""
    await conn.execute(RESUME_QUEUE, queue, False)
