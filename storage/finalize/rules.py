"""Decide what an ended attempt becomes. Pure: no connection, no SQL; ``attempt_writes`` and
``compact_writes`` carry the decisions out.

ADR-048's table "Where an attempt's output goes", row by row: completed -> the job's output;
every failure the executor records (error, Cancel, RetryAfter with an output, exhaustion,
poisoning, the WaitForCallback contract violation) -> the output key of that attempt's error
entry; Snooze and WaitForCallback -> discarded (the caller counts them).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from storage.finalize.types import AttemptRecord, Outcome
from storage.values.models import JobState
from storage.values.payload import takes_general_path

MAX_BACKOFF_SECONDS = 3600.0


class Failure(StrEnum):
    """Kinds of recorded failure; each writes an error entry."""

    ERROR = "error"  # retryable unless attempts are exhausted
    TERMINAL = "terminal"  # TerminalError, poisoning
    CANCEL = "cancel"  # Cancel from the handler
    RETRY_AFTER = "retry_after"
    CONTRACT = "contract"  # WaitForCallback without a registered callback


# The closure outcomes only an attempt's own executor writes; rescue, admin actions and external
# completers write others.
EXECUTOR_OUTCOMES = frozenset({"completed", "retried", "snoozed", *(f.value for f in Failure)})
_DLQ_REASONS = {
    Failure.CONTRACT: "wait_for_callback_contract_violation",
    Failure.TERMINAL: "terminal_error",
}


def backoff_seconds(attempt: int, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter: 2^attempt seconds (capped at an hour), plus up to 25%."""
    base = min(2.0**attempt, MAX_BACKOFF_SECONDS)
    return base * (1 + (rng or random).random() * 0.25)


def completes_on_general_path(
    staged: Sequence[object],
    poisoned: str | None,
    payload: dict[str, Any] | None,
    unique_key: str | None = None,
) -> bool:
    """A completion with follow-ups, a poisoned stage, a payload to rewrite or a unique key to
    release needs its own transaction; every other completion joins a compact flush."""
    return bool(staged) or poisoned is not None or takes_general_path(payload, unique_key)


def outcome_of_rewrite(closed_with: str | None) -> Outcome:
    """A guarded write that matched nothing: ``ALREADY`` when the attempt was closed by its own
    executor (a retry after a lost commit acknowledgement), else ``STALE``."""
    return Outcome.ALREADY if closed_with in EXECUTOR_OUTCOMES else Outcome.STALE


@dataclass(frozen=True)
class FailurePlan:
    """What a failed attempt becomes; ``state`` FAILED goes to the DLQ when its queue has one."""

    closure: str  # the attempt_closures outcome
    state: JobState  # RETRYABLE, CANCELLED or FAILED
    message: str
    terminal: bool
    error_entry: bool  # False only for a RetryAfter retry without an output
    run_at: datetime | None  # when a retry runs
    dlq_reason: str


def plan_failure(
    record: AttemptRecord,
    failure: Failure,
    message: str,
    *,
    now: datetime,
    retry_in: float | None = None,
    closure: str | None = None,
    dlq_reason: str | None = None,
) -> FailurePlan:
    """Retry while attempts are left (errors and RetryAfter only), else end: cancelled for a
    Cancel, failed (or dead-lettered) for the rest."""
    retryable = failure in (Failure.ERROR, Failure.RETRY_AFTER)
    exhausted = record.attempt >= record.max_attempts
    retrying = retryable and not exhausted
    if retryable and exhausted:
        message = f"{message} (max attempts {record.max_attempts} exhausted)"
    if retrying:
        state = JobState.RETRYABLE
        delay = retry_in if retry_in is not None else backoff_seconds(record.attempt)
    else:
        state = JobState.CANCELLED if failure is Failure.CANCEL else JobState.FAILED
        delay = None
    return FailurePlan(
        closure=closure or ("retried" if retrying else failure.value),
        state=state,
        message=message,
        terminal=not retrying,
        error_entry=not (
            failure is Failure.RETRY_AFTER and retrying and record.output_text is None
        ),
        run_at=None if delay is None else now + timedelta(seconds=delay),
        dlq_reason=dlq_reason
        or _DLQ_REASONS.get(failure, "max_attempts_exhausted" if exhausted else "terminal_error"),
    )
