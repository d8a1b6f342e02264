"""Operator actions: cancel, retry, delete, and the dead-letter queue.

Each action checks the job's state and refuses with ``InvalidJobState`` (naming the state)
when it does not apply; each write is guarded so that a job that moved on in between is
refused rather than overwritten. Admin actions never publish an attempt's output.
"""

from __future__ import annotations

from datetime import UTC, datetime

from storage.db.pool import Conn
from storage.db.sql import NOTIFY_CALLBACK, NOTIFY_CANCEL
from storage.finalize import attempt_writes
from storage.finalize.types import AttemptRef
from storage.insert import enqueue, unique
from storage.ops.audit import Recorder
from storage.ops.job_args import NewArgs
from storage.read import one_job
from storage.values.codec import to_json_text
from storage.values.errors import InvalidJobState, JobNotFound
from storage.values.models import JobRow, JobState
from storage.values.payload import append_error, error_entry

# A cancelled deferred job gets a ready row outside every lane (lane_seq NULL) for its done row
# to join, and a ready tombstone: the row was never runnable, so once the done row is deleted
# nothing may read it back as a job (it would otherwise look available).
CANCEL_DEFERRED = """
WITH gone AS (
    DELETE FROM deferred_jobs WHERE job_id = $1 AND run_lease = $2 RETURNING *
), ready AS (
    INSERT INTO ready_entries (slot, job_id, kind, queue, args, priority, attempt, run_lease,
                               max_attempts, lane_seq, run_at, attempted_at, created_at,
                               unique_key, payload)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), job_id, kind, queue, args,
           priority, attempt, run_lease, max_attempts, NULL, run_at, attempted_at, created_at,
           unique_key, payload
      FROM gone
    RETURNING job_id, run_lease, attempt
), tomb AS (
    INSERT INTO ready_tombstones (slot, job_id, run_lease)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), job_id, run_lease
      FROM ready
)
INSERT INTO done_entries (slot, job_id, run_lease, state, attempt, finalized_at, payload)
SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), job_id, run_lease,
       'cancelled', attempt, now(), $3
  FROM ready
"""

# An unclaimed ready row is cancelled under its lane lock, so a claim cannot take it meanwhile.
# The lock is taken in its own statement: a statement that waits for a row lock keeps its older
# snapshot for everything but the locked row, so CANCEL_AVAILABLE, run after the wait, is the
# one that sees what the previous holder (a claim, another cancel) committed.
LOCK_LANE_OF = """
SELECT 1 FROM queue_lanes l JOIN ready_entries r ON r.queue = l.queue AND r.priority = l.priority
 WHERE r.job_id = $1 AND r.run_lease = $2
   FOR UPDATE OF l
"""
CANCEL_AVAILABLE = """
WITH target AS (
    SELECT r.* FROM ready_entries r
      JOIN queue_lanes l ON l.queue = r.queue AND l.priority = r.priority
     WHERE r.job_id = $1 AND r.run_lease = $2 AND r.lane_seq >= l.claim_seq
       AND NOT EXISTS (SELECT 1 FROM ready_tombstones t WHERE t.job_id = $1 AND t.run_lease = $2)
), tomb AS (
    INSERT INTO ready_tombstones (slot, job_id, run_lease)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), job_id, run_lease
      FROM target
)
INSERT INTO done_entries (slot, job_id, run_lease, state, attempt, finalized_at, payload)
SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), job_id, run_lease,
       'cancelled', attempt, now(), $3
  FROM target
"""


DELETE_GENERAL = """
DELETE FROM done_entries WHERE job_id = $1 AND run_lease = $2 AND state = $3
"""
TOMBSTONE_COMPACT = """
INSERT INTO receipt_completion_tombstones (slot, job_id, run_lease)
VALUES ((SELECT current_slot FROM ring_state WHERE ring = 'queue'), $1, $2)
"""
PURGE_DLQ = "DELETE FROM dlq_entries WHERE job_id = $1"
CLAIM_OF = """
SELECT cb.claim_id FROM claim_batches cb JOIN ready_entries r
    ON r.queue = cb.queue AND r.priority = cb.priority
   AND cb.lane_lo <= r.lane_seq AND cb.lane_hi >= r.lane_seq
 WHERE r.job_id = $1 AND r.run_lease = $2 AND cb.job_ids @> ARRAY[$1::bigint]
"""
READ_ONLY = "SELECT current_setting('transaction_read_only') = 'on' OR pg_is_in_recovery()"

RETRYABLE = (JobState.FAILED, JobState.CANCELLED)
CANCELLABLE = "available, scheduled, retryable, running or waiting_external"


async def _current(conn: Conn, job_id: int, outputs: bool) -> JobRow:
    """The job as it is, in its own snapshot, read before the action's transaction: each write
    below is guarded, so a job that moves on after this read is refused, not overwritten."""
    row = await one_job.get_job(conn, job_id, outputs=outputs)
    if row is None:
        raise JobNotFound(f"Job {job_id} does not exist (it may have been deleted or pruned).")
    return row


def _refuse(row: JobRow, action: str, allowed: str) -> InvalidJobState:
    state = "dead-lettered" if row.dlq is not None else row.state.value
    return InvalidJobState(row.id, state, action, allowed)


def _cancel_payload(row: JobRow) -> dict[str, object]:
    payload: dict[str, object] = {}
    if row.metadata:
        payload["metadata"] = row.metadata
    if row.tags:
        payload["tags"] = row.tags
    if row.errors:
        payload["errors"] = row.errors
    entry = error_entry("cancelled by operator", row.attempt, datetime.now(UTC), terminal=True)
    return append_error(payload, entry)


# A job can move on between the state read and the write (claimed, promoted, completed): the
# write then matches nothing and the cancel is decided again against the new state. Each pass is
# its own transaction, so no pass holds a lane lock while it waits for an attempt's lock.
CANCEL_PASSES = 4


async def cancel(conn: Conn, job_id: int, *, outputs: bool, audit: Recorder) -> None:
    """Cancel a job that has not ended. A running handler is told and its completion goes stale."""
    seen: tuple[JobState, int] | None = None
    for _ in range(CANCEL_PASSES):
        row = await _current(conn, job_id, outputs)
        if row.dlq is not None or (row.state, row.run_lease) == seen:
            raise _refuse(row, "cancelled", CANCELLABLE)
        seen = (row.state, row.run_lease)
        async with conn.transaction():
            if await _cancel_pass(conn, row):
                if row.unique_key is not None:
                    await unique.release(conn, job_id, JobState.CANCELLED)
                await audit.job(conn, "cancel_job", job_id, row.queue)
                return
    raise _refuse(await _current(conn, job_id, outputs), "cancelled", CANCELLABLE)


async def _cancel_pass(conn: Conn, row: JobRow) -> bool:
    """One attempt to cancel ``row`` in the state it was read in; False when it moved on."""
    payload = _cancel_payload(row)
    match row.state:
        case JobState.SCHEDULED | JobState.RETRYABLE:
            status = await conn.execute(CANCEL_DEFERRED, row.id, row.run_lease, payload)
        case JobState.AVAILABLE:
            await conn.execute(LOCK_LANE_OF, row.id, row.run_lease)
            status = await conn.execute(CANCEL_AVAILABLE, row.id, row.run_lease, payload)
        case JobState.RUNNING | JobState.WAITING_EXTERNAL:
            status = await _cancel_open(conn, row, payload)
        case _:
            raise _refuse(row, "cancelled", CANCELLABLE)
    return not status.endswith(" 0")


async def _cancel_open(conn: Conn, row: JobRow, payload: dict[str, object]) -> str:
    claim_id = await conn.fetchval(CLAIM_OF, row.id, row.run_lease)
    if claim_id is None:
        return "INSERT 0 0"
    ref = AttemptRef(row.id, row.run_lease, claim_id)
    await attempt_writes.lock_attempt(conn, ref)
    if await attempt_writes.close_if_open(conn, ref, "cancelled_admin") is None:
        return "INSERT 0 0"
    await attempt_writes.write_done(
        conn, ref, state=JobState.CANCELLED, attempt=row.attempt, payload=payload
    )
    await conn.execute(NOTIFY_CANCEL, f"{row.id}:{row.run_lease}")
    if row.callback is not None:
        await conn.execute(NOTIFY_CALLBACK, row.callback.callback_id)
    return "INSERT 0 1"


class _MovedOn(Exception):
    """Roll back: the job left the state it was read in before the write."""


async def retry(
    conn: Conn,
    job_id: int,
    *,
    outputs: bool,
    audit: Recorder,
    args: NewArgs | None = None,
) -> None:
    """Run a failed or cancelled job again: same id, attempt 0, errors kept. With ``args``
    (the new args' JSON text from the job as read), it runs with them instead, and the audit
    entry keeps the original args (an edit-and-retry)."""
    row = await _current(conn, job_id, outputs)
    if row.dlq is None and row.state not in RETRYABLE:
        raise _refuse(row, "retried", "failed, cancelled or dead-lettered")
    new_args = None if args is None else await args(conn, row)
    try:
        async with conn.transaction():
            if row.unique_key is not None:
                await unique.reacquire(conn, job_id)  # keys before lanes, as inserts take them
            if row.dlq is not None:
                requeued = await enqueue.requeue_dlq(conn, job_id, new_args)
            else:
                requeued = await enqueue.requeue_done(conn, job_id, row.run_lease, new_args)
            if not requeued:
                raise _MovedOn
            if new_args is None:
                await audit.job(conn, "retry_job", job_id, row.queue)
            else:
                original = to_json_text(row.args).decode()
                await audit.job(conn, "retry_edited", job_id, row.queue, original_args=original)
    except _MovedOn:
        now = await _current(conn, job_id, outputs)
        raise _refuse(now, "retried", "failed or cancelled") from None


async def retry_dlq(conn: Conn, job_id: int, *, outputs: bool, audit: Recorder) -> None:
    """Move a dead-lettered job back to its queue (same id, attempt 0, errors kept)."""
    row = await _current(conn, job_id, outputs)
    if row.dlq is None:
        raise _refuse(row, "retried from the DLQ", "dead-lettered")
    try:
        async with conn.transaction():
            if row.unique_key is not None:
                await unique.reacquire(conn, job_id)
            if not await enqueue.requeue_dlq(conn, job_id):
                raise _MovedOn
            await audit.job(conn, "retry_dlq", job_id, row.queue)
    except _MovedOn:
        now = await _current(conn, job_id, outputs)
        raise _refuse(now, "retried from the DLQ", "dead-lettered") from None


async def delete(conn: Conn, job_id: int, *, outputs: bool, audit: Recorder) -> None:
    """Delete a terminal job. A compact completion gets a tombstone; its bytes stay until prune."""
    row = await _current(conn, job_id, outputs)
    async with conn.transaction():
        if row.dlq is not None:
            status = await conn.execute(PURGE_DLQ, job_id)
        elif row.state is JobState.COMPLETED and row.storage_path == "compact":
            status = await conn.execute(TOMBSTONE_COMPACT, job_id, row.run_lease)
        elif row.state in (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED):
            status = await conn.execute(DELETE_GENERAL, job_id, row.run_lease, row.state.value)
        else:
            raise _refuse(row, "deleted", "completed, failed or cancelled")
        if row.unique_key is not None:
            await unique.forget(conn, [job_id])
        if not status.endswith(" 0"):  # gone already: whoever removed it recorded that
            await audit.job(conn, "delete_job", job_id, row.queue)


async def purge_dlq(conn: Conn, job_id: int, *, outputs: bool, audit: Recorder) -> None:
    row = await _current(conn, job_id, outputs)
    if row.dlq is None:
        raise _refuse(row, "purged from the DLQ", "dead-lettered")
    async with conn.transaction():
        status = await conn.execute(PURGE_DLQ, job_id)
        if row.unique_key is not None:
            await unique.forget(conn, [job_id])
        if not status.endswith(" 0"):  # gone already: whoever removed it recorded that
            await audit.job(conn, "purge_dlq", job_id, row.queue)


async def database_read_only(conn: Conn) -> bool:
    """True when this session cannot write: read-only mode, or a replica."""
    return bool(await conn.fetchval(READ_ONLY))
