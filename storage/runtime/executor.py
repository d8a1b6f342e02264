"""The executor: runs one claimed attempt and has its end written.

The handler's verdict picks the write (the batcher for completions, compact or general;
``attempt_writes`` for failures, snoozes and completions with staged follow-ups;
``attempt_rules`` decides the path and what a failure becomes). The attempt's output slot is
sealed when the handler returns; the sealed text is then owned by the writer (the batcher for
a completion) until its write commits. It sees the client only as a
``WorkerHost``.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from types import CoroutineType
from typing import Any, Protocol

import orjson

from storage.db.pool import Conn, pooled
from storage.finalize import attempt_writes
from storage.finalize.rules import Failure, completes_on_general_path
from storage.finalize.types import (
    AttemptRecord,
    AttemptRef,
    CompactCompletion,
    Ended,
    GeneralCompletion,
    Outcome,
)
from storage.runtime import claim
from storage.runtime.claim import ClaimedJob
from storage.runtime.host import HandlerSpec, WorkerHost
from storage.runtime.job import AttemptEnd, Job
from storage.runtime.supervise import retry_transient
from storage.values.decode import JsonDecodeMismatch, decode_value
from storage.values.errors import StaleAttempt, TerminalError
from storage.values.events import EventName, JobEvent
from storage.values.models import JobRow, JobState
from storage.values.output import OutputSlot
from storage.values.payload import dispatch_errors, traceback_frames
from storage.values.results import Cancel, RetryAfter, Snooze, WaitForCallback


@dataclass(frozen=True)
class _Completed:
    pass


_COMPLETED = _Completed()  # no state: one instance serves every attempt


@dataclass(frozen=True)
class _Failed:
    failure: Failure
    message: str
    retry_in: float | None = None
    traceback: list[str] | None = None  # a handler's exception: its frames, bounded


def handler_job(claimed: ClaimedJob, spec: HandlerSpec | None, host: WorkerHost) -> Job[Any]:
    """The ``Job`` the handler receives for ``claimed`` (its args decoded to the task's type)."""
    args = claimed.args
    if spec is not None and spec.args_type is not None:
        args = decode_value(args, spec.args_type)
    payload = claimed.payload
    if payload is None:  # a plain job: its empty lists are made if the handler asks for them
        tags = metadata = errors = progress = None
    else:
        tags, metadata = list(payload.get("tags") or []), dict(payload.get("metadata") or {})
        errors, progress = dispatch_errors(payload), payload.get("progress")
    slot = OutputSlot(spec.output_type if spec is not None else None)
    # Positional, in Job's field order: built once per attempt.
    return Job(
        claimed.job_id,
        claimed.kind,
        claimed.queue,
        args,
        claimed.attempt,
        claimed.max_attempts,
        claimed.priority,
        claimed.run_lease,
        tags,
        metadata,
        errors,
        progress,
        slot,
        host,
        claimed.claim_id,
    )


class Tracker(Protocol):
    """Whoever runs the attempt (the runtime; ``work_one`` in tests), as the executor sees it."""

    job: Job[Any] | None  # set just before the handler runs
    completion: CompactCompletion  # set when a compact completion is queued for its flush

    def has_state(self) -> bool:
        """Whether the attempt has an ``attempt_state`` row (its completion must drop it)."""
        ...

    def flushed(self, item: CompactCompletion, outcome: Outcome | Exception) -> None:
        """A compact completion's flush committed (``outcome``) or failed for good (the error);
        ``compact_ended`` does the accounting the other ends get in ``run_attempt``."""
        ...


async def run_attempt(host: WorkerHost, claimed: ClaimedJob, tracker: Tracker) -> Ended | None:
    """Run the handler for ``claimed`` and finalize its attempt; never raises for handler
    errors. Returns the end once written, or None for a compact completion, whose end
    ``tracker.flushed`` hears after the flush: the attempt's task then ends at once instead
    of waiting for the flush (one wake-up per job fewer)."""
    spec = host.task_spec(claimed.kind)
    if spec is None:
        missing = _Failed(Failure.TERMINAL, f"no handler is registered for kind {claimed.kind!r}")
        return await _finish(host, claimed, attempt_record(claimed), missing, tracker)
    try:
        job = handler_job(claimed, spec, host)
    except JsonDecodeMismatch as exc:
        mismatch = _Failed(Failure.TERMINAL, f"args do not match {spec.args_type_name}: {exc}")
        return await _finish(host, claimed, attempt_record(claimed), mismatch, tracker)
    tracker.job = job
    if host.events.wants(claimed.kind, "started"):
        host.events.emit(JobEvent("started", claimed.job_id, claimed.kind, claimed.queue))
    verdict: _Completed | _Failed | Snooze | WaitForCallback
    timed = host.job_metrics.registry is not None  # off: no clock read, no call, per job
    began = time.perf_counter() if timed else 0.0
    try:
        result = spec.handler(job)
        if type(result) is CoroutineType or inspect.isawaitable(result):
            result = await result
    except StaleAttempt:
        _drop(host, claimed, job.finish().output_text, "abandoned")
        return _STALE
    except asyncio.CancelledError:
        raise
    except TerminalError as exc:
        verdict = _Failed(Failure.TERMINAL, _describe(exc), traceback=_frames(exc))
    except Exception as exc:
        verdict = _Failed(Failure.ERROR, _describe(exc), traceback=_frames(exc))
    else:
        verdict = _COMPLETED if result is None else _verdict(result)
    end = job.finish()
    if timed:
        host.job_metrics.ran(claimed.queue, claimed.kind, time.perf_counter() - began)
    if verdict is _COMPLETED and _compact_now(host, claimed, end):
        _submit_compact(host, claimed, end.output_text, tracker)
        return None
    record = attempt_record(claimed)
    record.output_text = end.output_text
    record.progress = end.progress
    if end.staged:
        record.staged = list(end.staged)
    record.poisoned = end.poisoned
    return await _finish(host, claimed, record, verdict, tracker)


def attempt_record(claimed: ClaimedJob) -> AttemptRecord:
    """What the executor knows about ``claimed`` before its handler ends."""
    ref = AttemptRef(claimed.job_id, claimed.run_lease, claimed.claim_id)
    return AttemptRecord(ref, claimed.attempt, claimed.max_attempts, claimed.claimed_at)


def _verdict(result: object) -> _Completed | _Failed | Snooze | WaitForCallback:
    """What a handler's (non-None) return value asks for."""
    if isinstance(result, RetryAfter):
        return _Failed(
            Failure.RETRY_AFTER, f"retry requested after {result.seconds:g}s", result.seconds
        )
    if isinstance(result, Cancel):
        return _Failed(Failure.CANCEL, result.reason)
    if isinstance(result, Snooze | WaitForCallback):
        return result
    return _COMPLETED  # any other return value is discarded, as in Awa


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _frames(exc: BaseException) -> list[str]:
    """The handler's frames of ``exc``: its traceback less the first frame, ``run_attempt``'s."""
    tb = exc.__traceback__
    return traceback_frames(tb.tb_next if tb is not None else None)


def _compact_now(host: WorkerHost, claimed: ClaimedJob, end: AttemptEnd) -> bool:
    """The common completion, decided without a coroutine: outputs known to be supported, no
    completion specs to build follow-ups from, nothing that needs the general path."""
    return (
        host.outputs_cached()
        and not host.has_completed_specs(claimed.kind)
        and not completes_on_general_path(
            end.staged, end.poisoned, claimed.payload, claimed.unique_key
        )
    )


def _submit_compact(
    host: WorkerHost, claimed: ClaimedJob, output_text: str | None, tracker: Tracker
) -> None:
    tracker.completion = CompactCompletion(
        claimed.job_id,
        claimed.run_lease,
        claimed.claim_id,
        claimed.lane_seq,
        output_text,
        tracker.has_state(),
    )
    host.batcher.submit_with(tracker)


def compact_ended(
    host: WorkerHost, claimed: ClaimedJob, output_text: str | None, outcome: Outcome
) -> Ended:
    """A compact completion's end once its flush committed: its output counted, listeners told."""
    ended = _COMPACT_ENDED[outcome]
    if output_text is not None:
        if outcome is Outcome.WRITTEN:
            host.metrics.recorded(claimed.kind, claimed.queue, "completed", output_text)
        elif outcome is Outcome.STALE:
            _drop(host, claimed, output_text, "abandoned")
    _emit_ended(host, claimed, ended, output_text)
    return ended


async def _finish(
    host: WorkerHost,
    claimed: ClaimedJob,
    record: AttemptRecord,
    verdict: _Completed | _Failed | Snooze | WaitForCallback,
    tracker: Tracker,
) -> Ended | None:
    sealed = record.output_text
    if isinstance(verdict, _Completed):
        ended = await _complete(host, claimed, record, tracker)
        if ended is None:
            return None  # a compact completion: the tracker hears its end
    elif isinstance(verdict, Snooze):
        seconds = verdict.seconds
        ended = await _write(
            host, record, lambda conn: attempt_writes.snooze(conn, record, seconds)
        )
        _drop(host, claimed, sealed, "outcome")
        sealed = None
    else:
        ended = await _fail(host, record, verdict)
        if ended.state is JobState.WAITING_EXTERNAL:
            _drop(host, claimed, sealed, "outcome")
            sealed = None
    if sealed is not None and record.output_text is not None:
        if ended.outcome is Outcome.WRITTEN and (
            ended.state is JobState.COMPLETED or ended.output_kept
        ):
            outcome = "completed" if ended.state is JobState.COMPLETED else "failed"
            host.metrics.recorded(claimed.kind, claimed.queue, outcome, sealed)
        elif ended.outcome is Outcome.STALE:
            _drop(host, claimed, sealed, "abandoned")
    completed_output = record.output_text if ended.state is JobState.COMPLETED else None
    _emit_ended(host, claimed, ended, completed_output)
    return ended


_EVENT_OF_STATE: dict[JobState, EventName] = {
    JobState.COMPLETED: "completed",
    JobState.RETRYABLE: "retried",
    JobState.FAILED: "exhausted",
    JobState.CANCELLED: "cancelled",
    JobState.WAITING_EXTERNAL: "waiting_for_callback",
    JobState.SCHEDULED: "snoozed",
}


def _emit_ended(
    host: WorkerHost, claimed: ClaimedJob, ended: Ended, output_text: str | None
) -> None:
    """Tell listeners what the attempt's committed end was (its output only on completion)."""
    if ended.outcome is not Outcome.WRITTEN or ended.state is None:
        return
    if host.job_metrics.registry is not None:
        _count_end(host, claimed, ended.state)
    name = _EVENT_OF_STATE.get(ended.state)
    if name is None or not host.events.wants(claimed.kind, name):
        return  # no listener: do not decode the output for nobody
    output = orjson.loads(output_text) if output_text is not None else None
    host.events.emit(JobEvent(name, claimed.job_id, claimed.kind, claimed.queue, output))


def _count_end(host: WorkerHost, claimed: ClaimedJob, state: JobState) -> None:
    """Completions and failures (``awa_job_completed``, ``awa_job_failed``): committed ends."""
    if state is JobState.COMPLETED:
        host.job_metrics.completed(claimed.queue, claimed.kind)
    elif state is JobState.RETRYABLE:
        host.job_metrics.failed(claimed.queue, claimed.kind, "retried")
    elif state is JobState.FAILED:
        host.job_metrics.failed(claimed.queue, claimed.kind, "exhausted")


def _drop(host: WorkerHost, claimed: ClaimedJob, output: str | None, reason: str) -> None:
    if output is not None:
        host.metrics.dropped(claimed.kind, claimed.queue, reason)


async def _write(
    host: WorkerHost, record: AttemptRecord, transition: Callable[[Conn], Awaitable[Ended]]
) -> Ended:
    """Run one finalize transition on a pooled connection, retrying transient errors (a killed
    connection, a restarting server) as the completion flush does. A retry after an uncertain
    commit is safe: the ``(job_id, run_lease)`` guard turns it into "already written"."""

    async def attempt() -> Ended:
        async with pooled(host.pool) as conn:
            return await transition(conn)

    return await retry_transient(
        f"finalize of job {record.ref.job_id}", attempt, stop=host.pool.is_closing
    )


async def _fail(
    host: WorkerHost, record: AttemptRecord, verdict: _Failed | WaitForCallback
) -> Ended:
    async def transition(conn: Conn) -> Ended:
        failed = verdict
        if isinstance(failed, WaitForCallback):
            # Parking again after an uncertain commit matches the same row: idempotent.
            parked = await attempt_writes.park(conn, record, failed.token.callback_id)
            if parked is not None:
                return parked
            failed = _Failed(
                Failure.CONTRACT,
                "wait_for_callback_contract_violation: WaitForCallback returned without a "
                "registered callback",
            )
        return await attempt_writes.fail(
            conn,
            record,
            failed.failure,
            failed.message,
            outputs_supported=await host.outputs_supported(),
            retry_in=failed.retry_in,
            traceback=failed.traceback,
        )

    return await _write(host, record, transition)


async def _complete(
    host: WorkerHost, claimed: ClaimedJob, record: AttemptRecord, tracker: Tracker
) -> Ended | None:
    supported = host.outputs_cached() or await retry_transient(
        "output column probe", host.outputs_supported, stop=host.pool.is_closing
    )
    if record.output_text is not None and not supported:
        _drop(host, claimed, record.output_text, "schema_missing")
        record.output_text = None
    if host.has_completed_specs(claimed.kind) and record.poisoned is None:
        row = await _completed_row(host, claimed)
        if row is None:  # the ready row is gone: the attempt was resolved elsewhere
            return _STALE
        try:
            record.staged = [*record.staged, *host.completed_follow_ups(row)]
        except Exception as exc:
            record.poisoned = f"completed spec failed: {_describe(exc)}"
    if completes_on_general_path(
        record.staged, record.poisoned, claimed.payload, claimed.unique_key
    ):
        keyed = claimed.unique_key is not None
        if record.staged or record.poisoned is not None:  # its own transaction, as the rule says
            return await _write(
                host,
                record,
                lambda conn: attempt_writes.complete_general(
                    conn, record, keyed=keyed, outputs_supported=supported
                ),
            )
        general = GeneralCompletion(record.ref, record.attempt, record.output_text, keyed)
        return _COMPACT_ENDED[await host.batcher.submit_general(general)]
    _submit_compact(host, claimed, record.output_text, tracker)
    return None


_COMPACT_ENDED = {
    outcome: Ended(outcome, JobState.COMPLETED if outcome is not Outcome.STALE else None)
    for outcome in Outcome
}
"""A flushed (compact or general) completion's end by outcome: immutable, so shared rather
than built per job."""
_STALE = _COMPACT_ENDED[Outcome.STALE]


async def _completed_row(host: WorkerHost, claimed: ClaimedJob) -> JobRow | None:
    """The row a completion spec sees: as completed, with no output (None: the attempt's ready
    row is gone). Its times are read here, as the claim does not fetch them."""

    async def read() -> tuple[datetime, datetime] | None:
        async with pooled(host.pool) as conn:
            return await claim.ready_times(conn, claimed.job_id, claimed.run_lease)

    times = await retry_transient(f"read of job {claimed.job_id}", read, stop=host.pool.is_closing)
    if times is None:
        return None
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
        run_at=times[0],
        created_at=times[1],
        attempted_at=claimed.claimed_at,
        tags=list(payload.get("tags") or []),
        metadata=dict(payload.get("metadata") or {}),
        errors=dispatch_errors(payload),
    )
