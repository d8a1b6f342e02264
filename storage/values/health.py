"""The runtime's health: running, degraded (a loop is failing and retrying) or failed (a loop
gave up; the runtime claims nothing more), as one small typed model a worker command and the
console can show.

Reasons name the loop and the error class (and SQLSTATE), never the data a message can quote.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum


class HealthState(StrEnum):
    STOPPED = "stopped"
    RUNNING = "running"
    DEGRADED = "degraded"
    FAILED = "failed"


@dataclass(frozen=True)
class Health:
    """``since`` is when the current state began (for degraded: the first failure in a row)."""

    state: HealthState
    since: datetime | None = None
    reason: str | None = None

    @property
    def ok(self) -> bool:
        return self.state is HealthState.RUNNING


STOPPED = Health(HealthState.STOPPED)
