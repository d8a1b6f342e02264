"""Where a job's output came from, when it goes, and, when there is none, the one reason why.

Pure: it reads a ``JobRow`` and the ``JobFacts`` read with it in the same snapshot
(``storage.read.output_facts``): the job's latest attempt closure (``completed_external``,
``rescued``, ``snoozed``, ...), the queue slot holding its ready row and the queue ring's
position, a compact tombstone, and whether the schema has the output columns. Prune times are
estimates: the queue ring turns every ``Retention.queue_rotate_interval`` (the maintenance
default unless the caller says otherwise), and only while jobs arrive.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from storage.values.audit import AuditEntry
from storage.values.models import TERMINAL_STATES, JobRow, JobState

# Closures that end an attempt before its handler finished (rescue, shutdown, timeouts, admin).
NEVER_FINISHED = {
    "rescued": "rescued: the attempt never finished (its heartbeat went stale or its deadline "
    "passed), so it recorded no output",
    "shutdown": "rescued: the attempt never finished (its worker shut down first), so it "
    "recorded no output",
    "callback_timeout": "rescued: the attempt never finished (its callback timed out), so it "
    "recorded no output",
    "cancelled_admin": "cancelled by an operator while it ran: the attempt never finished, so "
    "it recorded no output",
    "failed_external": "failed externally (fail_external): an external failure carries no output",
    "retried_external": "retried externally (retry_external): the attempt ended without an output",
}
DISCARDED = {"snoozed": "snoozed: an attempt that snoozes has its output discarded"}


class NoOutput(StrEnum):
    """The one reason a job shows no completed output."""

    COMPLETED_EXTERNAL = "completed_external"
    NONE_RECORDED = "none_recorded"
    SCHEMA_MISSING = "schema_missing"
    DISCARDED = "discarded"  # snoozed, or waiting for a callback
    NEVER_FINISHED = "never_finished"  # rescued, shut down, timed out, cancelled while running
    FAILED = "failed"  # failed attempts keep theirs in an error entry
    NOT_FINISHED = "not_finished"  # not run yet, running
    DELETED = "deleted"
    NOT_FOUND = "not_found"
    UNKNOWN = "unknown"  # its closure was pruned with the claim ring


@dataclass(frozen=True)
class Retention:
    """How long storage keeps what it keeps (``MaintenanceSettings``' values)."""

    queue_rotate_interval: timedelta
    failed_retention: timedelta
    dlq_retention: timedelta


@dataclass(frozen=True)
class JobFacts:
    """What storage keeps about how a job's attempts ended, read in the job's snapshot."""

    closure: str | None  # the latest attempt closure's outcome (attempt_closures)
    closure_lease: int | None  # the run lease it closed
    closed_at: datetime | None
    ready_slot: int | None  # the queue slot of the job's latest ready row; None: no row
    deleted_at: datetime | None  # a compact completion's tombstone
    ring_slots: int
    ring_current: int
    ring_rotated_at: datetime
    read_at: datetime  # the database's clock in the snapshot
    outputs_supported: bool
    retention: Retention

    def turns_left(self) -> int | None:
        """Queue ring turns until the job's slot is pruned (the turn onto it truncates it)."""
        if self.ready_slot is None:
            return None
        return (self.ready_slot - self.ring_current) % self.ring_slots or self.ring_slots

    def prune_at(self) -> datetime | None:
        turns = self.turns_left()
        if turns is None:
            return None
        return self.ring_rotated_at + turns * self.retention.queue_rotate_interval


@dataclass(frozen=True)
class Absence:
    cause: NoOutput
    text: str


@dataclass(frozen=True)
class Provenance:
    """Which attempt wrote an output, when, by which path, and when it goes."""

    attempt: int | None
    written_at: datetime | None
    path: str  # "compact path", "general path", "error entry #2"
    by: str  # "its handler", "an external completion (complete_external)", ...
    prune: str

    def text(self, now: datetime) -> str:
        attempt = "?" if self.attempt is None else self.attempt
        when = "" if self.written_at is None else f" at {stamp(self.written_at, now)}"
        return f"Attempt {attempt}{when}, by {self.by}, {self.path} · {self.prune}"


def stamp(moment: datetime, now: datetime) -> str:
    """``09:42Z`` within a day of ``now``, else ``2026-03-14 09:42Z``."""
    moment = moment.astimezone(UTC)
    if abs(moment - now) < timedelta(hours=20):
        return moment.strftime("%H:%MZ")
    return moment.strftime("%Y-%m-%d %H:%MZ")


def span(delta: timedelta) -> str:
    minutes = int(delta.total_seconds() // 60)
    if minutes % (24 * 60) == 0:
        return f"{minutes // (24 * 60)} d"
    return f"{minutes // 60} h" if minutes % 60 == 0 else f"{minutes} min"


@dataclass(frozen=True)
class JobAccount:
    """A job (None when ``get_job`` would return None) and the facts read with it; with
    ``actions``, the operator writes that acted on it (newest first, as many as
    ``explain_job`` was asked for; empty when none were asked), from the same snapshot. None:
    the schema has no audit trail."""

    job_id: int
    row: JobRow | None
    facts: JobFacts
    actions: tuple[AuditEntry, ...] | None = ()

    def prune_text(self, now: datetime | None = None) -> str:
        """When what this job keeps goes, as far as storage can say."""
        now = now or self.facts.read_at
        row, facts = self.row, self.facts
        every = span(facts.retention.queue_rotate_interval)
        if row is not None and row.dlq is not None:
            until = row.dlq.dlq_at + facts.retention.dlq_retention
            days = span(facts.retention.dlq_retention)
            return f"kept until ~{stamp(until, now)} ({days} of DLQ retention) unless purged"
        if row is not None and row.state is JobState.FAILED and row.finalized_at is not None:
            until = row.finalized_at + facts.retention.failed_retention
            carried = (
                f"failed jobs are carried past prune for {span(facts.retention.failed_retention)}"
            )
            return f"kept at least until ~{stamp(until, now)} ({carried})"
        if row is not None and row.state not in TERMINAL_STATES:
            return "kept with the job while it is live; pruned after it ends"
        turns, at = facts.turns_left(), facts.prune_at()
        if turns is None or at is None:
            return "pruned with its queue slot"
        ring = f"{turns} more turn{'s' if turns > 1 else ''} of the queue ring, every {every}"
        if at <= now:
            return f"pruned with its queue slot after {ring} (the ring turns while jobs arrive)"
        return f"pruned with its queue slot at ~{stamp(at, now)} ({ring})"

    def provenance(self, now: datetime | None = None) -> Provenance | None:
        """Where the completed output came from; None when there is none."""
        row = self.row
        if row is None or row.output_text is None:
            return None
        return Provenance(
            row.attempt,
            row.finalized_at,
            f"{row.storage_path or 'general'} path",
            self._completed_by(row),
            self.prune_text(now),
        )

    def kept_output(self) -> tuple[int, Any] | None:
        """The error entry that kept a failed attempt's output (its index) and that output."""
        row = self.row
        position = None if row is None else row.kept_output_position()
        if row is None or position is None:
            return None
        return position, row.errors[position]["output"]

    def kept_provenance(self, now: datetime | None = None) -> Provenance | None:
        """Where the kept failed output came from; None when no entry kept one."""
        kept = self.kept_output()
        if kept is None or self.row is None:
            return None
        entry = self.row.errors[kept[0]]
        at = entry.get("at")
        written = datetime.fromisoformat(at) if isinstance(at, str) else None
        attempt = entry.get("attempt")
        return Provenance(
            attempt if isinstance(attempt, int) else None,
            written,
            f"kept in error entry #{kept[0] + 1} of the job's payload",
            "its handler, which failed" + (" terminally" if entry.get("terminal") else ""),
            self.prune_text(now),
        )

    def _completed_by(self, row: JobRow) -> str:
        if row.storage_path == "compact":
            return "its handler"  # only handler completions flush compactly
        closure = self._own_closure(row)
        if closure == "completed_external":
            return "an external completion (complete_external)"
        if closure == "completed":
            return "its handler"
        return "its handler or an external completion (the closure saying which was pruned)"

    def _own_closure(self, row: JobRow) -> str | None:
        """The closure of the row's own attempt (not an earlier one)."""
        facts = self.facts
        lease = row.dlq.original_run_lease if row.dlq is not None else row.run_lease
        return facts.closure if facts.closure_lease == lease else None

    def absence(self, now: datetime | None = None) -> Absence | None:
        """The one reason the job shows no completed output; None when it has one."""
        row, facts = self.row, self.facts
        if row is None:
            return self._gone(now or facts.read_at)
        if row.output_text is not None:
            return None
        closure = self._own_closure(row)
        match row.state:
            case JobState.COMPLETED:
                return self._completed_without(row, closure)
            case JobState.WAITING_EXTERNAL:
                return Absence(
                    NoOutput.DISCARDED,
                    "waiting for a callback: an output recorded before WaitForCallback is "
                    "discarded; the completion stores the one it brings",
                )
            case JobState.RUNNING:
                return Absence(
                    NoOutput.NOT_FINISHED, f"running: attempt {row.attempt} has not finished"
                )
        # The attempt that ended last: this row's own (failed, cancelled) or an earlier one's
        # (a retry or a snooze waiting to run again).
        last = closure if row.state in TERMINAL_STATES else facts.closure
        if last in NEVER_FINISHED:
            return Absence(NoOutput.NEVER_FINISHED, NEVER_FINISHED[last])
        if last in DISCARDED:
            return Absence(NoOutput.DISCARDED, DISCARDED[last])
        kept = row.kept_output_position()
        if last is not None or row.errors:
            if kept is not None:
                text = (
                    f"not completed: a failed attempt's output is kept in error entry #{kept + 1}"
                )
            else:
                text = "not completed: the failed attempts recorded no output"
            if row.dlq is not None:
                text = f"dead-lettered ({row.dlq.reason}), " + text
            return Absence(NoOutput.FAILED, text)
        if row.state is JobState.CANCELLED:
            return Absence(NoOutput.NOT_FINISHED, "cancelled before it ran")
        return Absence(NoOutput.NOT_FINISHED, f"not run yet ({row.state.value})")

    def _completed_without(self, row: JobRow, closure: str | None) -> Absence:
        if not self.facts.outputs_supported:
            return Absence(
                NoOutput.SCHEMA_MISSING,
                "dropped: the schema had no output column (schema_missing); run awa-tui migrate",
            )
        if closure == "completed_external":
            return Absence(NoOutput.COMPLETED_EXTERNAL, "completed externally without an output")
        if row.storage_path == "compact" or closure == "completed":
            return Absence(NoOutput.NONE_RECORDED, "the handler recorded none (set_output)")
        return Absence(
            NoOutput.UNKNOWN,
            "completed without an output, by its handler or externally: the closure saying "
            "which was pruned with the claim ring",
        )

    def _gone(self, now: datetime) -> Absence:
        facts = self.facts
        if facts.deleted_at is None and facts.ready_slot is None:
            return Absence(
                NoOutput.NOT_FOUND,
                "no such job: never inserted in this schema, or pruned with its queue slot",
            )
        prune = self.prune_text(now).removeprefix("pruned with its queue slot ")
        if facts.deleted_at is None:  # a general-path row deleted (or a DLQ entry purged)
            return Absence(
                NoOutput.DELETED,
                "deleted: hidden; its output's row is deleted (the bytes stay until vacuum), "
                f"its args until prune {prune}",
            )
        deleted = stamp(facts.deleted_at, now)  # a compact completion's tombstone
        return Absence(
            NoOutput.DELETED, f"deleted at {deleted}: hidden, bytes stay until prune {prune}"
        )
