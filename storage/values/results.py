"""What a handler may return besides ``None`` (which completes the job)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryAfter:
    """Fail this attempt and run again after ``seconds`` (counts as an attempt)."""

    seconds: float


@dataclass(frozen=True)
class Snooze:
    """Run again after ``seconds`` without using up an attempt."""

    seconds: float


@dataclass(frozen=True)
class Cancel:
    """Stop the job for good; it ends ``cancelled`` with ``reason`` in its error history."""

    reason: str = "cancelled by handler"


@dataclass(frozen=True)
class CallbackToken:
    """A registered callback: give ``callback_id`` to the external system that will answer."""

    callback_id: str
    job_id: int
    run_lease: int


@dataclass(frozen=True)
class WaitForCallback:
    """Park the job until an external system answers ``token`` (the worker slot is freed)."""

    token: CallbackToken


HandlerResult = RetryAfter | Snooze | Cancel | WaitForCallback | None
