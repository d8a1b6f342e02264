"""Results of database work, posted by workers back to the screens (named in the past tense).

Each carries enough to tell whether it is still current (the query or job id it answers), so a
late result for a view the person already left is dropped rather than rendered.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from textual.message import Message

from awa_tui.query import JobQuery
from storage import (
    AttemptSpan,
    FailureGroup,
    JobAccount,
    JobKindDescriptor,
    JobRow,
    KindSummary,
    PeriodicSchedule,
    QueueSummary,
    StateCounts,
)


@dataclass
class ClientConnected(Message):
    """The app's client is ready; ``read_only_reason`` is set when writes are impossible."""

    read_only_reason: str | None


@dataclass
class CountsLoaded(Message):
    counts: StateCounts


@dataclass
class JobsLoaded(Message):
    """A page of the browser. ``append`` for the next page, ``refreshed`` for a live refresh."""

    query: JobQuery
    rows: list[JobRow]
    append: bool
    refreshed: bool
    has_more: bool
    dlq_matches: int = 0  # the All tab leaves dead-lettered jobs out: how many also match
    found: JobRow | None = None
    """An ``id:`` lookup's job, wherever it is (``rows`` has it only on its own tab)."""


@dataclass
class JobLoaded(Message):
    """One job re-read (None when it no longer exists) with its kind's descriptor."""

    job_id: int
    row: JobRow | None
    descriptor: JobKindDescriptor | None
    account: JobAccount | None = None
    """The row with what storage keeps about how it ended (``Client.explain_job``)."""


@dataclass
class KindsLoaded(Message):
    kinds: list[KindSummary]


@dataclass
class QueuesLoaded(Message):
    queues: list[QueueSummary]


@dataclass
class FailureGroupsLoaded(Message):
    groups: list[FailureGroup]


@dataclass
class TimelineLoaded(Message):
    job_id: int
    spans: list[AttemptSpan]
    errors: list[dict[str, Any]] | None  # the job's error entries, from the spans' snapshot


@dataclass
class JobsChanged(Message):
    """A write finished; screens showing these jobs should reload. Empty ids: many jobs."""

    job_ids: list[int] = field(default_factory=list)


@dataclass
class SchedulesLoaded(Message):
    schedules: list[PeriodicSchedule]
