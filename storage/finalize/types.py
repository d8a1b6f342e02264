"""An attempt's identity and what its end did: the types the rules, the writers, the executor
and the runtime share (no logic and no SQL here)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from storage.insert.enqueue import NewJob
from storage.values.models import JobState


class AttemptKey(NamedTuple):
    """One attempt of one job: what every guard and every runtime table is keyed by."""

    job_id: int
    run_lease: int


@dataclass(frozen=True)
class AttemptRef:
    """An attempt plus the claim batch that holds it (whose lock its writes take)."""

    job_id: int
    run_lease: int
    claim_id: int

    @property
    def key(self) -> AttemptKey:
        return AttemptKey(self.job_id, self.run_lease)


@dataclass
class AttemptRecord:
    """What the executor (or rescue, or an external completer) knows about an attempt when it
    ends."""

    ref: AttemptRef
    attempt: int
    max_attempts: int
    attempted_at: datetime | None
    progress: Any = None
    output_text: str | None = None
    staged: list[NewJob] = field(default_factory=list)
    poisoned: str | None = None


class Outcome(StrEnum):
    """What a guarded write did."""

    WRITTEN = "written"
    ALREADY = "already"  # a finalize retry found its own earlier commit
    STALE = "stale"


@dataclass(frozen=True)
class Ended:
    """The write's effect: written (with the resulting state), already written, or stale."""

    outcome: Outcome
    state: JobState | None = None
    dlq_reason: str | None = None
    output_kept: bool = False


class CompactCompletion(NamedTuple):
    """One completion waiting for a compact flush (a tuple: one is built per job, and the
    flush takes its columns apart with one ``zip``)."""

    job_id: int
    run_lease: int
    claim_id: int
    lane_seq: int
    output_text: str | None
    has_state: bool


@dataclass(frozen=True)
class GeneralCompletion:
    """One general-path completion without staged follow-ups, waiting for a flush (or an
    external completion's write)."""

    ref: AttemptRef
    attempt: int
    output_text: str | None
    keyed: bool  # the job has a unique key, which completion may release
