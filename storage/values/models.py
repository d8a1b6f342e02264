"""Typed values the engine hands out. Readers (the console included) never see driver records."""

from __future__ import annotations

from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field


class JobState(StrEnum):
    """Where a job is in its lifecycle."""

    SCHEDULED = "scheduled"
    AVAILABLE = "available"
    RUNNING = "running"
    WAITING_EXTERNAL = "waiting_external"
    RETRYABLE = "retryable"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


TERMINAL_STATES = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED})

HEARTBEAT_STALE_SECONDS = 60.0
"""Maintenance rescues a running attempt whose heartbeat is this old, unless its runtimes were
started with another ``MaintenanceSettings.heartbeat_stale_seconds`` (``--rescue-after``)."""


class DlqInfo(BaseModel):
    """Why and when a job was dead-lettered."""

    model_config = ConfigDict(frozen=True)

    reason: str
    dlq_at: datetime
    original_run_lease: int


class CallbackInfo(BaseModel):
    """The callback a waiting (or running) attempt registered."""

    model_config = ConfigDict(frozen=True)

    callback_id: str
    timeout_at: datetime | None
    state: str


class JobRow(BaseModel):
    """One job as read from the database.

    ``output_text`` is the completed attempt's output exactly as stored (JSON text); ``output``
    decodes it. List reads never load it, so rows from ``list_jobs`` carry ``None``.
    A failed attempt's output is in its entry in ``errors``.
    """

    model_config = ConfigDict(frozen=True)

    id: int
    kind: str
    queue: str
    state: JobState
    args: Any
    priority: int
    attempt: int
    max_attempts: int
    run_lease: int
    run_at: datetime
    created_at: datetime
    attempted_at: datetime | None = None
    finalized_at: datetime | None = None
    unique_key: str | None = None
    # The states in which the job holds its key, and whether it holds it now (``get_job``).
    unique_states: list[str] | None = None
    holds_unique_key: bool | None = None
    # True on an insert's result when the key was held: the row is the holder, not a new job.
    duplicate: bool = False
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    errors: list[dict[str, Any]] = Field(default_factory=list)
    progress: Any = None
    output_text: str | None = None
    has_output: bool = False
    callback: CallbackInfo | None = None
    dlq: DlqInfo | None = None
    storage_path: str | None = None  # "compact" | "general" for completed jobs
    # A running job's last sign of life: its attempt's last heartbeat, or its claim until the
    # first one (a runtime heartbeats attempts that outlast one interval). Rescue measures
    # staleness from the same moment. None in every other state.
    heartbeat_at: datetime | None = None
    # The output type name the kind's descriptor declares, when read with it (``get_job``);
    # ``output_as`` refuses another type. None: the kind declares none, or it was not looked up.
    declared_output_type: str | None = None

    @property
    def output(self) -> Any:
        """The stored output decoded, or None."""
        return None if self.output_text is None else orjson.loads(self.output_text)

    def heartbeat_age(self, now: datetime) -> timedelta | None:
        """How long ago the running attempt last showed life (None: not running)."""
        if self.heartbeat_at is None:
            return None
        return max(now - self.heartbeat_at, timedelta(0))

    def heartbeat_stale(self, now: datetime, after: float = HEARTBEAT_STALE_SECONDS) -> bool:
        """Whether the running attempt is past the rescue threshold: its worker is presumed
        dead, and the next maintenance pass rescues it."""
        age = self.heartbeat_age(now)
        return age is not None and age.total_seconds() > after

    @property
    def last_error(self) -> str | None:
        return str(self.errors[-1].get("error")) if self.errors else None

    def kept_output_position(self) -> int | None:
        """Index in ``errors`` of the one entry that kept a failed attempt's output."""
        for index in range(len(self.errors) - 1, -1, -1):
            if "output" in self.errors[index]:
                return index
        return None

    def output_as(self, output_type: type[Any]) -> Any:
        """Decode the completed output as ``output_type``; refused when the kind's descriptor
        declares another type (see ``storage.values.output.decode_output``)."""
        from storage.values.output import decode_output

        return decode_output(
            self.kind,
            self.output,
            output_type,
            present=self.output_text is not None,
            declared=self.declared_output_type,
        )

    def error_output_as(self, output_type: type[Any]) -> Any:
        """Decode the latest failed attempt's kept output as ``output_type``."""
        from storage.values.output import decode_output

        position = self.kept_output_position()
        value = None if position is None else self.errors[position]["output"]
        return decode_output(
            self.kind,
            value,
            output_type,
            present=position is not None,
            declared=self.declared_output_type,
        )


class StateCounts(BaseModel):
    """Jobs per state, plus dead-lettered jobs.

    A number is exact unless its state is in ``capped`` (or ``dlq_capped`` for the DLQ): then
    it is a lower bound, "at least this many" (``storage.read.counting`` stops counting at a cap).
    Sums over a capped state are lower bounds too (``live_exact``, ``total_exact``).
    """

    model_config = ConfigDict(frozen=True)

    by_state: dict[JobState, int]
    dlq: int
    capped: frozenset[JobState] = frozenset()
    dlq_capped: bool = False

    @property
    def total(self) -> int:
        """Every job, dead-lettered ones included."""
        return sum(self.by_state.values()) + self.dlq

    @property
    def live(self) -> int:
        """Jobs outside the DLQ: what ``list_jobs(state=None)`` pages through."""
        return sum(self.by_state.values())

    def is_exact(self, state: JobState) -> bool:
        """Whether ``by_state[state]`` is the exact number (else a lower bound)."""
        return state not in self.capped

    @property
    def live_exact(self) -> bool:
        """Whether ``live`` is exact (else a lower bound)."""
        return not self.capped

    @property
    def total_exact(self) -> bool:
        """Whether ``total`` is exact (else a lower bound)."""
        return not self.capped and not self.dlq_capped


class JobPage(BaseModel):
    """One page of jobs and the counts shown beside it, read in one snapshot.

    A job appears at most once in ``rows`` and in exactly one state; ``counts`` describe the
    same moment. ``has_more`` is true when the page is full (another may follow).
    """

    model_config = ConfigDict(frozen=True)

    rows: list[JobRow]
    counts: StateCounts
    has_more: bool


ARGS_SCHEMA = "args_schema"
"""The key of a descriptor's ``extra`` that holds its kind's args JSON Schema (a runtime
publishes it for a registered pydantic args type)."""
QUEUE = "queue"
"""The key of a descriptor's ``extra`` that holds the queue its kind's handler serves."""


class JobKindDescriptor(BaseModel):
    """What a kind is, published by the runtimes that handle it."""

    model_config = ConfigDict(frozen=True)

    kind: str
    display_name: str | None = None
    description: str | None = None
    owner: str | None = None
    docs_url: str | None = None
    tags: list[str] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] | None = None
    descriptor_hash: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_seen_at: datetime | None = None

    @property
    def output_type_name(self) -> str | None:
        return None if self.output is None else self.output.get("type")

    @property
    def output_schema(self) -> dict[str, Any] | None:
        return None if self.output is None else self.output.get("schema")

    @property
    def args_schema(self) -> dict[str, Any] | bool | None:
        """The args JSON Schema a runtime published (``extra["args_schema"]``), if any."""
        schema = self.extra.get(ARGS_SCHEMA)
        return schema if isinstance(schema, dict | bool) else None

    @property
    def declared_extra(self) -> dict[str, Any]:
        """``extra`` without what a runtime publishes itself (``queue``, ``args_schema``)."""
        return {k: v for k, v in self.extra.items() if k not in (ARGS_SCHEMA, QUEUE)}

    @property
    def queue(self) -> str | None:
        """The queue the kind's handler serves (``extra["queue"]``), if a runtime said."""
        queue = self.extra.get(QUEUE)
        return queue if isinstance(queue, str) and queue else None


class KindSummary(BaseModel):
    """A kind with its descriptor (if any runtime published one) and its job counts."""

    model_config = ConfigDict(frozen=True)

    kind: str
    descriptor: JobKindDescriptor | None
    counts: dict[JobState, int]
    dlq: int = 0
    stale: bool


class DlqEntry(BaseModel):
    """A dead-lettered job."""

    model_config = ConfigDict(frozen=True)

    job: JobRow
    reason: str
    dlq_at: datetime


class SchemaSummary(BaseModel):
    """One installed queue-storage schema and its jobs per state (``Client.list_schemas``)."""

    model_config = ConfigDict(frozen=True)

    name: str
    counts: StateCounts


class QueueSummary(BaseModel):
    """One queue as the on-call view shows it (``Client.list_queues``).

        ``counts`` holds the live states only (available, scheduled, retryable, running, waiting);
        terminal history is summarised by time instead: ``completions_per_minute`` and
        ``failures_per_minute`` cover the last hour, oldest minute first, the last item being the
        current minute. Failures are jobs that failed for good (dead-lettered ones included), not
        attempts that will be retried. The hour's numbers are exact from ``exact_since`` on (an
        hour before ``read_at`` unless the read stopped at its cap). An available count in
        ``capped`` is "at least". ``oldest_available_at`` is when the oldest available job became
    runnable; ``lag`` is its age at ``read_at`` (None: nothing is available).
    """

    model_config = ConfigDict(frozen=True)

    queue: str
    paused: bool = False
    paused_at: datetime | None = None
    counts: dict[JobState, int]
    capped: frozenset[JobState] = frozenset()
    oldest_available_at: datetime | None = None
    completions_per_minute: list[int]
    failures_per_minute: list[int]
    exact_since: datetime
    read_at: datetime

    @property
    def lag(self) -> timedelta | None:
        if self.oldest_available_at is None:
            return None
        return max(self.read_at - self.oldest_available_at, timedelta(0))

    @property
    def completed_5m(self) -> int:
        return sum(self.completions_per_minute[-5:])

    @property
    def completed_1h(self) -> int:
        return sum(self.completions_per_minute)

    @property
    def failed_5m(self) -> int:
        return sum(self.failures_per_minute[-5:])

    @property
    def failed_1h(self) -> int:
        return sum(self.failures_per_minute)

    @property
    def hour_exact(self) -> bool:
        """Whether the hour's numbers are exact (else lower bounds)."""
        return self.exact_since <= self.read_at - timedelta(hours=1)


class FailureGroup(BaseModel):
    """Failed, retryable and dead-lettered jobs of one kind whose latest errors share a
    signature (``storage.read.failure_groups`` gives the rule). ``count`` is their number, split by
    where they are; with ``capped`` it is a lower bound. ``kept_output``: at least one member's
    latest error entry kept the attempt's output."""

    model_config = ConfigDict(frozen=True)

    kind: str
    signature: str
    count: int
    failed: int
    retryable: int
    dead_lettered: int
    first_seen: datetime
    last_seen: datetime
    sample_job_id: int
    sample_error: str
    kept_output: bool
    queues: list[str]
    capped: bool = False

    @property
    def error_class(self) -> str | None:
        """The ``Name`` in ``Name: message``, when the error has one."""
        head, sep, _ = self.signature.partition(": ")
        return head if sep and head.replace(".", "").replace("_", "").isalnum() else None


class RuntimeInfo(BaseModel):
    """A runtime as its registry row recorded it when it started (migration v010):
    ``host`` and ``pid`` of its process, ``name`` its command gave, the awa-tui ``version``.
    Only ``id`` is known when the row was pruned (older than the maintenance retention)."""

    model_config = ConfigDict(frozen=True)

    id: int
    host: str | None = None
    pid: int | None = None
    started_at: datetime | None = None
    name: str | None = None
    version: str | None = None


class AttemptSpan(BaseModel):
    """One readiness of a job and the attempt claimed from it (``Client.attempt_timeline``).

    ``outcome`` is how the attempt ended as storage recorded it (completed, failed, retried,
    snoozed, cancelled, rescued, callback_timeout, completed_external, ...); None while it
    runs or before it is claimed. ``heartbeat_at``, ``progress`` and the callback exist only
    while the attempt is open (storage drops them when it ends). ``runtime`` is the runtime
    that claimed it; None when it is not claimed, or was claimed before migration v010 or by
    a runtime of an earlier release.
    """

    model_config = ConfigDict(frozen=True)

    run_lease: int
    attempt: int | None = None
    ready_at: datetime
    claimed_at: datetime | None = None
    deadline_at: datetime | None = None
    heartbeat_at: datetime | None = None
    progress: Any = None
    callback_id: str | None = None
    callback_timeout_at: datetime | None = None
    waiting: bool = False
    ended_at: datetime | None = None
    outcome: str | None = None
    runtime: RuntimeInfo | None = None

    @property
    def duration(self) -> timedelta | None:
        """Claimed to ended, when both are known."""
        if self.claimed_at is None or self.ended_at is None:
            return None
        return self.ended_at - self.claimed_at


class JobTimeline(BaseModel):
    """A job and its attempts read in one snapshot (``Client.job_timeline``): ``row`` is None
    when the job does not exist (or was pruned)."""

    model_config = ConfigDict(frozen=True)

    row: JobRow | None
    spans: list[AttemptSpan]
