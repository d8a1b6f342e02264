"""The periodic schedules stored on this schema, with when each runs next."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from awa_tui.messages import SchedulesLoaded
from awa_tui.query import JobQuery
from awa_tui.screens.base import Jump
from awa_tui.screens.confirm import Confirmed, ConfirmModal
from awa_tui.screens.table import HeadPart, TableScreen
from awa_tui.timefmt import both, relative
from storage import Client, PeriodicSchedule

COLUMN_LABELS = (
    "name",
    "kind",
    "queue",
    "schedule",
    "timezone",
    "next run",
    "last tick",
    "last job",
)
MISSED = (
    "Ticks are enqueued by the maintenance leader, once each. Ticks missed while no runtime "
    "ran: only the latest is enqueued when one runs again."
)
EMPTY = (
    "No periodic schedules: a runtime stores the ones its client declares "
    "(client.periodic(...)) when it starts."
)


class SchedulesScreen(TableScreen[PeriodicSchedule]):
    """Enter shows the jobs of the selected schedule's kind."""

    TITLE = "Periodic schedules"
    HELP = (
        "The periodic schedules stored on this schema and when each runs next. Enter opens "
        "the browser on the schedule's kind (esc comes back to this row); o opens its last job; "
        "t enqueues one job of it now (its ticks stay as they are)."
    )
    JUMP = Jump("S", "schedules", "Periodic schedules", show=False)
    READ_GROUP = "schedules"
    COLUMNS = tuple((label, label, None) for label in COLUMN_LABELS)
    ENTER = "jobs"
    LIVE = False
    WRITE_ACTIONS = frozenset({"trigger"})

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="schedules.back"),
        Binding("enter", "jobs", "Jobs of kind", id="schedules.jobs"),
        Binding("o", "last_job", "Last job", id="schedules.last_job"),
        Binding("t", "trigger", "Run now", id="schedules.trigger"),
        Binding("r", "refresh", "Refresh", id="schedules.refresh"),
        Binding("j", "down", "Down", show=False, id="schedules.down"),
        Binding("k", "up", "Up", show=False, id="schedules.up"),
    ]

    def compose_detail(self) -> ComposeResult:
        yield Static("", id="schedule-detail")

    async def fetch(self, client: Client) -> SchedulesLoaded:
        return SchedulesLoaded(await client.list_schedules())

    def on_schedules_loaded(self, message: SchedulesLoaded) -> None:
        self.show_rows(message.schedules)

    def row_key(self, row: PeriodicSchedule) -> str:
        return row.name

    def cells(self, row: PeriodicSchedule, now: datetime) -> Sequence[RenderableType]:
        return (
            Text(row.name, style="bold"),
            row.kind,
            row.queue,
            Text(row.cron or row.description, style="cyan"),
            row.timezone if row.cron else Text("-", style="dim"),
            relative(row.next_run_at, now),
            relative(row.last_tick_at, now) if row.last_tick_at else Text("never", style="dim"),
            str(row.last_job_id) if row.last_job_id is not None else Text("-", style="dim"),
        )

    def headline(self) -> list[HeadPart]:
        return [f" · {len(self.rows)} stored"]

    def show_current(self) -> None:
        current = self.current
        detail = self.query_one("#schedule-detail", Static)
        if current is None:
            detail.update(Text(EMPTY, style="dim"))
        else:
            detail.update(schedule_renderable(current, self.awa.now()))

    def binding_reason(self, action: str) -> str | None:
        current = self.current
        if action in ("jobs", "last_job", "trigger") and current is None:
            return "No schedule is selected."
        if action == "last_job" and current is not None and current.last_job_id is None:
            return "This schedule has not enqueued a job yet."
        return None

    def action_jobs(self) -> None:
        current = self.current
        if current is not None:
            self.awa.drill(JobQuery(kind=current.kind), self)

    def action_last_job(self) -> None:
        current = self.current
        if current is not None and current.last_job_id is not None:
            self.awa.open_job(current.last_job_id)

    def action_trigger(self) -> None:
        current = self.current
        if current is None or self.awa.refuse_write():
            return

        def done(confirmed: Confirmed | None) -> None:
            if confirmed:
                self.trigger(current.name, confirmed.reason)

        self.app.push_screen(
            ConfirmModal(
                f"Run schedule {current.name} now?",
                f"One {current.kind} job is enqueued on queue {current.queue} now; the schedule's "
                "own ticks stay as they are.",
                confirm_label=f"Run {current.name} now",
                keep_label="Don't run it",
            ),
            done,
        )

    @work(exclusive=True, exit_on_error=False, group="write")
    async def trigger(self, name: str, reason: str | None) -> None:
        client = await self.awa.client()
        try:
            row = await client.trigger_schedule(name, actor=self.awa.actor, reason=reason)
            self.awa.notify(f"Job {row.id} enqueued from schedule {name}.", title="Schedules")
        finally:
            self.awa.broadcast_changed([])
            self.reload()


def schedule_renderable(s: PeriodicSchedule, now: datetime) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("Schedule", Text(s.name, style="bold"))
    grid.add_row("When", s.description)
    grid.add_row("Enqueues", f"{s.kind} into queue {s.queue}")
    grid.add_row("Next run", both(s.next_run_at, now))
    grid.add_row("Last tick", both(s.last_tick_at, now) if s.last_tick_at else "never")
    grid.add_row("Last job", str(s.last_job_id) if s.last_job_id is not None else "-")
    grid.add_row("", Text(MISSED, style="dim"))
    return grid
