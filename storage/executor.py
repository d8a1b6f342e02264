"""The executor: runs one claimed attempt and sends its end through the right transition.

The attempt's output slot is sealed when the handler returns; the sealed text is then owned by
the finalizer (the batcher on the compact path) until its transition commits.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from storage import transitions
from storage.claim import ClaimedJob
from storage.codec import JsonDecodeMismatch, decode_value
from storage.db import Conn
from storage.errors import StaleAttempt, TerminalError
from storage.events import JobEvent
from storage.finalize import AttemptRef, CompactCompletion, Outcome, utf8_size
from storage.job import Job
from storage.models import JobRow, JobState
from storage.output import OutputSlot
from storage.payload import dispatch_errors, takes_general_path
from storage.results import Cancel, RetryAfter, Snooze, WaitForCallback
from storage.supervise import retry_transient
from storage.transitions import AttemptRecord, Ended, Failure

if TYPE_CHECKING:
    from storage.client import Client, TaskSpec

Handler = Callable[[Job[Any]], Awaitable[Any]]


@dataclass(frozen=True)
class _Completed:
    pass


@dataclass(frozen=True)
class _Failed:
    failure: Failure
    message: str
    retry_in: float | None = None


def build_job(claimed: ClaimedJob, spec: TaskSpec | None, client: Client) -> Job[Any]:
    payload = claimed.payload or {}
    args = claimed.args
    if spec is not None and spec.args_type is not None:
        args = decode_value(claimed.args, spec.args_type)
    return Job(
        id=claimed.job_id,
        kind=claimed.kind,
        queue=claimed.queue,
        args=args,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        priority=claimed.priority,
        run_lease=claimed.run_lease,
        tags=list(payload.get("tags") or []),
        metadata=dict(payload.get("metadata") or {}),
        errors=dispatch_errors(payload),
        progress=payload.get("progress"),
        _slot=OutputSlot(expected_type=spec.output_type if spec else None),
        _services=client,
        _claim_id=claimed.claim_id,
    )


async def run_attempt(client: Client, claimed: ClaimedJob, job_holder: list[Job[Any]]) -> Ended:
    """Run the handler for ``claimed`` and finalize its attempt. Never raises for handler errors."""
    spec = client.task_spec(claimed.kind)
    ref = AttemptRef(claimed.job_id, claimed.run_lease, claimed.claim_id)
    record = AttemptRecord(
        ref=ref,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        attempted_at=claimed.claimed_at,
    )
    if spec is None:
        missing = _Failed(Failure.TERMINAL, f"no handler is registered for kind {claimed.kind!r}")
        return await _finish(client, claimed, record, missing)
    try:
        job = build_job(claimed, spec, client)
    except JsonDecodeMismatch as exc:
        mismatch = _Failed(Failure.TERMINAL, f"args do not match {spec.args_type_name}: {exc}")
        return await _finish(client, claimed, record, mismatch)
    job_holder.append(job)
    client.emit(JobEvent("started", claimed.job_id, claimed.kind, claimed.queue))
    verdict = await _call_handler(spec.handler, job)
    if isinstance(verdict, StaleAttempt):
        _drop(client, claimed, job._slot.seal(), "abandoned")
        return Ended(Outcome.STALE)
    record.output_text = job._slot.seal()
    record.progress = job.progress if job._progress_dirty else None
    record.staged = job._staged
    record.poisoned = job._poisoned
    return await _finish(client, claimed, record, verdict)


async def _call_handler(
    handler: Handler, job: Job[Any]
) -> _Completed | _Failed | Snooze | WaitForCallback | StaleAttempt:
    try:
        result = handler(job)
        if inspect.isawaitable(result):
            result = await result
    except StaleAttempt as exc:
        return exc
    except asyncio.CancelledError:
        raise
    except TerminalError as exc:
        return _Failed(Failure.TERMINAL, _describe(exc))
    except Exception as exc:
        return _Failed(Failure.ERROR, _describe(exc))
    if isinstance(result, RetryAfter):
        return _Failed(
            Failure.RETRY_AFTER, f"retry requested after {result.seconds:g}s", result.seconds
        )
    if isinstance(result, Cancel):
        return _Failed(Failure.CANCEL, result.reason)
    if isinstance(result, Snooze | WaitForCallback):
        return result
    return _Completed()  # None, or any other return value, which is discarded as in Awa


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


async def _finish(
    client: Client,
    claimed: ClaimedJob,
    record: AttemptRecord,
    verdict: _Completed | _Failed | Snooze | WaitForCallback,
) -> Ended:
    sealed = record.output_text
    if isinstance(verdict, _Completed):
        ended = await _complete(client, claimed, record)
    elif isinstance(verdict, Snooze):
        seconds = verdict.seconds
        ended = await _write(client, record, lambda conn: transitions.snooze(conn, record, seconds))
        _drop(client, claimed, sealed, "outcome")
        sealed = None
    else:
        ended = await _fail(client, record, verdict)
        if ended.state is JobState.WAITING_EXTERNAL:
            _drop(client, claimed, sealed, "outcome")
            sealed = None
    if sealed is not None and record.output_text is not None:
        if ended.outcome is Outcome.WRITTEN and (
            ended.state is JobState.COMPLETED or ended.output_kept
        ):
            outcome = "completed" if ended.state is JobState.COMPLETED else "failed"
            client.metrics.recorded(claimed.kind, claimed.queue, outcome, utf8_size(sealed))
        elif ended.outcome is Outcome.STALE:
            _drop(client, claimed, sealed, "abandoned")
    completed_output = record.output_text if ended.state is JobState.COMPLETED else None
    client.emit_ended(claimed, ended, completed_output)
    return ended


def _drop(client: Client, claimed: ClaimedJob, output: str | None, reason: str) -> None:
    if output is not None:
        client.metrics.dropped(claimed.kind, claimed.queue, reason)


async def _write(
    client: Client, record: AttemptRecord, transition: Callable[[Conn], Awaitable[Ended]]
) -> Ended:
    """Run one finalize transition on a pooled connection, retrying transient errors (a killed
    connection, a restarting server) as the completion flush does. A retry after an uncertain
    commit is safe: the ``(job_id, run_lease)`` guard turns it into "already written"."""

    async def attempt() -> Ended:
        async with client.pool.acquire() as conn:
            return await transition(conn)

    return await retry_transient(
        f"finalize of job {record.ref.job_id}", attempt, stop=client.pool.is_closing
    )


async def _fail(client: Client, record: AttemptRecord, verdict: _Failed | WaitForCallback) -> Ended:
    async def transition(conn: Conn) -> Ended:
        failed = verdict
        if isinstance(failed, WaitForCallback):
            # Parking again after an uncertain commit matches the same row: idempotent.
            parked = await transitions.park(conn, record, failed.token.callback_id)
            if parked is not None:
                return parked
            failed = _Failed(
                Failure.CONTRACT,
                "wait_for_callback_contract_violation: WaitForCallback returned without a "
                "registered callback",
            )
        return await transitions.fail(
            conn,
            record,
            failed.failure,
            failed.message,
            outputs_supported=await client.outputs_supported(),
            retry_in=failed.retry_in,
        )

    return await _write(client, record, transition)


async def _complete(client: Client, claimed: ClaimedJob, record: AttemptRecord) -> Ended:
    supported = await retry_transient(
        "output column probe", client.outputs_supported, stop=client.pool.is_closing
    )
    if record.output_text is not None and not supported:
        _drop(client, claimed, record.output_text, "schema_missing")
        record.output_text = None
    if client.has_completed_specs(claimed.kind) and record.poisoned is None:
        try:
            record.staged = [*record.staged, *client.completed_follow_ups(_completed_row(claimed))]
        except Exception as exc:
            record.poisoned = f"completed spec failed: {_describe(exc)}"
    general = (
        bool(record.staged)
        or record.poisoned is not None
        or takes_general_path(claimed.payload, claimed.unique_key)
    )
    if general:
        return await _write(
            client,
            record,
            lambda conn: transitions.complete_general(conn, record, outputs_supported=supported),
        )
    outcome = await client.batcher.submit(
        CompactCompletion(
            ref=record.ref,
            lane_seq=claimed.lane_seq,
            attempt=claimed.attempt,
            output_text=record.output_text,
            has_state=client.has_attempt_state(record.ref),
        )
    )
    return Ended(outcome, JobState.COMPLETED if outcome is not Outcome.STALE else None)


def _completed_row(claimed: ClaimedJob) -> JobRow:
    """The row a completion spec sees: as completed, with no output."""
    payload = claimed.payload or {}
    return JobRow(
        id=claimed.job_id,
        kind=claimed.kind,
        queue=claimed.queue,
        state=JobState.COMPLETED,
        args=claimed.args,
        priority=claimed.priority,
        attempt=claimed.attempt,
        max_attempts=claimed.max_attempts,
        run_lease=claimed.run_lease,
        run_at=claimed.run_at,
        created_at=claimed.created_at,
        attempted_at=claimed.claimed_at,
        tags=list(payload.get("tags") or []),
        metadata=dict(payload.get("metadata") or {}),
        errors=dispatch_errors(payload),
    )
