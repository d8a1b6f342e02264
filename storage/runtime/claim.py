"""Claim: lock the first lane with work in a queue that is not paused (priority, then queue),
then read up to N live ready rows from its cursor in lane order (tombstoned ones are passed
over), write one ``claim_batches`` row and advance the cursor. A plain running job has no
mutable per-job row.

The lock and the claim are two statements of one transaction, so the claim is decided against
the lane as it is under the lock. In READ COMMITTED a statement keeps the snapshot it took
before it waited for a row lock and re-checks only the locked row: a one-statement claim that
waited behind a cancel did not see the cancel's tombstone (the cancelled job ran and completed
too), and one that waited behind an enqueue saw the enqueue's cursor but not its rows (the
cursor passed them and they were never claimed). The second statement's snapshot is taken
after the lock is held, so it sees everything every earlier lock holder committed.

The two run as one call of a function the session makes for itself (``CLAIM_FUNCTION``: one
round trip, and no transaction left open while the client is busy elsewhere), or, where the
session may not make one, as statements sent one by one.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from storage.db import session_functions
from storage.db.pool import Conn, begun
from storage.db.sql import with_or_without

# The claim's transaction when its statements are sent one by one, begun with a generic plan
# for them in the one round trip BEGIN takes anyway (``CLAIM_FUNCTION`` makes the same
# settings). Under the default plan_cache_mode the server planned LOCK_LANE afresh on every
# claim (12 custom plans of 12 in pg_prepared_statements: its generic plan's guess of
# the queue array's length never beat a plan made with the values) and CLAIM_BATCH for its
# first five. Transaction-local, as the flush's (``LOCK_CLAIM_BATCHES_FOR_FLUSH``); it has to
# be set before LOCK_LANE is planned, so it cannot ride in LOCK_LANE as the flush's does.
#
# The claim also commits without waiting for its WAL to reach the disk (synchronous_commit
# off, for this transaction only): the dispatcher waits for the claim's commit before it
# starts the handlers, and the flush was most of it (a claim of 1 job took 3.2 ms with it and
# 1.5 ms without, 512 jobs 16.2 and 13.4 ms; docs/benchmark-history.md). What a crash can do
# then, and why every promise holds:
# - A crash up to ~3 x wal_writer_delay after the commit may lose the claim: the lane's
#   claim_seq, the claim_batches row and the claim id go back to where they were, so after the
#   restart the jobs are claimed again, with the same run leases. Their handlers may have run
#   meanwhile: that is at-least-once, as after a rescue (a job may run twice, never zero times).
# - No durable write can depend on a lost claim. WAL reaches the disk in order, a prefix at a
#   time, and every write about the claim's jobs commits after the claim did: a completion, a
#   heartbeat or a rescue that is durable proves its claim is. Most of them commit
#   synchronously (failures, heartbeats, rescue, operators), flushing the WAL past the claim's
#   commit record; the handler completion flush does not wait either (``batcher``), and a
#   crash that loses the claim loses it too.
# - A completion retried after the restart is lease-guarded as always (its claim id, job id
#   and run lease must be an open attempt of a committed claim batch): it is stale, or, if the
#   same job was claimed again with the same lease and id, it completes the job with the
#   attempt that did run, and the new attempt's completion is the stale one. A job is still
#   completed once.
BEGIN_GENERIC = (
    "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; SET LOCAL synchronous_commit = off"
)

# The wait for the lane, in its own statement: whoever held the lane before has committed when
# this returns. A paused queue's lanes are passed over (``storage.read.queues``): one primary-key
# probe of queue_settings per candidate lane. The flag is read through to_jsonb so that a
# runtime of this release keeps claiming on a schema that v004 has not reached yet (no
# ``paused`` column: the key is absent, nothing counts as paused), as it does for outputs.
# It also returns now(): the transaction's start, so exactly the claim batch's claimed_at.
LOCK_LANE = """
SELECT queue, priority, now() AS claimed_at FROM queue_lanes l
 WHERE queue = ANY($1::text[]) AND claim_seq < next_seq
   AND NOT EXISTS (SELECT 1 FROM queue_settings qs
                    WHERE qs.queue = l.queue AND (to_jsonb(qs) ->> 'paused')::boolean)
 ORDER BY priority, queue
 LIMIT 1
   FOR UPDATE
"""

# Run with the lane ($1, $2) locked by LOCK_LANE in the same transaction. The batch row records
# the claiming runtime's id ($5, ``storage.ops.runtimes``) where the schema has the column
# (v010) and the runtime registered: a parameter of this statement, no round trip of its own.
CLAIM_BATCH = """
WITH lane AS (
    SELECT queue, priority, claim_seq FROM queue_lanes
     WHERE queue = $1 AND priority = $2 AND claim_seq < next_seq
), scanned AS (
    SELECT r.*
      FROM lane
      JOIN ready_entries r
        ON r.queue = lane.queue AND r.priority = lane.priority AND r.lane_seq >= lane.claim_seq
       -- Lane sequences are dense, so the next N rows lie in this window (plus room for up to
       -- 64 cancelled ones). Bounding it keeps the scan short whatever the planner guesses
       -- about the lane's backlog (unbounded, it sorted the whole backlog: 160 ms at 20k jobs).
       AND r.lane_seq < lane.claim_seq + $3 + 64
     WHERE NOT EXISTS (SELECT 1 FROM ready_tombstones t
                        WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)
     ORDER BY r.lane_seq
     LIMIT $3
), advanced AS (
    -- The lane row is locked, so every sequence below next_seq has committed: with no live
    -- row in the window, the cursor moves past the cancelled ones to the window's end.
    UPDATE queue_lanes l
       SET claim_seq = COALESCE((SELECT max(lane_seq) + 1 FROM scanned),
                                LEAST(l.next_seq, lane.claim_seq + $3 + 64))
      FROM lane
     WHERE l.queue = lane.queue AND l.priority = lane.priority
    RETURNING 1
), batch AS (
    INSERT INTO claim_batches (slot, claim_id, queue, priority, lane_lo, lane_hi, job_ids,
                               run_leases, lane_seqs, attempts, claimed_at,
                               deadline_at%(runtime_column)s)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'claim'), nextval('claim_id_seq'),
           lane.queue, lane.priority, lane.claim_seq, (SELECT max(lane_seq) FROM scanned),
           array_agg(s.job_id ORDER BY s.lane_seq), array_agg(s.run_lease ORDER BY s.lane_seq),
           array_agg(s.lane_seq ORDER BY s.lane_seq), array_agg(s.attempt + 1 ORDER BY s.lane_seq),
           now(), now() + make_interval(secs => $4)%(runtime_value)s
      FROM scanned s, lane
     GROUP BY lane.queue, lane.priority, lane.claim_seq
    RETURNING claim_id
)
SELECT s.job_id, s.kind, s.args, s.attempt + 1 AS attempt, s.run_lease, s.max_attempts,
       s.lane_seq, s.payload, s.unique_key, b.claim_id,
       GREATEST(0, extract(epoch FROM now() - s.run_at))::float8 AS waited%(lane)s
  FROM scanned s, batch b
 ORDER BY s.lane_seq
"""

_CLAIMS = with_or_without(
    CLAIM_BATCH, runtime_column=(", runtime_id", ""), runtime_value=(", $5::bigint", "")
)
CLAIM_WITH_RUNTIME, CLAIM_WITHOUT_RUNTIME = (
    _CLAIMS[r].replace("%(lane)s", "") for r in (True, False)
)

# The claim in one round trip (``storage.db.session_functions``): LOCK_LANE, then the claim,
# as statements of a session function, each with its own snapshot, so the claim still sees
# everything the lane's earlier holders committed. $1-$5 of the claim are the function's first
# five arguments (the lane's queue and priority filled in from LOCK_LANE); its rows also carry
# the lane and the transaction's time, in whole microseconds (exact; a timestamp per row
# would cost a datetime each). The function's call is its own transaction, so the settings
# BEGIN_GENERIC makes are set_config()s local to it, before either statement is planned.
_LANE_COLUMNS = ", $1, $2, (extract(epoch FROM now()) * 1000000)::bigint"
CLAIM_FUNCTION = """
CREATE OR REPLACE FUNCTION pg_temp.%(name)s(
    lane_queue text, lane_priority smallint, lim int, deadline float8, runtime bigint,
    queues text[], rooms int[])
RETURNS TABLE (job_id bigint, kind text, args jsonb, attempt int, run_lease bigint,
               max_attempts int, lane_seq bigint, payload jsonb, unique_key text,
               claim_id bigint, waited float8, queue text, priority smallint, claimed_us bigint)
LANGUAGE plpgsql AS $claim$
#variable_conflict use_column
BEGIN
    PERFORM set_config('plan_cache_mode', 'force_generic_plan', true),
            set_config('synchronous_commit', 'off', true);
    SELECT l.queue, l.priority INTO lane_queue, lane_priority FROM (%(lock_lane)s) l;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF rooms IS NOT NULL THEN
        lim := least(lim, coalesce(rooms[array_position(queues, lane_queue)], lim));
    END IF;
    RETURN QUERY %(claim)s;
END
$claim$
"""
_LOCK_LANE_ON_QUEUES = LOCK_LANE.replace("$1::text[]", "$6")  # the function's queues argument
CLAIM_FUNCTIONS = {
    with_runtime: (
        name,
        CLAIM_FUNCTION
        % {
            "name": name,
            "lock_lane": _LOCK_LANE_ON_QUEUES,
            "claim": _CLAIMS[with_runtime].replace("%(lane)s", _LANE_COLUMNS),
        },
        f"SELECT * FROM pg_temp.{name}(NULL, NULL, $1, $2, $3, $4, $5)",
    )
    for with_runtime, name in ((True, "awa_claim_batch"), (False, "awa_claim_batch_unregistered"))
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# The ready row's times, for the rare reader that needs them (a completion spec's row): the
# claim leaves them out, since asyncpg builds every timestamp in Python (~6k instructions).
READY_TIMES = "SELECT run_at, created_at FROM ready_entries WHERE job_id = $1 AND run_lease = $2"


class ClaimedJob(NamedTuple):
    """One attempt as claimed: ``(job_id, run_lease)`` guards every transition it makes.

    A tuple made in C from the claim's row plus its lane and time, shared by the batch (a
    frozen dataclass cost a Python ``__init__`` and a ``setattr`` per field, per job). The
    row's own timestamps are not fetched: four ``datetime`` objects cost more than the rest
    of the row; ``claimed_at`` is the batch's.
    """

    job_id: int
    kind: str
    args: Any
    attempt: int
    run_lease: int
    max_attempts: int
    lane_seq: int
    payload: dict[str, Any] | None
    unique_key: str | None  # a keyed job completes on the general path
    claim_id: int
    waited: float  # seconds from run_at to the claim (a float: no datetime built per row)
    queue: str
    priority: int
    claimed_at: datetime


async def claim_batch(
    conn: Conn,
    queues: list[str],
    limit: int,
    deadline_seconds: float,
    queue_room: Mapping[str, int] | None = None,
    runtime_id: int | None = None,
) -> list[ClaimedJob]:
    """Claim up to ``limit`` jobs from the first lane of ``queues`` that has work, and no
    more than ``queue_room`` allows for that lane's queue; the batch records ``runtime_id``
    (None: a runtime without a registry row, on a schema before v010)."""
    name, create, call = CLAIM_FUNCTIONS[runtime_id is not None]
    if await session_functions.ready(conn, name, create):
        rooms = None if queue_room is None else [queue_room.get(q, limit) for q in queues]
        rows = await conn.fetch(call, limit, deadline_seconds, runtime_id, queues, rooms)
        if not rows:
            return []
        claimed_at = _EPOCH + timedelta(microseconds=rows[0][13])
        new = tuple.__new__
        return [new(ClaimedJob, (*r[:13], claimed_at)) for r in rows]
    async with begun(conn, BEGIN_GENERIC):
        lane = await conn.fetchrow(LOCK_LANE, queues)
        if lane is None:
            return []
        queue, priority, claimed_at = lane
        if queue_room is not None:
            limit = min(limit, queue_room.get(queue, limit))
        if runtime_id is None:  # a schema before v010, or a claim outside a runtime
            rows = await conn.fetch(CLAIM_WITHOUT_RUNTIME, queue, priority, limit, deadline_seconds)
        else:
            rows = await conn.fetch(
                CLAIM_WITH_RUNTIME, queue, priority, limit, deadline_seconds, runtime_id
            )
    # The columns come in ClaimedJob's field order, the batch's values last.
    new = tuple.__new__
    return [new(ClaimedJob, (*r, queue, priority, claimed_at)) for r in rows]


async def ready_times(conn: Conn, job_id: int, run_lease: int) -> tuple[datetime, datetime] | None:
    """The ready row's ``run_at`` and ``created_at``; None when the row is gone."""
    row = await conn.fetchrow(READY_TIMES, job_id, run_lease)
    return None if row is None else (row["run_at"], row["created_at"])
