"""Callbacks: registration by a running attempt, and the external calls that answer them.

External calls are guarded by the callback id and, when given, the run lease. They go through
the same guard as the runtime (``storage.finalize.attempt_writes``; a completion through
``storage.finalize.general_writes``, whose statement also checks the callback), so an external
completion is one more lease-guarded completion: it stores its own validated output, never
the handler's. Each one notifies the callback's channel, so a handler still waiting in
``wait_for_callback`` learns at once that its attempt ended (its own completion is stale).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from storage.db.pool import Conn
from storage.db.sql import LOCK_CALLBACK_ATTEMPT, NOTIFY_CALLBACK
from storage.finalize import attempt_writes, general_writes
from storage.finalize.rules import Failure
from storage.finalize.types import AttemptRecord, AttemptRef, GeneralCompletion, Outcome
from storage.insert import enqueue
from storage.ops.audit import Recorder
from storage.ops.declared_output import (
    DeclaredOutput,
    LocalModels,
    declaration,
    external_output_text,
)
from storage.read import one_job
from storage.values.errors import (
    CallbackNotFound,
    InvalidJobState,
    OutputError,
    StaleAttempt,
    UnstorableText,
)
from storage.values.models import JobRow
from storage.values.names import unstorable
from storage.values.payload import with_progress

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

LOOKUP = """
SELECT s.state, s.callback_resolved FROM attempt_state s WHERE s.callback_id = $1
"""

HEARTBEAT = """
UPDATE attempt_state s SET callback_timeout_at = now() + make_interval(secs => $2),
                           heartbeat_at = now()
  FROM ready_entries r
 WHERE s.callback_id = $1 AND NOT s.callback_resolved
   AND r.job_id = s.job_id AND r.run_lease = s.run_lease
RETURNING s.job_id, r.queue
"""

RESOLVE = """
UPDATE attempt_state SET callback_resolved = true, callback_result = $2, state = 'running'
 WHERE callback_id = $1 AND NOT callback_resolved
RETURNING job_id, run_lease
"""

# A sequential wait marks the attempt waiting only while its callback is unanswered: an answer
# that arrived first must leave it running, or neither heartbeat rescue (running attempts) nor
# the callback timeout (cleared when consumed) would ever cover it again.
MARK_WAITING = """
UPDATE attempt_state SET state = 'waiting_external'
 WHERE callback_id = $1 AND NOT callback_resolved
"""
POLL = "SELECT callback_resolved, callback_result FROM attempt_state WHERE callback_id = $1"
# The handler took the answer: the attempt runs on, and the payload is dropped from storage.
CONSUME = """
UPDATE attempt_state SET callback_id = NULL, callback_resolved = false, callback_result = NULL,
                         callback_timeout_at = NULL, state = 'running', heartbeat_at = now()
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

    def precheck(self) -> None:
        """The checks that need no database (JSON, size, ``output_for``'s type), so a bad
        output fails before a connection is taken. The kind's declaration is checked later."""
        external_output_text(self.output, DeclaredOutput(None, self.expected_type))


@dataclass(frozen=True)
class CallbackAttempt:
    ref: AttemptRef
    kind: str
    queue: str
    attempt: int
    max_attempts: int
    record: AttemptRecord
    state: str
    keyed: bool
    declared_output: dict[str, Any] | None


async def register(conn: Conn, ref: AttemptRef, timeout_seconds: float) -> str | None:
    """Materialize the attempt's state with a fresh callback id; None when the attempt is closed."""
    callback_id = str(uuid.uuid4())
    async with conn.transaction():
        await attempt_writes.lock_attempt(conn, ref)
        value: str | None = await conn.fetchval(
            REGISTER, ref.job_id, ref.run_lease, ref.claim_id, callback_id, timeout_seconds
        )
    return value


def _checked_id(callback_id: str) -> str:
    """An id PostgreSQL cannot even compare (a NUL, a lone surrogate) names no callback."""
    if not isinstance(callback_id, str) or unstorable(callback_id) is not None:
        raise CallbackNotFound("No job is waiting for this callback id (it cannot be stored).")
    return callback_id


async def _locked_attempt(
    conn: Conn, callback_id: str, run_lease: int | None, *, recheck: bool = True
) -> CallbackAttempt:
    """Inside a transaction: find and lock the callback's attempt, or raise. With
    ``recheck``, the callback is read again under the lock (its state, and that it is still
    waiting); without, the caller's guarded write checks that itself."""
    row = await conn.fetchrow(LOCK_CALLBACK_ATTEMPT, _checked_id(callback_id))
    state = None if row is None else row["state"]
    if row is not None and recheck:
        now = await conn.fetchrow(LOOKUP, callback_id)  # as of now that the attempt is locked
        state = None if now is None or now["callback_resolved"] else now["state"]
    if row is None or state is None:
        raise CallbackNotFound(
            f"No job is waiting for callback {callback_id} (unknown or already resolved)."
        )
    if run_lease is not None and row["run_lease"] != run_lease:
        raise StaleAttempt(
            f"Callback {callback_id} belongs to run lease {row['run_lease']} of job "
            f"{row['job_id']}, not {run_lease}: the attempt you saw has ended."
        )
    ref = AttemptRef(row["job_id"], row["run_lease"], row["claim_id"])
    record = AttemptRecord(
        ref=ref,
        attempt=row["attempt"],
        max_attempts=row["max_attempts"],
        attempted_at=row["attempted_at"],
    )
    return CallbackAttempt(
        ref,
        row["kind"],
        row["queue"],
        row["attempt"],
        row["max_attempts"],
        record,
        state,
        row["keyed"],
        row["declared_output"],
    )


async def complete_external(
    conn: Conn,
    callback_id: str,
    opts: ExternalCompletion,
    *,
    outputs_supported: bool,
    local_models: LocalModels,
    audit: Recorder,
) -> tuple[JobRow, str | None, bool]:
    """Complete the callback's job with ``opts.output``, checked against the job kind's
    declared output (``storage.ops.declared_output``); a refused output raises ``OutputError`` and
    leaves the job waiting.

    Two statements in one transaction: find and lock the attempt (with its kind's
    declaration), then the guarded completion, which also notifies the callback's channel.
    Returns (the completed job as ``get_job`` would read it, stored output text, whether an
    output was dropped for lack of columns).
    """
    async with conn.transaction():
        attempt = await _locked_attempt(conn, callback_id, opts.run_lease, recheck=False)
        if opts.expected_kind is not None and attempt.kind != opts.expected_kind:
            raise OutputError(
                "wrong_type",
                f"Job {attempt.ref.job_id} is of kind {attempt.kind!r}, not "
                f"{opts.expected_kind!r}; nothing was completed.",
            )
        declared = declaration(attempt.declared_output, local_models(attempt.kind))
        if opts.expected_type is not None:
            declared = replace(declared, model=opts.expected_type)
        text = external_output_text(opts.output, declared)
        dropped = text is not None and not outputs_supported
        stored = None if dropped else text
        item = GeneralCompletion(attempt.ref, attempt.attempt, stored, attempt.keyed)
        row = await general_writes.write_external(
            conn, item, callback_id, outputs_supported=outputs_supported
        )
        if row is None:  # a handler waiting on it learns it is stale from the notice
            raise CallbackNotFound(f"Callback {callback_id} was resolved by someone else first.")
        job_id, queue = attempt.ref.job_id, attempt.queue
        await audit.job(conn, "complete_external", job_id, queue, output_text=stored)
    return one_job.completed_row(row, attempt.record.attempted_at, stored), stored, dropped


async def fail_external(
    conn: Conn, callback_id: str, error: str, *, run_lease: int | None = None, audit: Recorder
) -> int:
    """Fail the callback's job terminally with ``error`` in its history (DLQ when enabled)."""
    reason = unstorable(error) if isinstance(error, str) else "no text"
    if reason is not None:
        raise UnstorableText(f"The error text contains {reason}, so it cannot be stored.")
    async with conn.transaction():
        attempt = await _locked_attempt(conn, callback_id, run_lease)
        ended = await attempt_writes.fail(
            conn,
            attempt.record,
            Failure.TERMINAL,
            error,
            outputs_supported=False,
            closure="failed_external",
        )
        if ended.outcome is not Outcome.WRITTEN:
            raise CallbackNotFound(f"Callback {callback_id} was resolved by someone else first.")
        await conn.execute(NOTIFY_CALLBACK, callback_id)
        await audit.job(conn, "fail_external", attempt.ref.job_id, attempt.queue)
    return attempt.ref.job_id


async def retry_external(
    conn: Conn, callback_id: str, *, run_lease: int | None = None, audit: Recorder
) -> int:
    """Close the waiting attempt and make the job available again now, at attempt 0.

    Only a parked attempt (``waiting_external``) can be retried: retrying one whose handler is
    still running would dispatch the job twice at once.
    """
    async with conn.transaction():
        attempt = await _locked_attempt(conn, callback_id, run_lease)
        if attempt.state != "waiting_external":
            raise InvalidJobState(
                attempt.ref.job_id, attempt.state, "retried externally", "waiting_external"
            )
        opened = await attempt_writes.close_if_open(conn, attempt.ref, "retried_external")
        if opened is None:
            raise CallbackNotFound(f"Callback {callback_id} was resolved by someone else first.")
        payload = with_progress(opened.payload, opened.stored_progress)
        await enqueue.requeue_waiting(
            conn, attempt.ref.job_id, attempt.ref.run_lease, attempt.record.attempted_at, payload
        )
        await conn.execute(NOTIFY_CALLBACK, callback_id)
        await audit.job(conn, "retry_external", attempt.ref.job_id, attempt.queue)
    return attempt.ref.job_id


async def heartbeat(
    conn: Conn, callback_id: str, timeout_seconds: float, *, audit: Recorder
) -> int:
    """Push the callback's timeout out by ``timeout_seconds`` from now."""
    async with conn.transaction():
        row = await conn.fetchrow(HEARTBEAT, _checked_id(callback_id), timeout_seconds)
        if row is None:
            raise CallbackNotFound(
                f"No job is waiting for callback {callback_id} (unknown or already resolved)."
            )
        job_id: int = row["job_id"]
        await audit.job(conn, "heartbeat_callback", job_id, row["queue"])
    return job_id


async def resolve(conn: Conn, callback_id: str, payload: Any) -> int:
    """Hand ``payload`` to a handler waiting in ``wait_for_callback``."""
    async with conn.transaction():
        row = await conn.fetchrow(RESOLVE, _checked_id(callback_id), payload)
        if row is None:
            raise CallbackNotFound(
                f"No job is waiting for callback {callback_id} (unknown or already resolved)."
            )
        await conn.execute(NOTIFY_CALLBACK, callback_id)
    job_id: int = row["job_id"]
    return job_id
