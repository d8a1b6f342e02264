"""``t`` in the job detail: the job's attempts as a timeline.

One row per readiness of the job, oldest first: when it became ready, when it was claimed, its
last heartbeat and progress and its callback while it runs, and how and when it ended, with the
time it took, and the runtime that claimed it (host:pid and when it started); the error each
failed attempt recorded is matched by position (``storage.error_positions``: attempt numbers
restart after a DLQ retry), read in the same snapshot as the attempts. Everything comes from
what storage keeps (``Client.job_timeline``), so an attempt older than the rings' retention
shows with no claim, and a finished attempt has no heartbeat left.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any, ClassVar

import orjson
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from awa_tui.messages import TimelineLoaded
from awa_tui.present import one_line, plural, runtime_label, runtime_short
from awa_tui.screens.base import AwaScreen
from awa_tui.timefmt import absolute, relative
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.mode_banner import ModeBanner
from storage import AttemptSpan, JobRow, error_positions

OUTCOMES = {
    "completed": ("completed", "green"),
    "completed_external": ("completed by callback", "green"),
    "retried": ("failed, retried", "yellow"),
    "retry_after": ("failed", "bold red"),
    "error": ("failed", "bold red"),
    "terminal": ("failed (terminal)", "bold red"),
    "contract": ("failed (no callback)", "bold red"),
    "failed_external": ("failed by callback", "bold red"),
    "rescued": ("rescued (lease lost)", "bold yellow"),
    "shutdown": ("given back (worker stopped)", "bold yellow"),
    "callback_timeout": ("callback timed out", "bold yellow"),
    "cancel": ("cancelled by handler", "dim"),
    "cancelled_admin": ("cancelled by operator", "dim"),
    "snoozed": ("snoozed", "cyan"),
}
"""How each stored closure outcome reads: what happened to the attempt, in the words of the
docs (completed, failed, rescued, cancelled), not the storage's outcome codes."""


RUNTIME_WIDTH = 14
"""The runtime column: host:pid (a long host cut); the note below names it in full."""
ERROR_WIDTH = 21  # the table fits 120 columns; the note below has the whole error


def took(span: timedelta | None) -> str:
    if span is None:
        return "-"
    seconds = span.total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    return f"{seconds:.1f}s" if seconds < 120 else f"{seconds / 60:.0f}m"


class TimelineScreen(AwaScreen):
    """The attempts of one job; ``r`` re-reads them, esc goes back to the detail."""

    TITLE = "Attempt timeline"
    HELP = (
        "Each attempt of the job: when it was claimed, how long it ran, its heartbeats and how "
        "it ended. r reads them again."
    )
    READ_GROUP = "job"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="timeline.back"),
        Binding("r", "refresh", "Refresh", id="timeline.refresh"),
        Binding("j", "down", "Down", show=False, id="timeline.down"),
        Binding("k", "up", "Up", show=False, id="timeline.up"),
    ]

    def __init__(self, row: JobRow) -> None:
        super().__init__()
        self.row = row
        self.spans: list[AttemptSpan] = []
        self.errors: list[dict[str, Any]] = list(row.errors)

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        yield Static(Text(f"Attempt timeline · job {self.row.id}", style="bold"), id="tl-head")
        yield DataTable(id="tl-table", cursor_type="row")
        yield Static("", id="tl-note")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        for key, label, width in (
            ("attempt", "att", 3),
            ("ready", "ready", 8),
            ("claimed", "claimed", 8),
            ("ended", "ended", 8),
            ("took", "took", 6),
            ("runtime", "claimed by", RUNTIME_WIDTH),
            ("outcome", "outcome", 21),
            ("live", "while running", 13),
            ("error", "error", ERROR_WIDTH),
        ):
            table.add_column(label, key=key, width=width)
        table.focus()
        self.load()

    @work(exclusive=True, exit_on_error=False, group=READ_GROUP)
    async def load(self) -> None:
        client = await self.awa.client()
        read = await client.job_timeline(self.row.id)
        errors = None if read.row is None else read.row.errors
        self.post_message(TimelineLoaded(self.row.id, read.spans, errors))

    def on_timeline_loaded(self, message: TimelineLoaded) -> None:
        if message.job_id != self.row.id:
            return
        self.spans = message.spans
        if message.errors is not None:  # None: the job is gone; its last known errors stay
            self.errors = message.errors
        now = self.awa.now()
        errors = self._errors()
        table = self.query_one(DataTable)
        table.clear()
        for index, span in enumerate(self.spans):
            code = span.outcome or ("waiting" if span.waiting else "running")
            if span.claimed_at is None:
                code = "not claimed"
            outcome, style = OUTCOMES.get(code, (code, ""))
            table.add_row(
                str(span.attempt) if span.attempt is not None else "-",
                _when(span.ready_at),
                _when(span.claimed_at),
                _when(span.ended_at),
                took(span.duration),
                runtime_short(span.runtime, RUNTIME_WIDTH),
                Text(outcome, style=style),
                _live(span, now),
                Text(one_line(errors[index], ERROR_WIDTH), style="red"),
                key=str(span.run_lease),
            )
        self.show_current()

    @on(DataTable.RowHighlighted)
    def show_current(self) -> None:
        """The note: what the rows are, and the highlighted attempt's whole error."""
        shown = len(self.spans)
        note = Text(
            f"{plural(shown, 'run')} of job {self.row.id} "
            f"({self.row.kind}), oldest first; times UTC, first ready {_day(self.spans)}. "
            "Heartbeat, progress and callback exist only while an attempt runs.",
            style="dim",
        )
        row = self.query_one(DataTable).cursor_row
        if 0 <= row < shown and (runtime := self.spans[row].runtime) is not None:
            note.append("\nClaimed by ", style="bold")
            note.append(runtime_label(runtime, full=True))
        if 0 <= row < shown and (error := self._errors()[row]) is not None:
            note.append(f"\nAttempt {self.spans[row].attempt}: ", style="bold")
            note.append(error, style="red")
        self.query_one("#tl-note", Static).update(note)

    def _errors(self) -> list[str | None]:
        """Each span's error text, matched by position (``storage.error_positions``)."""
        errors = self.errors
        return [
            None if at is None else str(errors[at].get("error", ""))
            for at in error_positions(self.spans, errors)
        ]

    def action_back(self) -> None:
        self.dismiss()

    def action_refresh(self) -> None:
        self.load()

    def action_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()


def _when(moment: datetime | None) -> str:
    """``07:55:00`` (UTC): the date is in the note line, and the row's order says the rest."""
    return "-" if moment is None else absolute(moment)[11:19]


def _day(spans: list[AttemptSpan]) -> str:
    return absolute(spans[0].ready_at)[:10] if spans else "-"


def _live(span: AttemptSpan, now: datetime) -> Text:
    parts = []
    if span.heartbeat_at is not None:
        parts.append(f"beat {relative(span.heartbeat_at, now)}")
    if span.progress is not None:
        parts.append(one_line(orjson.dumps(span.progress).decode(), 24))
    if span.callback_id is not None:
        due = relative(span.callback_timeout_at, now)
        parts.append(f"callback {span.callback_id[:8]}… times out {due}")
    return Text(" · ".join(parts), style="cyan")
