"""Write one attempt's end: its closure and its done, deferred or DLQ row. Completions are
written by one statement for one attempt or many (``general_writes`` on the general path,
``compact_writes`` on the compact one); ``complete_general`` runs the general one for a single
attempt with its staged follow-ups.

Every write takes the attempt's advisory locks (its claim batch shared, then its job
exclusively; transaction-scoped), then writes only if the attempt is still open: its claim
batch holds it, no closure row ends it and no compact completion batch already holds it. A
guard that matches nothing is *stale*: nothing is written and the caller is told.

What an attempt becomes is decided by ``attempt_rules`` (pure); the functions here carry the
decision out. Each runs in its own transaction, or in a savepoint of the caller's (advisory
locks are re-entrant within a transaction, so a caller may already hold the attempt's lock).
The executor, the test harness, rescue, callbacks and admin actions all come through here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg

from storage.db.pool import Conn
from storage.db.sql import LOCK_ATTEMPT
from storage.finalize import general_writes
from storage.finalize.rules import Failure, FailurePlan, outcome_of_rewrite, plan_failure
from storage.finalize.types import AttemptRecord, AttemptRef, Ended, GeneralCompletion, Outcome
from storage.insert import enqueue, unique
from storage.values.models import TERMINAL_STATES, JobState
from storage.values.payload import Payload, append_error, error_entry, with_progress

# The general guard: close the attempt if it is still open, drop its attempt state, and hand
# back its ready row with the last flushed progress.
CLOSE_IF_OPEN = """
WITH open AS (
    SELECT r.* FROM ready_entries r
     WHERE r.job_id = $1 AND r.run_lease = $2
       AND EXISTS (SELECT 1 FROM claim_batches cb
                    WHERE cb.claim_id = $3 AND cb.job_ids @> ARRAY[$1::bigint]
                      AND cb.run_leases[array_position(cb.job_ids, $1::bigint)] = $2)
       AND NOT EXISTS (SELECT 1 FROM attempt_closures c WHERE c.job_id = $1 AND c.run_lease = $2)
       AND NOT EXISTS (SELECT 1 FROM receipt_completion_batches b
                        WHERE b.claim_id = $3 AND b.job_ids @> ARRAY[$1::bigint])
     LIMIT 1
), closure AS (
    INSERT INTO attempt_closures (slot, job_id, run_lease, claim_id, outcome, closed_at)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'claim'), job_id, run_lease, $3, $4,
           now()
      FROM open
), dropped AS (
    DELETE FROM attempt_state s
     WHERE s.job_id = $1 AND s.run_lease = $2 AND EXISTS (SELECT 1 FROM open)
    RETURNING s.progress
)
SELECT open.*, (SELECT progress FROM dropped) AS stored_progress,
       COALESCE((SELECT dlq_enabled FROM queue_settings q WHERE q.queue = open.queue), false)
       AS dlq_enabled
  FROM open
"""

# Was this attempt already closed with ``outcome`` (a finalize retry after a lost ack)?
CLOSED_WITH = """
SELECT outcome FROM attempt_closures WHERE job_id = $1 AND run_lease = $2 AND claim_id = $3
"""

# A failed or cancelled attempt's done row (completions: ``general_writes``).
WRITE_DONE = """
INSERT INTO done_entries (slot, job_id, run_lease, state, attempt, finalized_at, payload)
VALUES ((SELECT current_slot FROM ring_state WHERE ring = 'queue'), $1, $2, $3, $4, now(), $5)
"""

# A retry or snooze writes the job's next readiness into deferred_jobs with a new run lease.
WRITE_DEFERRED = """
INSERT INTO deferred_jobs (job_id, state, kind, queue, args, priority, attempt, run_lease,
                           max_attempts, run_at, attempted_at, created_at, unique_key, payload)
SELECT job_id, $3, kind, queue, args, priority, $4, run_lease + 1, max_attempts, $5, $6,
       created_at, unique_key, $7
  FROM ready_entries WHERE job_id = $1 AND run_lease = $2
"""

WRITE_DLQ = """
INSERT INTO dlq_entries (job_id, kind, queue, args, priority, attempt, max_attempts, run_at,
                         attempted_at, created_at, finalized_at, unique_key, payload, dlq_reason,
                         dlq_at, original_run_lease)
SELECT job_id, kind, queue, args, priority, $3, max_attempts, run_at, $4, created_at, now(),
       unique_key, $5, $6, now(), run_lease
  FROM ready_entries WHERE job_id = $1 AND run_lease = $2
"""

PARK = """
UPDATE attempt_state s SET state = 'waiting_external'
 WHERE s.job_id = $1 AND s.run_lease = $2 AND s.callback_id IS NOT NULL
   AND NOT s.callback_resolved
   AND NOT EXISTS (SELECT 1 FROM attempt_closures c WHERE c.job_id = $1 AND c.run_lease = $2)
RETURNING s.callback_id
"""


async def lock_attempt(conn: Conn, ref: AttemptRef) -> None:
    """A single attempt's lock: its claim batch shared, then its job exclusively."""
    await conn.execute(LOCK_ATTEMPT, ref.claim_id, ref.job_id)


@dataclass(frozen=True)
class OpenAttempt:
    """The ready row of an attempt this transaction just closed."""

    row: asyncpg.Record

    @property
    def payload(self) -> Payload | None:
        value: Payload | None = self.row["payload"]
        return value

    @property
    def dlq_enabled(self) -> bool:
        return bool(self.row["dlq_enabled"])

    @property
    def stored_progress(self) -> Any:
        return self.row["stored_progress"]


async def close_if_open(conn: Conn, ref: AttemptRef, outcome: str) -> OpenAttempt | None:
    """Within a transaction holding ``ref``'s lock: write the closure, or None when stale."""
    row = await conn.fetchrow(CLOSE_IF_OPEN, ref.job_id, ref.run_lease, ref.claim_id, outcome)
    return None if row is None else OpenAttempt(row)


async def closed_with(conn: Conn, ref: AttemptRef) -> str | None:
    value: str | None = await conn.fetchval(CLOSED_WITH, ref.job_id, ref.run_lease, ref.claim_id)
    return value


async def write_done(
    conn: Conn, ref: AttemptRef, *, state: str, attempt: int, payload: Payload | None
) -> None:
    await conn.execute(WRITE_DONE, ref.job_id, ref.run_lease, state, attempt, payload)


async def write_deferred(
    conn: Conn,
    ref: AttemptRef,
    *,
    state: str,
    attempt: int,
    run_at: datetime,
    attempted_at: datetime | None,
    payload: Payload | None,
) -> None:
    await conn.execute(
        WRITE_DEFERRED, ref.job_id, ref.run_lease, state, attempt, run_at, attempted_at, payload
    )


async def write_dlq(
    conn: Conn,
    ref: AttemptRef,
    *,
    attempt: int,
    attempted_at: datetime | None,
    payload: Payload | None,
    reason: str,
) -> None:
    await conn.execute(WRITE_DLQ, ref.job_id, ref.run_lease, attempt, attempted_at, payload, reason)


class _Stale(Exception):
    """Roll back the transaction: the attempt was already resolved."""


async def complete_general(
    conn: Conn,
    record: AttemptRecord,
    *,
    keyed: bool,
    outputs_supported: bool,
) -> Ended:
    """Complete on the general path, inserting staged follow-ups in the same transaction
    (``keyed``: the job has a unique key, which completion may release)."""
    if record.poisoned is not None:
        return await fail(
            conn,
            record,
            Failure.TERMINAL,
            f"staged follow-up failed: {record.poisoned}",
            outputs_supported=outputs_supported,
        )
    item = GeneralCompletion(record.ref, record.attempt, record.output_text, keyed)
    async with conn.transaction():
        await lock_attempt(conn, record.ref)
        written = await general_writes.write_many(conn, [item], outputs_supported=outputs_supported)
        outcome = written[record.ref.key]
        if outcome is Outcome.WRITTEN and record.staged:
            await enqueue.insert_jobs(conn, record.staged, now=datetime.now(UTC))
    if outcome is not Outcome.WRITTEN:
        return Ended(outcome)  # nothing was written
    return Ended(Outcome.WRITTEN, JobState.COMPLETED)


async def fail(
    conn: Conn,
    record: AttemptRecord,
    failure: Failure,
    message: str,
    *,
    outputs_supported: bool,
    retry_in: float | None = None,
    now: datetime | None = None,
    closure: str | None = None,
    dlq_reason: str | None = None,
    traceback: list[str] | None = None,
) -> Ended:
    """Record a failed attempt as ``plan_failure`` decides: an error entry that keeps the
    output (and ``traceback``, a handler's bounded frames), then a retry, a cancel, the DLQ or
    failed."""
    del outputs_supported  # a failed attempt's output goes into its error entry, not a column
    now = now or datetime.now(UTC)
    plan = plan_failure(
        record, failure, message, now=now, retry_in=retry_in, closure=closure, dlq_reason=dlq_reason
    )
    try:
        async with conn.transaction():
            await lock_attempt(conn, record.ref)
            opened = await close_if_open(conn, record.ref, plan.closure)
            if opened is None:
                raise _Stale
            progress = record.progress if record.progress is not None else opened.stored_progress
            payload: Payload | None
            if plan.error_entry:
                entry = error_entry(
                    plan.message,
                    record.attempt,
                    now,
                    terminal=plan.terminal,
                    output_text=record.output_text,
                    traceback=traceback,
                )
                payload = append_error(opened.payload, entry, progress=progress)
            else:
                payload = with_progress(opened.payload, progress)
            ended = await _write_failed(conn, record, plan, opened.dlq_enabled, payload)
            if ended.state in TERMINAL_STATES:
                await _release_key(conn, opened, ended.state)
    except _Stale:
        return await _stale_or_already(conn, record.ref)
    return ended


async def _write_failed(
    conn: Conn,
    record: AttemptRecord,
    plan: FailurePlan,
    dlq_enabled: bool,
    payload: Payload | None,
) -> Ended:
    kept = record.output_text is not None
    if plan.state is JobState.RETRYABLE:
        assert plan.run_at is not None
        await write_deferred(
            conn,
            record.ref,
            state=JobState.RETRYABLE,
            attempt=record.attempt,
            run_at=plan.run_at,
            attempted_at=record.attempted_at,
            payload=payload,
        )
        return Ended(Outcome.WRITTEN, JobState.RETRYABLE, output_kept=kept)
    if plan.state is JobState.FAILED and dlq_enabled:
        await write_dlq(
            conn,
            record.ref,
            attempt=record.attempt,
            attempted_at=record.attempted_at,
            payload=payload,
            reason=plan.dlq_reason,
        )
        return Ended(Outcome.WRITTEN, JobState.FAILED, dlq_reason=plan.dlq_reason, output_kept=kept)
    await write_done(conn, record.ref, state=plan.state, attempt=record.attempt, payload=payload)
    return Ended(Outcome.WRITTEN, plan.state, output_kept=kept)


async def snooze(
    conn: Conn, record: AttemptRecord, seconds: float, *, closure: str = "snoozed"
) -> Ended:
    """Give the attempt back and run again later; no error entry, the output is discarded."""
    try:
        async with conn.transaction():
            await lock_attempt(conn, record.ref)
            opened = await close_if_open(conn, record.ref, closure)
            if opened is None:
                raise _Stale
            progress = record.progress if record.progress is not None else opened.stored_progress
            await write_deferred(
                conn,
                record.ref,
                state=JobState.SCHEDULED,
                attempt=record.attempt - 1,
                run_at=datetime.now(UTC) + timedelta(seconds=seconds),
                attempted_at=record.attempted_at,
                payload=with_progress(opened.payload, progress),
            )
    except _Stale:
        return await _stale_or_already(conn, record.ref)
    return Ended(Outcome.WRITTEN, JobState.SCHEDULED)


async def park(conn: Conn, record: AttemptRecord, callback_id: str) -> Ended | None:
    """WaitForCallback: mark the attempt waiting. None means no such callback was registered."""
    async with conn.transaction():
        await lock_attempt(conn, record.ref)
        parked = await conn.fetchval(PARK, record.ref.job_id, record.ref.run_lease)
    if parked == callback_id:
        return Ended(Outcome.WRITTEN, JobState.WAITING_EXTERNAL)
    return None


async def _release_key(conn: Conn, opened: OpenAttempt, state: JobState) -> None:
    """A keyed job that ended lets its key go (unless it holds it in ``state`` too)."""
    if opened.row["unique_key"] is not None:
        await unique.release(conn, opened.row["job_id"], state)


async def _stale_or_already(conn: Conn, ref: AttemptRef) -> Ended:
    return Ended(outcome_of_rewrite(await closed_with(conn, ref)))
