"""Callbacks: registration by a running attempt, and the external calls that answer them.

External calls are guarded by the callback id and, when given, the run lease. They go through
the same transitions as the runtime (``storage.transitions``), so an external completion is
one more lease-guarded completion: it stores its own validated output, never the handler's.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import asyncpg

from storage import finalize, transitions
from storage.errors import CallbackNotFound, OutputError, StaleAttempt
from storage.finalize import AttemptRef, Outcome
from storage.codec import JsonDecodeMismatch, decode_value
from storage.output import encode_output

REGISTER = """
INSERT INTO attempt_state AS s (job_id, run_lease, claim_id, callback_id, callback_timeout_at,
                                heartbeat_at)
SELECT $1, $2, $3, $4, now() + make_interval(secs => $5), now()
 WHERE NOT EXISTS (SELECT 1 FROM attempt_closures c WHERE c.job_id = $1 AND c.run_lease = $2)
ON CONFLICT (job_id, run_lease) DO UPDATE
   SET callback_id = excluded.callback_id, callback_timeout_at = excluded.callback_timeout_at,
       callback_resolved = false, callback_result = NULL
RETURNING callback_id
"""

# The attempt a callback belongs to, locked for this transaction.
LOOKUP = """
SELECT s.job_id, s.run_lease, s.claim_id, s.state, s.callback_resolved, r.kind, r.queue,
       r.attempt + 1 AS attempt, r.max_attempts, r.attempted_at
  FROM attempt_state s
  JOIN ready_entries r ON r.job_id = s.job_id AND r.run_lease = s.run_lease
 WHERE s.callback_id = $1
"""

HEARTBEAT = """
UPDATE attempt_state SET callback_timeout_at = now() + make_interval(secs => $2),
                         heartbeat_at = now()
 WHERE callback_id = $1 AND NOT callback_resolved
RETURNING job_id
"""

RESOLVE = """
UPDATE attempt_state SET callback_resolved = true, callback_result = $2, state = 'running'
 WHERE callback_id = $1 AND NOT callback_resolved
RETURNING job_id, run_lease
"""
NOTIFY = "SELECT pg_notify('awa_callback_' || current_schema(), $1)"

MARK_WAITING = "UPDATE attempt_state SET state = 'waiting_external' WHERE callback_id = $1"
POLL = "SELECT callback_resolved, callback_result FROM attempt_state WHERE callback_id = $1"
CONSUME = """
UPDATE attempt_state SET callback_id = NULL, callback_resolved = false, callback_result = NULL,
                         callback_timeout_at = NULL
 WHERE callback_id = $1
"""


@dataclass(frozen=True)
class ExternalCompletion:
    """Options for completing a waiting job from outside. The payload is never stored."""

    output: Any = None
    run_lease: int | None = None
    expected_kind: str | None = None
    expected_type: type | None = None

    def output_for(self, kind: str, output_type: type, value: Any) -> ExternalCompletion:
        """Record ``value`` as ``output_type``; the completion fails unless the job is ``kind``."""
        return replace(self, output=value, expected_kind=kind, expected_type=output_type)


@dataclass(frozen=True)
class CallbackAttempt:
    ref: AttemptRef
    kind: str
    queue: str
    attempt: int
    max_attempts: int
    record: transitions.AttemptRecord


async def register(conn: asyncpg.Connection, ref: AttemptRef, timeout_seconds: float) -> str | None:
    """Materialize the attempt's state with a fresh callback id; None when the attempt is closed."""
    callback_id = str(uuid.uuid4())
    async with conn.transaction():
        await finalize.lock_claims(conn, [ref.claim_id])
        value: str | None = await conn.fetchval(
            REGISTER, ref.job_id, ref.run_lease, ref.claim_id, callback_id, timeout_seconds
        )
    return value


async def _locked_attempt(
    conn: asyncpg.Connection, callback_id: str, run_lease: int | None
) -> CallbackAttempt:
    """Inside a transaction: find and lock the callback's attempt, or raise."""
    row = await conn.fetchrow(LOOKUP, callback_id)
    if row is None or row["callback_resolved"]:
        raise CallbackNotFound(
            f"No job is waiting for callback {callback_id} (unknown or already resolved)."
        )
    if run_lease is not None and row["run_lease"] != run_lease:
        raise StaleAttempt(
            f"Callback {callback_id} belongs to run lease {row['run_lease']} of job "
            f"{row['job_id']}, not {run_lease}: the attempt you saw has ended."
        )
    ref = AttemptRef(row["job_id"], row["run_lease"], row["claim_id"])
    await finalize.lock_claims(conn, [ref.claim_id])
    record = transitions.AttemptRecord(
        ref=ref,
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        attempted_at=row["attempted_at"],
    )
    return CallbackAttempt(
        ref, row["kind"], row["queue"], row["attempt"], row["max_attempts"], record
    )


def validate_external_output(opts: ExternalCompletion, declared: type | None) -> str | None:
    """The same validation as ``set_output``, before anything is written.

    External callers speak JSON, so for a kind with a declared type a plain JSON value is
    accepted when it decodes as that type; an instance of another class is refused.
    """
    expected = opts.expected_type or declared
    value = opts.output
    if expected is not None and value is not None and not isinstance(value, expected):
        if isinstance(value, dict | list | str | int | float | bool):
            try:
                decode_value(value, expected)
            except JsonDecodeMismatch as exc:
                raise OutputError(
                    "wrong_type", f"output does not fit {expected.__name__}: {exc.detail}"
                ) from None
            expected = None
    return encode_output(value, expected_type=expected)


async def complete_external(
    conn: asyncpg.Connection,
    callback_id: str,
    opts: ExternalCompletion,
    *,
    outputs_supported: bool,
    declared: Callable[[str], type | None],
) -> tuple[int, str | None, bool]:
    """Complete the callback's job with ``opts.output``.

    Returns (job id, stored output text, whether an output was dropped for lack of columns).
    """
    async with conn.transaction():
        attempt = await _locked_attempt(conn, callback_id, opts.run_lease)
        if opts.expected_kind is not None and attempt.kind != opts.expected_kind:
            raise OutputError(
                "wrong_type",
                f"Job {attempt.ref.job_id} is of kind {attempt.kind!r}, not "
                f"{opts.expected_kind!r}; nothing was completed.",
            )
        text = validate_external_output(opts, declared(attempt.kind))
        dropped = text is not None and not outputs_supported
        stored = None if dropped else text
        ended = await transitions.complete_general(
            conn,
            replace(attempt.record, output_text=stored),
            outputs_supported=outputs_supported,
            closure="completed_external",
        )
        if ended.outcome is not Outcome.WRITTEN:
            raise CallbackNotFound(f"Callback {callback_id} was resolved by someone else first.")
    return attempt.ref.job_id, stored, dropped


async def fail_external(
    conn: asyncpg.Connection, callback_id: str, error: str, *, run_lease: int | None = None
) -> int:
    """Fail the callback's job terminally with ``error`` in its history (DLQ when enabled)."""
    async with conn.transaction():
        attempt = await _locked_attempt(conn, callback_id, run_lease)
        await transitions.fail(
            conn,
            attempt.record,
            transitions.Failure.TERMINAL,
            error,
            outputs_supported=False,
            closure="failed_external",
        )
    return attempt.ref.job_id


async def retry_external(
    conn: asyncpg.Connection, callback_id: str, *, run_lease: int | None = None
) -> int:
    """Give the attempt back and make the job available again now."""
    async with conn.transaction():
        attempt = await _locked_attempt(conn, callback_id, run_lease)
        await transitions.snooze(conn, attempt.record, 0, closure="retried_external")
    return attempt.ref.job_id


async def heartbeat(conn: asyncpg.Connection, callback_id: str, timeout_seconds: float) -> int:
    """Push the callback's timeout out by ``timeout_seconds`` from now."""
    job_id: int | None = await conn.fetchval(HEARTBEAT, callback_id, timeout_seconds)
    if job_id is None:
        raise CallbackNotFound(
            f"No job is waiting for callback {callback_id} (unknown or already resolved)."
        )
    return job_id


async def resolve(conn: asyncpg.Connection, callback_id: str, payload: Any) -> int:
    """Hand ``payload`` to a handler waiting in ``wait_for_callback``."""
    async with conn.transaction():
        row = await conn.fetchrow(RESOLVE, callback_id, payload)
        if row is None:
            raise CallbackNotFound(
                f"No job is waiting for callback {callback_id} (unknown or already resolved)."
            )
        await conn.execute(NOTIFY, callback_id)
    job_id: int = row["job_id"]
    return job_id
