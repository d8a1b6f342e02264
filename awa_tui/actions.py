"""Which writes apply to a job, and why not. Mirrors the rules storage enforces.

Storage is the authority (it raises ``InvalidJobState``); these rules only decide what the
console offers, so a person sees the reason before pressing a key rather than after.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from storage import FailureGroupMembers, JobRow, JobState


class JobAction(StrEnum):
    """Admin writes, named as ``Client.bulk_action`` names them."""

    RETRY = "retry"
    CANCEL = "cancel"
    DELETE = "delete"
    RETRY_DLQ = "retry_dlq"
    PURGE_DLQ = "purge_dlq"


@dataclass(frozen=True)
class ActionInfo:
    label: str  # "Retry"
    verb: str  # "retried"
    allowed: str  # states named in refusals
    keep: str  # the confirmation's button that leaves the jobs as they are
    danger: bool  # loses work or data: the confirmation's button is red


ACTIONS: dict[JobAction, ActionInfo] = {
    JobAction.RETRY: ActionInfo("Retry", "retried", "failed or cancelled", "Don't retry", False),
    JobAction.CANCEL: ActionInfo(
        "Cancel", "cancelled", "available, scheduled, retryable, running or waiting", "Keep", True
    ),
    JobAction.DELETE: ActionInfo(
        "Delete", "deleted", "completed, failed or cancelled", "Keep", True
    ),
    JobAction.RETRY_DLQ: ActionInfo(
        "Retry from DLQ", "retried from the DLQ", "dead-lettered", "Leave in DLQ", False
    ),
    JobAction.PURGE_DLQ: ActionInfo("Purge from DLQ", "purged", "dead-lettered", "Keep", True),
}

_STATES: dict[JobAction, frozenset[JobState]] = {
    JobAction.RETRY: frozenset({JobState.FAILED, JobState.CANCELLED}),
    JobAction.CANCEL: frozenset(
        {
            JobState.AVAILABLE,
            JobState.SCHEDULED,
            JobState.RETRYABLE,
            JobState.RUNNING,
            JobState.WAITING_EXTERNAL,
        }
    ),
    JobAction.DELETE: frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED}),
    JobAction.RETRY_DLQ: frozenset(),
    JobAction.PURGE_DLQ: frozenset(),
}


def confirm_labels(action: JobAction, count: int) -> tuple[str, str]:
    """The two buttons of a confirmation, each naming what it does: ("Cancel job", "Keep")."""
    info = ACTIONS[action]
    label = info.label.replace(" from DLQ", "")
    target = "job" if count == 1 else f"{count:,} jobs"
    return f"{label} {target}", info.keep


def state_label(row: JobRow) -> str:
    return "dead-lettered" if row.dlq is not None else row.state.value


def why_not(action: JobAction, row: JobRow) -> str | None:
    """None when ``action`` applies to ``row``, else the reason a person reads."""
    info = ACTIONS[action]
    if action in (JobAction.RETRY_DLQ, JobAction.PURGE_DLQ):
        ok = row.dlq is not None
    elif row.dlq is not None:
        ok = action is JobAction.DELETE  # deleting a dead-lettered job purges it
    else:
        ok = row.state in _STATES[action]
    if ok:
        return None
    return f"Job {row.id} is {state_label(row)}; only {info.allowed} jobs can be {info.verb}."


def callback_why_not(row: JobRow) -> str | None:
    """None when an external completion, failure or retry applies to ``row``."""
    if row.state is JobState.WAITING_EXTERNAL and row.callback is not None:
        return None
    if row.state is JobState.RUNNING and row.callback is not None:
        return (
            f"Job {row.id} is running (its callback {row.callback.callback_id} is not parked yet)."
        )
    return f"Job {row.id} is {state_label(row)}, not waiting for a callback."


def group_plan(members: FailureGroupMembers, *, retry: bool) -> list[tuple[JobAction, list[int]]]:
    """What a failure group's retry (the failed and the dead-lettered jobs back to their queues)
    or cancel (the retryable ones) does, as bulk actions on its members: the console's ``G``
    screen and ``POST /api/failure-groups/...`` alike."""
    if retry:
        return [(JobAction.RETRY, members.failed), (JobAction.RETRY_DLQ, members.dead_lettered)]
    return [(JobAction.CANCEL, members.retryable)]
