"""Maintenance: promotion, rescue, callback timeouts, ring rotation and prune.

One leader at a time: the session holding an advisory lock, taken for one pass (``run_pass``)
or kept across passes by a runtime (``storage.ops.leadership``). Rescue closes the old attempt
before the job becomes runnable again, so a late completion from a presumed-dead worker is
stale; it writes an error entry without an output, which leaves an earlier kept output in
place. The pass reports every rescue it committed (``PassReport.rescues``) so the client can
emit ``rescued`` events after the fact. Dead-lettered jobs older than ``dlq_retention`` are
purged, audit entries older than ``audit_retention`` deleted (``storage.ops.audit.prune``),
and runtime registry rows no claim batch references once older than ``runtime_retention``
(``storage.ops.runtimes.prune``, at most once per ``claim_rotate_interval``).

Each pass ends by rotating the queue and claim rings (``storage.ops.rings``).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import asyncpg

from storage.db.pool import Conn
from storage.db.sql import (
    NOTIFY_CALLBACK,
    OPEN_ATTEMPTS,
    TRY_LOCK_MAINTENANCE_LEADER,
    UNLOCK_MAINTENANCE_LEADER,
)
from storage.finalize.types import AttemptRecord, AttemptRef
from storage.insert import enqueue, periodic, unique
from storage.ops import audit, runtimes
from storage.ops.rescue import Rescued, end_attempt
from storage.ops.rings import rotate
from storage.values.models import HEARTBEAT_STALE_SECONDS

EXPIRED = f"""
WITH {OPEN_ATTEMPTS}
SELECT o.job_id, o.run_lease, o.claim_id, o.attempt, o.claimed_at, r.max_attempts, r.kind,
       r.queue,
       CASE WHEN cb.deadline_at < now() THEN 'hard deadline exceeded'
            ELSE 'heartbeat stale: worker presumed dead' END AS reason
  FROM open o
  JOIN claim_batches cb ON cb.claim_id = o.claim_id
  JOIN ready_entries r ON r.job_id = o.job_id AND r.run_lease = o.run_lease
  LEFT JOIN attempt_state s ON s.job_id = o.job_id AND s.run_lease = o.run_lease
 WHERE COALESCE(s.state, 'running') = 'running'
   AND (cb.deadline_at < now()
        OR COALESCE(s.heartbeat_at, o.claimed_at) < now() - make_interval(secs => $1))
 LIMIT $2
"""

# attempted_at of the next try is when the timed-out attempt was claimed (its claim batch), not
# the ready row's attempted_at, which belongs to the attempt before it.
CALLBACK_TIMEOUTS = """
SELECT s.job_id, s.run_lease, s.claim_id, s.callback_id, r.attempt + 1 AS attempt,
       r.max_attempts, r.kind, r.queue, cb.claimed_at
  FROM attempt_state s
  JOIN ready_entries r ON r.job_id = s.job_id AND r.run_lease = s.run_lease
  LEFT JOIN claim_batches cb ON cb.claim_id = s.claim_id
 WHERE s.state = 'waiting_external' AND s.callback_timeout_at < now()
 LIMIT $1
"""

# The rescue horizon H (maintenance_state.rescue_horizon) bounds every open-attempt read.
# INVARIANT: every claim batch with claim_id < H has committed, and every attempt in it has
# ended (a closure row or a compact completion) or has an attempt_state row, through which the
# reads find it (OPEN_ATTEMPTS). A state row lives until its attempt ends: only the
# transaction that ends the attempt, or maintenance once it has ended, deletes it. A claim
# batch below H that commits later, or an open attempt below H without a state row, would be
# invisible to reads and to rescue, so H only advances to
#   min(first claim batch with an open attempt that has no state row,
#       first claim id that may still be uncommitted).
# A state row written after the horizon was computed is not needed: the horizon stopped at
# its attempt, which had none in that snapshot.
# The second bound is found without a time rule, from the claim's lock order: a claim locks
# its lane row FOR UPDATE before it takes nextval('claim_id_seq') and holds it until it
# commits. So after reading the sequence's last issued id X, a lane we can lock FOR KEY SHARE
# (SKIP LOCKED: never wait, never block claims for long) has no claim <= X still in flight.
# On a lane we cannot lock, an in-flight claim (or the cancel / prune holding it) may be
# writing; claims of one lane are serialised by that lock, so its id is above every committed
# claim of the lane: the bound is the lane's newest visible claim + 1. KEY SHARE does not
# conflict with an enqueue's NO KEY UPDATE of the lane, so enqueues never hold the horizon.
# The locks are released (commit) before the horizon is computed in a new snapshot, which
# therefore sees every claim the lock step proved finished.
ISSUED_CLAIMS = """
SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM claim_id_seq
"""
BUSY_LANES = """
WITH free AS (SELECT queue, priority FROM queue_lanes FOR KEY SHARE SKIP LOCKED)
SELECT l.queue, l.priority FROM queue_lanes l
 WHERE NOT EXISTS (SELECT 1 FROM free f WHERE f.queue = l.queue AND f.priority = l.priority)
"""
ADVANCE_HORIZON = f"""
WITH {OPEN_ATTEMPTS}
UPDATE maintenance_state SET rescue_horizon = GREATEST(rescue_horizon, LEAST(
    (SELECT min(o.claim_id) FROM open o
      WHERE NOT EXISTS (SELECT 1 FROM attempt_state s
                         WHERE s.job_id = o.job_id AND s.run_lease = o.run_lease)),
    $1::bigint + 1,
    (SELECT min(COALESCE((SELECT cb.claim_id FROM claim_batches cb
                           WHERE cb.queue = busy.queue AND cb.priority = busy.priority
                           ORDER BY cb.lane_hi DESC LIMIT 1), 0) + 1)
       FROM unnest($2::text[], $3::smallint[]) AS busy(queue, priority))))
"""

ORPHAN_STATE = """
DELETE FROM attempt_state s
 WHERE EXISTS (SELECT 1 FROM attempt_closures c
                WHERE c.job_id = s.job_id AND c.run_lease = s.run_lease)
    OR EXISTS (SELECT 1 FROM receipt_completion_batches b
                WHERE b.claim_id = s.claim_id AND b.job_ids @> ARRAY[s.job_id])
    OR NOT EXISTS (SELECT 1 FROM claim_batches cb WHERE cb.claim_id = s.claim_id)
"""

# The DLQ is not a ring: its rows stay until retried, purged, or past ``dlq_retention``.
PURGE_OLD_DLQ = """
DELETE FROM dlq_entries
 WHERE job_id IN (SELECT job_id FROM dlq_entries WHERE dlq_at < now() - $1::interval
                   ORDER BY dlq_at LIMIT $2)
RETURNING job_id, unique_key IS NOT NULL AS keyed
"""


@dataclass(frozen=True)
class MaintenanceSettings:
    heartbeat_stale_seconds: float = HEARTBEAT_STALE_SECONDS
    queue_rotate_interval: timedelta = timedelta(minutes=15)
    claim_rotate_interval: timedelta = timedelta(minutes=5)
    failed_retention: timedelta = timedelta(hours=72)
    dlq_retention: timedelta = timedelta(days=30)  # then dead-lettered jobs are purged
    audit_retention: timedelta = timedelta(days=90)  # then audit entries are deleted
    runtime_retention: timedelta = timedelta(days=7)  # then unreferenced registry rows go
    batch: int = 1000


@dataclass
class PassReport:
    promoted: int = 0
    rescued: int = 0
    timed_out: int = 0
    rotated: tuple[str, ...] = ()
    pruned: tuple[str, ...] = ()
    leader: bool = True
    dlq_purged: int = 0
    audit_pruned: int = 0
    runtimes_pruned: int = 0
    periodic: int = 0  # ticks enqueued
    rescues: list[Rescued] = field(default_factory=list)  # committed, in order (for events)


async def run_pass(
    conn: Conn,
    settings: MaintenanceSettings,
    *,
    outputs_supported: bool,
    registry: bool = False,
    now: datetime | None = None,
) -> PassReport:
    """One maintenance pass, if this connection wins leadership for it (and gives it back
    after). Periodic ticks are judged at the database's clock, or at ``now`` when given (tests).
    ``registry``: the schema has the runtime registry (v010), whose old rows are pruned."""
    if not await conn.fetchval(TRY_LOCK_MAINTENANCE_LEADER):
        return PassReport(leader=False)
    try:
        return await run_pass_leading(
            conn, settings, outputs_supported=outputs_supported, registry=registry, now=now
        )
    finally:
        # A lost connection already released its session lock; only a live one unlocks.
        with contextlib.suppress(asyncpg.InterfaceError, asyncpg.ConnectionDoesNotExistError):
            await conn.fetchval(UNLOCK_MAINTENANCE_LEADER)


async def run_pass_leading(
    conn: Conn,
    settings: MaintenanceSettings,
    *,
    outputs_supported: bool,
    registry: bool = False,
    now: datetime | None = None,
) -> PassReport:
    """One maintenance pass on ``conn``, whose session holds the leader's lock already
    (``run_pass``, or kept across passes: ``storage.ops.leadership``)."""
    report = PassReport()
    report.promoted = await enqueue.promote_due(conn, limit=settings.batch)
    report.periodic = len(await periodic.run_due(conn, now))
    rescued = await rescue_expired(conn, settings)
    timed_out = await rescue_callback_timeouts(conn, settings)
    report.rescued, report.timed_out = len(rescued), len(timed_out)
    report.rescues = rescued + timed_out
    await conn.execute(ORPHAN_STATE)
    report.dlq_purged = await purge_old_dlq(conn, settings)
    report.audit_pruned = await audit.prune(conn, settings.audit_retention, settings.batch)
    if registry:
        report.runtimes_pruned = await runtimes.prune(
            conn, settings.runtime_retention, settings.claim_rotate_interval
        )
    await advance_horizon(conn)
    rotated, pruned = [], []
    for ring, interval in (
        ("queue", settings.queue_rotate_interval),
        ("claim", settings.claim_rotate_interval),
    ):
        outcome = await rotate(conn, ring, interval, settings, outputs_supported)
        if outcome.pruned:
            pruned.append(ring)
        if outcome.rotated:
            rotated.append(ring)
    report.rotated, report.pruned = tuple(rotated), tuple(pruned)
    return report


async def advance_horizon(conn: Conn) -> None:
    """Move the rescue horizon up to the first claim batch that is open or may be uncommitted
    (the invariant is written above ``ISSUED_CLAIMS``). No time rule: a pass straight after a
    burst moves it past every batch that has ended, so reads stay bounded."""
    async with conn.transaction():
        issued = await conn.fetchval(ISSUED_CLAIMS)
        busy = await conn.fetch(BUSY_LANES)
    await conn.execute(
        ADVANCE_HORIZON, issued, [r["queue"] for r in busy], [r["priority"] for r in busy]
    )


async def purge_old_dlq(conn: Conn, settings: MaintenanceSettings) -> int:
    """Purge dead-lettered jobs past retention, and the keys of the keyed ones."""
    async with conn.transaction():
        purged = await conn.fetch(PURGE_OLD_DLQ, settings.dlq_retention, settings.batch)
        await unique.forget(conn, [r["job_id"] for r in purged if r["keyed"]])
    return len(purged)


async def rescue_expired(conn: Conn, settings: MaintenanceSettings) -> list[Rescued]:
    """Close attempts whose heartbeat is stale or whose deadline passed, and retry or fail them."""
    rows = await conn.fetch(EXPIRED, settings.heartbeat_stale_seconds, settings.batch)
    rescued: list[Rescued] = []
    for r in rows:
        record = AttemptRecord(
            ref=AttemptRef(r["job_id"], r["run_lease"], r["claim_id"]),
            attempt=r["attempt"],
            max_attempts=r["max_attempts"],
            attempted_at=r["claimed_at"],
        )
        ended = await end_attempt(conn, record, r["kind"], r["queue"], r["reason"], "rescued")
        if ended is not None:
            rescued.append(ended)
    return rescued


async def rescue_callback_timeouts(conn: Conn, settings: MaintenanceSettings) -> list[Rescued]:
    """Fail (or retry) jobs whose callback was not answered in time."""
    rows = await conn.fetch(CALLBACK_TIMEOUTS, settings.batch)
    done: list[Rescued] = []
    for r in rows:
        record = AttemptRecord(
            ref=AttemptRef(r["job_id"], r["run_lease"], r["claim_id"]),
            attempt=r["attempt"],
            max_attempts=r["max_attempts"],
            attempted_at=r["claimed_at"],
        )
        ended = await end_attempt(
            conn,
            record,
            r["kind"],
            r["queue"],
            "callback timed out",
            "callback_timeout",
            dlq_reason="callback_timeout",
        )
        if ended is not None:
            await conn.execute(NOTIFY_CALLBACK, r["callback_id"])
            done.append(ended)
    return done
