"""Rings: ring rotation and the prune of a sealed slot, the last step of a maintenance pass.

Hot tables are LIST-partitioned into slots. Rotation moves writers to the next slot (skipped
while the current slot is idle); prune empties the oldest sealed slot with TRUNCATE, only when
nothing in it is live, after carrying failed jobs inside ``failed_retention`` forward into the
live slot. One leader runs it (``storage.ops.maintenance``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from storage.db.pool import Conn
from storage.db.sql import OPEN_ATTEMPTS, with_or_without
from storage.insert import unique

if TYPE_CHECKING:
    from storage.ops.maintenance import MaintenanceSettings

log = logging.getLogger("storage")

RING = "SELECT slot_count, current_slot, rotated_at FROM ring_state WHERE ring = $1 FOR UPDATE"
ROTATE = """
UPDATE ring_state SET current_slot = $2, generation = generation + 1, rotated_at = now()
 WHERE ring = $1
"""
QUEUE_TABLES = (
    "ready_entries",
    "done_entries",
    "receipt_completion_batches",
    "receipt_completion_tombstones",
    "ready_tombstones",
)
CLAIM_TABLES = ("claim_batches", "attempt_closures")
SLOT_USED = {
    "queue": "SELECT EXISTS (SELECT 1 FROM ready_entries WHERE slot = $1)"
    " OR EXISTS (SELECT 1 FROM done_entries WHERE slot = $1)"
    " OR EXISTS (SELECT 1 FROM receipt_completion_batches WHERE slot = $1)",
    "claim": "SELECT EXISTS (SELECT 1 FROM claim_batches WHERE slot = $1)"
    " OR EXISTS (SELECT 1 FROM attempt_closures WHERE slot = $1)",
}

# A queue slot is live while it holds a ready row that is unclaimed or whose attempt is open.
QUEUE_SLOT_LIVE = f"""
WITH {OPEN_ATTEMPTS}
SELECT EXISTS (
    SELECT 1 FROM ready_entries r
      JOIN queue_lanes l ON l.queue = r.queue AND l.priority = r.priority
     WHERE r.slot = $1 AND r.lane_seq >= l.claim_seq
       AND NOT EXISTS (SELECT 1 FROM ready_tombstones t
                        WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease))
    OR EXISTS (SELECT 1 FROM open o JOIN ready_entries r USING (job_id, run_lease)
                WHERE r.slot = $1)
"""
CLAIM_SLOT_LIVE = f"""
WITH {OPEN_ATTEMPTS}
SELECT EXISTS (SELECT 1 FROM open o JOIN claim_batches cb USING (claim_id) WHERE cb.slot = $1)
"""

# Failed jobs inside the retention window survive prune: their ready row and done row are
# copied into the live slot ($2) before the old slot ($1) is truncated; %(o)s is the output
# column, where the schema has it.
CARRY_FAILED = """
WITH keep AS (
    SELECT d.* FROM done_entries d JOIN ready_entries r USING (job_id, run_lease)
     WHERE d.state = 'failed' AND d.finalized_at > now() - $3::interval
       AND (d.slot = $1 OR r.slot = $1)
), ready_copy AS (
    INSERT INTO ready_entries
    SELECT $2, r.job_id, r.kind, r.queue, r.args, r.priority, r.attempt, r.run_lease,
           r.max_attempts, r.lane_seq, r.run_at, r.attempted_at, r.created_at, r.unique_key,
           r.payload
      FROM ready_entries r JOIN keep k USING (job_id, run_lease)
     WHERE r.slot = $1
)
INSERT INTO done_entries (slot, job_id, run_lease, state, attempt, finalized_at, payload %(o)s)
SELECT $2, job_id, run_lease, state, attempt, finalized_at, payload %(o)s FROM keep WHERE slot = $1
"""
CARRY_FAILED_SQL = with_or_without(CARRY_FAILED, o=(", output", ""))


# Before a queue slot is truncated, lane cursors move past unclaimed rows that are all cancelled
# (tombstoned): once pruned, such a row would leave a hole the claim cursor never passes when
# nothing is inserted after it, counted as available forever. Lanes an enqueue holds are
# skipped: its row commits behind the hole and the next claim passes both.
# The lanes are locked in their own statement and moved in the next: a statement keeps the
# snapshot it took before it locked a row, so an enqueue that committed in between would have
# been invisible to the min() below while its next_seq was not, and the cursor would have
# passed its rows.
LOCK_DEAD_PREFIX_LANES = """
SELECT l.queue, l.priority FROM queue_lanes l
 WHERE l.claim_seq < l.next_seq
   AND EXISTS (SELECT 1 FROM ready_entries r
                WHERE r.slot = $1 AND r.queue = l.queue AND r.priority = l.priority
                  AND r.lane_seq >= l.claim_seq)
   FOR UPDATE SKIP LOCKED
"""
SKIP_DEAD_PREFIX = """
UPDATE queue_lanes l SET claim_seq = COALESCE(
    (SELECT min(r.lane_seq) FROM ready_entries r
      WHERE r.queue = l.queue AND r.priority = l.priority AND r.lane_seq >= l.claim_seq
        AND NOT EXISTS (SELECT 1 FROM ready_tombstones t
                         WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)),
    l.next_seq)
  FROM unnest($1::text[], $2::smallint[]) AS lanes(queue, priority)
 WHERE l.queue = lanes.queue AND l.priority = lanes.priority
"""


@dataclass(frozen=True)
class RotateOutcome:
    rotated: bool
    pruned: bool


async def rotate(
    conn: Conn,
    ring: str,
    interval: timedelta,
    settings: MaintenanceSettings,
    outputs_supported: bool,
    *,
    force: bool = False,
) -> RotateOutcome:
    """Move ``ring`` to its next slot when due, pruning that (oldest sealed) slot first."""
    async with conn.transaction():
        row = await conn.fetchrow(RING, ring)
        assert row is not None
        count, current = row["slot_count"], row["current_slot"]
        due = (
            force
            or (await conn.fetchval("SELECT now() - $1::timestamptz", row["rotated_at"]))
            >= interval
        )
        if not due or not await conn.fetchval(SLOT_USED[ring], current):
            return RotateOutcome(False, False)  # not yet, or the current slot is idle
        target = (current + 1) % count
        pruned = False
        if await conn.fetchval(SLOT_USED[ring], target):
            pruned = await prune_slot(conn, ring, target, current, settings, outputs_supported)
            if not pruned:
                return RotateOutcome(False, False)
        await conn.execute(ROTATE, ring, target)
        return RotateOutcome(True, pruned)


async def prune_slot(
    conn: Conn,
    ring: str,
    slot: int,
    live_slot: int,
    settings: MaintenanceSettings,
    outputs_supported: bool,
) -> bool:
    """TRUNCATE one sealed slot of ``ring`` unless something in it is live. In a transaction."""
    tables = QUEUE_TABLES if ring == "queue" else CLAIM_TABLES
    partitions = [f"{table}_{int(slot)}" for table in tables]
    # Lock first: writers that already chose this slot finish before the liveness check.
    await conn.execute(f"LOCK TABLE {', '.join(partitions)} IN ACCESS EXCLUSIVE MODE")
    live_sql = QUEUE_SLOT_LIVE if ring == "queue" else CLAIM_SLOT_LIVE
    if await conn.fetchval(live_sql, slot):
        log.info("prune of %s slot %s skipped: it still holds live jobs", ring, slot)
        return False
    if ring == "queue":
        lanes = await conn.fetch(LOCK_DEAD_PREFIX_LANES, slot)
        if lanes:
            queues = [lane["queue"] for lane in lanes]
            await conn.execute(SKIP_DEAD_PREFIX, queues, [lane["priority"] for lane in lanes])
        carry = CARRY_FAILED_SQL[outputs_supported]
        await conn.execute(carry, slot, live_slot, settings.failed_retention)
        await unique.forget_pruned(conn, slot)
    await conn.execute(f"TRUNCATE {', '.join(partitions)}")
    return True
