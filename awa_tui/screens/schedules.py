"""The periodic schedules stored on this schema, with when each runs next."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Footer, Static

from awa_tui.messages import SchedulesLoaded
from awa_tui.query import JobQuery
from awa_tui.screens.base import TableScreen
from awa_tui.timefmt import both, relative
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.mode_banner import ModeBanner
from storage import PeriodicSchedule

COLUMNS = ("name", "kind", "queue", "schedule", "timezone", "next run", "last tick", "last job")
MISSED = (
    "Ticks are enqueued by the maintenance leader, once each. Ticks missed while no runtime "
    "ran: only the latest is enqueued when one runs again."
)
EMPTY = (
    "No periodic schedules: a runtime stores the ones its client declares "
    "(client.periodic(...)) when it starts."
)


class SchedulesScreen(TableScreen):
    """Enter shows the jobs of the selected schedule's kind."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="schedules.back"),
        Binding("enter", "jobs", "Jobs of kind", id="schedules.jobs"),
        Binding("o", "last_job", "Last job", id="schedules.last_job"),
        Binding("r", "refresh", "Refresh", id="schedules.refresh"),
        Binding("j", "down", "Down", show=False, id="schedules.down"),
        Binding("k", "up", "Up", show=False, id="schedules.up"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.schedules: list[PeriodicSchedule] = []

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        yield Static(Text("Periodic schedules", style="bold"), id="schedules-head")
        yield DataTable(id="schedules-table", cursor_type="row")
        yield Static("", id="schedule-detail")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        for label in COLUMNS:
            table.add_column(label, key=label)
        table.focus()
        self.load()

    @work(exclusive=True, exit_on_error=False, group="schedules")
    async def load(self) -> None:
        client = await self.awa.client()
        self.post_message(SchedulesLoaded(await client.list_schedules()))

    def on_schedules_loaded(self, message: SchedulesLoaded) -> None:
        self.schedules = message.schedules
        now = self.awa.now()
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for s in self.schedules:
            table.add_row(
                Text(s.name, style="bold"),
                s.kind,
                s.queue,
                Text(s.cron or s.description, style="cyan"),
                s.timezone if s.cron else Text("-", style="dim"),
                relative(s.next_run_at, now),
                relative(s.last_tick_at, now) if s.last_tick_at else Text("never", style="dim"),
                str(s.last_job_id) if s.last_job_id is not None else Text("-", style="dim"),
                key=s.name,
            )
        if self.schedules:
            table.move_cursor(row=min(cursor, len(self.schedules) - 1))
        self.show_schedule()
        self.query_one("#schedules-head", Static).update(
            Text.assemble(("Periodic schedules", "bold"), f" · {len(self.schedules)} stored")
        )
        self.refresh_bindings()

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_jobs()

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_schedule()

    def show_schedule(self) -> None:
        current = self.current
        detail = self.query_one("#schedule-detail", Static)
        if current is None:
            detail.update(Text(EMPTY, style="dim"))
        else:
            detail.update(schedule_renderable(current, self.awa.now()))
        self.refresh_bindings()

    @property
    def current(self) -> PeriodicSchedule | None:
        row = self.query_one(DataTable).cursor_row
        return self.schedules[row] if 0 <= row < len(self.schedules) else None

    def binding_reason(self, action: str) -> str | None:
        current = self.current if self.is_mounted else None
        if action in ("jobs", "last_job") and current is None:
            return "No schedule is selected."
        if action == "last_job" and current is not None and current.last_job_id is None:
            return "This schedule has not enqueued a job yet."
        return None

    def reload(self) -> None:
        self.load()

    def action_jobs(self) -> None:
        current = self.current
        if current is not None:
            self.awa.show_jobs(JobQuery(kind=current.kind))

    def action_last_job(self) -> None:
        current = self.current
        if current is not None and current.last_job_id is not None:
            self.awa.open_job(current.last_job_id)


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
