"""Request and response shapes of the admin routes (queues, the DLQ, failure groups,
schedules, bulk actions); the engine's own models where it has one, so ``/openapi.json``
describes what the console shows."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from awa_tui.actions import JobAction
from awa_tui.http.bodies import ActionBody
from storage import FailureGroup, PeriodicSchedule, QueueSummary

DRY_RUN = (
    "True (the default): only count the jobs the action would touch, and write nothing. "
    "False: act on them (jobs that moved on meanwhile are skipped, so the count can be lower)."
)


def model_json(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json")


class QueuesOut(BaseModel):
    queues: list[QueueSummary]


class QueueStateOut(BaseModel):
    queue: str
    paused: bool


class FailureGroupsOut(BaseModel):
    groups: list[FailureGroup] = Field(description="Largest first, as the console's G screen.")


class GroupMembersOut(BaseModel):
    """A group's job ids by where they are, newest first."""

    kind: str
    signature: str
    failed: list[int]
    retryable: list[int]
    dead_lettered: list[int]


class SchedulesOut(BaseModel):
    schedules: list[PeriodicSchedule]


class GroupBody(ActionBody):
    kind: str = Field(min_length=1, max_length=255)
    signature: str = Field(min_length=1, max_length=4096, description="The group's signature.")
    since: str | None = Field(None, description="As the list's since: the group's time range.")
    queue: str | None = None
    dry_run: bool = Field(True, description=DRY_RUN)


class BulkBody(ActionBody):
    """The jobs to act on: ``ids``, or a filter as ``GET /api/jobs`` takes it."""

    action: JobAction
    ids: list[int] | None = Field(
        None, max_length=10_000, description="These jobs (instead of a filter)."
    )
    state: str | None = Field(None, description="A job state or a console tab name (dlq, ...).")
    kind: str | None = None
    queue: str | None = None
    since: str | None = None
    before: str | None = None
    q: str | None = Field(None, max_length=1024, description="The console's filter text.")
    dry_run: bool = Field(True, description=DRY_RUN)


class BulkOut(BaseModel):
    action: str
    dry_run: bool
    count: int = Field(description="dry_run: how many jobs match now; else how many were acted on.")
