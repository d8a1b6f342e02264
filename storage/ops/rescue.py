"""Ending an attempt its runtime no longer runs: rescue (a stale heartbeat, a passed deadline),
a callback timeout, or the runtime's own shutdown giving back what it abandoned.

Each goes through ``attempt_writes.fail``, the lease-guarded write every end takes: the
attempt is closed first (so a late completion from the handler that ran it is stale), with an
error entry saying why and a retry at once, or failed (or dead-lettered) once its attempts are
used up. Listeners hear of each after the commit (``emit_rescued``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from storage.db.pool import Conn
from storage.finalize import attempt_writes
from storage.finalize.rules import Failure
from storage.finalize.types import AttemptRecord, Outcome
from storage.values.events import EventBus, JobEvent
from storage.values.models import JobState


@dataclass(frozen=True)
class Rescued:
    """One attempt ended for the runtime that no longer runs it (by rescue, a callback timeout
    or its shutdown), and where its job went (retryable or failed)."""

    job_id: int
    kind: str
    queue: str
    reason: str
    state: JobState | None
    dlq_reason: str | None = None


Abandoned = tuple[AttemptRecord, str, str]
"""An attempt a stopping runtime gives back: its record, kind and queue."""
SHUTDOWN_REASON = "worker shut down before the handler finished"


async def release_abandoned(conn: Conn, attempts: Sequence[Abandoned]) -> list[Rescued]:
    """Give back the attempts a stopping runtime abandoned, in one transaction: each is closed
    ``shutdown`` with an error entry (``SHUTDOWN_REASON``) and retried at once, or failed when
    its attempts are used up, exactly as rescue would do a heartbeat later. Guarded like every
    end: one already ended (its completion flushed first) is passed over, and a completion
    arriving after this commits is stale."""
    released: list[Rescued] = []
    async with conn.transaction():
        for record, kind, queue in sorted(attempts, key=lambda a: a[0].ref.job_id):
            ended = await end_attempt(conn, record, kind, queue, SHUTDOWN_REASON, "shutdown")
            if ended is not None:
                released.append(ended)
    return released


async def end_attempt(
    conn: Conn,
    record: AttemptRecord,
    kind: str,
    queue: str,
    reason: str,
    closure: str,
    *,
    dlq_reason: str | None = None,
) -> Rescued | None:
    """End an attempt its runtime no longer runs (rescue, a callback timeout, a shutdown): an
    error entry saying ``reason`` and a retry now, or failed once attempts are used up. None
    when the attempt had already ended (the guard matched nothing)."""
    ended = await attempt_writes.fail(
        conn,
        record,
        Failure.ERROR,
        reason,
        outputs_supported=False,
        retry_in=0,
        closure=closure,
        dlq_reason=dlq_reason,
    )
    if ended.outcome is not Outcome.WRITTEN:
        return None
    return Rescued(record.ref.job_id, kind, queue, reason, ended.state, ended.dlq_reason)


def emit_rescued(events: EventBus, rescues: Sequence[Rescued]) -> None:
    """Tell listeners, after the commit and in order, of each attempt rescue (or a shutdown)
    ended for its runtime: ``rescued``, and ``exhausted`` too when that failed the job."""
    for rescued in rescues:
        events.emit(JobEvent("rescued", rescued.job_id, rescued.kind, rescued.queue))
        if rescued.state is JobState.FAILED:
            events.emit(JobEvent("exhausted", rescued.job_id, rescued.kind, rescued.queue))
