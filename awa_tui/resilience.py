"""The console degrades, it does not die: connection health and unexpected errors.

- ``ConnectionState`` is what the header and the banner say about the database: connecting,
  live (and when a read last succeeded), or lost (since when, and why).
- ``Guarded`` is mixed into the app and every screen: an exception raised by a message
  handler, an action or a widget call made from one is reported as a notification and the
  console keeps running. (Textual would otherwise stop that screen's message loop and exit.)
- ``unexpected_summary`` names an unexpected error by its type and where it was raised, never
  by its message: a message can carry job args, outputs or a DSN.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from textual.message import Message
from textual.message_pump import MessagePump
from textual.worker import Worker

from storage import ConnectionFailed

Status = Literal["connecting", "live", "lost"]


def clock_time(moment: datetime) -> str:
    """``12:00:05Z``: a wall-clock time the person can compare with their own."""
    return moment.astimezone(UTC).strftime("%H:%M:%SZ")


@dataclass(frozen=True)
class ConnectionState:
    status: Status = "connecting"
    refreshed_at: datetime | None = None
    """When a read last succeeded (the age of what is on screen)."""
    lost_since: datetime | None = None
    reason: str = ""
    """The last failure, already safe to show (engine messages carry no password)."""

    @property
    def lost(self) -> bool:
        return self.status == "lost"

    def succeeded(self, now: datetime) -> ConnectionState:
        return ConnectionState("live", refreshed_at=now)

    def failed(self, now: datetime, reason: str) -> ConnectionState:
        since = self.lost_since if self.lost and self.lost_since is not None else now
        return ConnectionState("lost", self.refreshed_at, since, reason)

    def header(self) -> str:
        """The header's part: ``live, refreshed 12:00:05Z`` or ``connection lost, retrying…``."""
        if self.status == "lost" and self.lost_since is not None:
            return f"connection lost, retrying since {clock_time(self.lost_since)}"
        if self.status == "live" and self.refreshed_at is not None:
            return f"live, refreshed {clock_time(self.refreshed_at)}"
        return "connecting…"

    def banner(self) -> str | None:
        """The banner line while the connection is lost: what is on screen is stale."""
        if not self.lost or self.lost_since is None:
            return None
        shown = (
            f"what is shown is stale, as of {clock_time(self.refreshed_at)}"
            if self.refreshed_at is not None
            else "nothing was loaded yet"
        )
        return (
            f"[b]CONNECTION LOST[/b] since {clock_time(self.lost_since)}, retrying · {shown} "
            f"· actions are refused until it is back"
        )

    def refusal(self) -> str:
        """Why a write is refused while the connection is lost."""
        since = clock_time(self.lost_since) if self.lost_since is not None else "now"
        return (
            f"Not sent: the connection to PostgreSQL is lost (since {since}) and is being "
            "retried. Try again when the header says live."
        )


def is_connection_error(exc: BaseException) -> bool:
    """The database is unreachable (or went away mid-read), as opposed to a refused request."""
    return isinstance(exc, ConnectionFailed | OSError)


def unexpected_summary(exc: BaseException) -> str:
    """``KeyError in awa_tui/widgets/job_table.py:97 (show)``: type and place, no message."""
    frames = traceback.extract_tb(exc.__traceback__)
    ours = [f for f in frames if "awa_tui" in f.filename or "storage" in f.filename]
    if not (ours or frames):
        return type(exc).__name__
    frame = (ours or frames)[-1]
    path = Path(frame.filename)
    parts = path.parts
    for root in ("awa_tui", "storage"):
        if root in parts:
            path = Path(*parts[len(parts) - parts[::-1].index(root) - 1 :])
            break
    else:
        path = Path(path.name)
    return f"{type(exc).__name__} in {path.as_posix()}:{frame.lineno} ({frame.name})"


@runtime_checkable
class WorkerObserver(Protocol):
    """The app: it decides what a finished worker means (a read succeeded, a failure)."""

    def worker_state_changed(self, event: Worker.StateChanged) -> None: ...


class Guarded(MessagePump):
    """Exceptions from this node's handlers become a notification, not a dead screen, and its
    workers report to the app: Textual tells only the node that started a worker."""

    async def _dispatch_message(self, message: Message) -> None:
        try:
            await super()._dispatch_message(message)
        except Exception as exc:
            report_unexpected(self, exc)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if isinstance(self.app, WorkerObserver):
            self.app.worker_state_changed(event)


def report_unexpected(node: MessagePump, exc: BaseException) -> None:
    node.app.notify(
        f"{unexpected_summary(exc)}. The console keeps running; this is a bug, please report "
        "it with the steps that led here.",
        title="Unexpected error",
        severity="error",
        timeout=15,
    )
