"""How an attempt ends: the executor's rules, applied on the general (per-job) path.

Each function runs in its own transaction, or in a savepoint of the caller's (advisory locks
are re-entrant within a transaction, so a caller may already hold the attempt's lock).

ADR-048's table "Where an attempt's output goes", row by row:
completed -> the job's output (here: ``done_entries.output``; the compact path is in
``finalize.complete_compact``); every failure the executor records (error, Cancel, RetryAfter
with an output, exhaustion, poisoning, the WaitForCallback contract violation) -> the output
key of that attempt's error entry; Snooze and WaitForCallback -> discarded (the caller counts
them).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from storage import enqueue, finalize, unique
from storage.db import Conn
from storage.finalize import AttemptRef, Outcome
from storage.models import TERMINAL_STATES, JobState
from storage.payload import append_error, error_entry, with_progress, without_progress

MAX_BACKOFF_SECONDS = 3600.0
PARK = """
UPDATE attempt_state s SET state = 'waiting_external'
 WHERE s.job_id = $1 AND s.run_lease = $2 AND s.callback_id IS NOT NULL
   AND NOT s.callback_resolved
   AND NOT EXISTS (SELECT 1 FROM attempt_closures c WHERE c.job_id = $1 AND c.run_lease = $2)
RETURNING s.callback_id
"""


def backoff_seconds(attempt: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: 2^attempt seconds (capped at an hour), plus up to 25%."""
    base = min(2.0**attempt, MAX_BACKOFF_SECONDS)
    return base * (1 + (rng or random).random() * 0.25)


class Failure(StrEnum):
    """Kinds of recorded failure; each writes an error entry."""

    ERROR = "error"  # retryable unless attempts are exhausted
    TERMINAL = "terminal"  # TerminalError, poisoning
    CANCEL = "cancel"  # Cancel from the handler
    RETRY_AFTER = "retry_after"
    CONTRACT = "contract"  # WaitForCallback without a registered callback


@dataclass
class AttemptRecord:
    """What the executor knows about an attempt when it ends."""

    ref: AttemptRef
    attempt: int
    max_attempts: int
    attempted_at: datetime | None
    progress: Any = None
    output_text: str | None = None
    staged: list[enqueue.NewJob] = field(default_factory=list)
    poisoned: str | None = None


@dataclass(frozen=True)
class Ended:
    """The transition's effect: written (with the resulting state), already written, or stale."""

    outcome: Outcome
    state: JobState | None = None
    dlq_reason: str | None = None
    output_kept: bool = False


EXECUTOR_OUTCOMES = frozenset({"completed", "retried", "snoozed", *(f.value for f in Failure)})


class _Stale(Exception):
    """Roll back the transaction: the attempt was already resolved."""


async def complete_general(
    conn: Conn,
    record: AttemptRecord,
    *,
    outputs_supported: bool,
    closure: str = "completed",
) -> Ended:
    """Complete on the general path, inserting staged follow-ups in the same transaction."""
    if record.poisoned is not None:
        return await fail(
            conn,
            record,
            Failure.TERMINAL,
            f"staged follow-up failed: {record.poisoned}",
            outputs_supported=outputs_supported,
        )
    try:
        async with conn.transaction():
            await finalize.lock_attempt(conn, record.ref)
            opened = await finalize.close_if_open(conn, record.ref, closure)
            if opened is None:
                raise _Stale
            if record.staged:
                await enqueue.insert_jobs(conn, record.staged, now=datetime.now(UTC))
            payload = without_progress(opened.payload)
            await finalize.write_done(
                conn,
                record.ref,
                state=JobState.COMPLETED,
                attempt=record.attempt,
                payload=None if payload == opened.payload else payload,
                output_text=record.output_text,
                outputs_supported=outputs_supported,
            )
            await _release_key(conn, opened, JobState.COMPLETED)
    except _Stale:
        return await _stale_or_already(conn, record.ref)
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
) -> Ended:
    """Record a failed attempt: an error entry that keeps the output, then retry or end."""
    now = now or datetime.now(UTC)
    exhausted = record.attempt >= record.max_attempts
    retrying = failure in (Failure.ERROR, Failure.RETRY_AFTER) and not exhausted
    terminal = not retrying
    if exhausted and failure in (Failure.ERROR, Failure.RETRY_AFTER):
        message = f"{message} (max attempts {record.max_attempts} exhausted)"
    try:
        async with conn.transaction():
            await finalize.lock_attempt(conn, record.ref)
            outcome = closure or ("retried" if retrying else failure.value)
            opened = await finalize.close_if_open(conn, record.ref, outcome)
            if opened is None:
                raise _Stale
            progress = record.progress if record.progress is not None else opened.stored_progress
            if failure is Failure.RETRY_AFTER and retrying and record.output_text is None:
                payload = with_progress(opened.payload, progress)  # no entry without an output
            else:
                entry = error_entry(
                    message,
                    record.attempt,
                    now,
                    terminal=terminal,
                    output_text=record.output_text,
                )
                payload = append_error(opened.payload, entry, progress=progress)
            ended = await _place_failed(
                conn,
                record,
                opened,
                failure,
                payload,
                retrying,
                exhausted,
                retry_in,
                now,
                dlq_reason,
            )
            if ended.state in TERMINAL_STATES:
                await _release_key(conn, opened, ended.state)
    except _Stale:
        return await _stale_or_already(conn, record.ref)
    return ended


async def _place_failed(
    conn: Conn,
    record: AttemptRecord,
    opened: finalize.OpenAttempt,
    failure: Failure,
    payload: dict[str, Any] | None,
    retrying: bool,
    exhausted: bool,
    retry_in: float | None,
    now: datetime,
    dlq_reason: str | None,
) -> Ended:
    kept = record.output_text is not None
    if retrying:
        delay = retry_in if retry_in is not None else backoff_seconds(record.attempt)
        await finalize.write_deferred(
            conn,
            record.ref,
            state=JobState.RETRYABLE,
            attempt=record.attempt,
            run_at=now + timedelta(seconds=delay),
            attempted_at=record.attempted_at,
            payload=payload,
        )
        return Ended(Outcome.WRITTEN, JobState.RETRYABLE, output_kept=kept)
    if failure is Failure.CANCEL:
        await finalize.write_done(
            conn,
            record.ref,
            state=JobState.CANCELLED,
            attempt=record.attempt,
            payload=payload,
            output_text=None,
            outputs_supported=False,
        )
        return Ended(Outcome.WRITTEN, JobState.CANCELLED, output_kept=kept)
    if opened.dlq_enabled:
        reason = dlq_reason or {
            Failure.CONTRACT: "wait_for_callback_contract_violation",
            Failure.TERMINAL: "terminal_error",
        }.get(failure, "max_attempts_exhausted" if exhausted else "terminal_error")
        await finalize.write_dlq(
            conn,
            record.ref,
            attempt=record.attempt,
            attempted_at=record.attempted_at,
            payload=payload,
            reason=reason,
        )
        return Ended(Outcome.WRITTEN, JobState.FAILED, dlq_reason=reason, output_kept=kept)
    await finalize.write_done(
        conn,
        record.ref,
        state=JobState.FAILED,
        attempt=record.attempt,
        payload=payload,
        output_text=None,
        outputs_supported=False,
    )
    return Ended(Outcome.WRITTEN, JobState.FAILED, output_kept=kept)


async def snooze(
    conn: Conn, record: AttemptRecord, seconds: float, *, closure: str = "snoozed"
) -> Ended:
    """Give the attempt back and run again later; no error entry, the output is discarded."""
    try:
        async with conn.transaction():
            await finalize.lock_attempt(conn, record.ref)
            opened = await finalize.close_if_open(conn, record.ref, closure)
            if opened is None:
                raise _Stale
            progress = record.progress if record.progress is not None else opened.stored_progress
            await finalize.write_deferred(
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
        await finalize.lock_attempt(conn, record.ref)
        parked = await conn.fetchval(PARK, record.ref.job_id, record.ref.run_lease)
    if parked == callback_id:
        return Ended(Outcome.WRITTEN, JobState.WAITING_EXTERNAL)
    return None


async def _release_key(conn: Conn, opened: finalize.OpenAttempt, state: JobState) -> None:
    """A keyed job that ended lets its key go (unless it holds it in ``state`` too)."""
    if opened.row["unique_key"] is not None:
        await unique.release(conn, opened.row["job_id"], state)


async def _stale_or_already(conn: Conn, ref: AttemptRef) -> Ended:
    """A finalize retry that finds its own earlier commit reports it as already written.

    Only this attempt's executor writes the outcomes in ``EXECUTOR_OUTCOMES``; rescue, admin
    actions and external completers write others, which make this attempt stale.
    """
    closed = await finalize.closed_with(conn, ref)
    return Ended(Outcome.ALREADY if closed in EXECUTOR_OUTCOMES else Outcome.STALE)
