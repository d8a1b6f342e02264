"""The browser's table: one row per job, newest first, updated in place on refresh."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

from awa_tui.present import (
    attempt_text,
    contextual_time,
    heartbeat_text,
    kind_text,
    output_marker,
    state_text,
)
from awa_tui.resilience import Guarded
from awa_tui.widgets.widths import Column, WidthPolicy, cut, width_of
from storage import JobKindDescriptor, JobRow, JobState, SortColumn, SortOrder

COLUMNS: tuple[tuple[str, str, int | None], ...] = (
    ("mark", " ", 1),
    ("id", "id", 6),
    ("kind", "kind", 24),
    ("state", "state", 9),
    ("queue", "queue", 9),
    ("attempt", "att", 5),
    ("time", "when", 13),
    ("output", "out", 3),
    ("error", "last error", None),
)
HEARTBEAT_COLUMN = ("beat", "heartbeat", None)
"""On the Running tab it takes the last error's place (a running job shows no last error)."""
CELL_KEYS = (*(key for key, _l, _w in COLUMNS), HEARTBEAT_COLUMN[0])
SORT_COLUMNS = {SortColumn.ID: "id", SortColumn.WHEN: "time", SortColumn.ATTEMPTS: "attempt"}
WIDTHS = WidthPolicy(
    COLUMNS,
    steps=(("kind", 16), ("queue", None), ("attempt", None), ("time", None), ("output", None)),
    flexible=("error", HEARTBEAT_COLUMN[0]),
    flexible_min=48,
)
"""How the table fits a narrow terminal, in order: narrow kind, drop queue, att, when and out.
id, kind, state and last error always stay; the last error takes the room left (at least 48)."""


def fit_columns(width: int, heartbeats: bool = False) -> tuple[Column, ...]:
    """The columns shown in ``width`` cells; on the Running tab the heartbeat takes the last
    error's place."""
    columns = [HEARTBEAT_COLUMN if heartbeats and c[0] == "error" else c for c in COLUMNS]
    return WIDTHS.fit(width, columns)


Lookup = Callable[[str], JobKindDescriptor | None]


def job_cells(
    row: JobRow, now: datetime, describe: Lookup, marked: bool, error_width: int
) -> list[Text | str]:
    failed = row.state in (JobState.FAILED, JobState.RETRYABLE) or row.dlq is not None
    error = cut(row.last_error, error_width) if failed and row.last_error else ""
    return [
        Text("●", style="bold yellow") if marked else Text(" "),
        Text(str(row.id), justify="right"),
        kind_text(row.kind, describe(row.kind)),
        state_text(row, short=True),
        row.queue,
        attempt_text(row),
        contextual_time(row, now),
        output_marker(row),
        Text(error, style="red") if error else "",
        heartbeat_text(row, now),
    ]


def unique_jobs(rows: Sequence[JobRow]) -> list[JobRow]:
    """``rows`` without repeated ids (the first of each kept): table keys must be unique."""
    seen: set[int] = set()
    unique = []
    for row in rows:
        if row.id not in seen:
            seen.add(row.id)
            unique.append(row)
    return unique


class JobTable(Guarded, DataTable[Text | str]):
    """Rows keyed by job id. ``show`` replaces the rows and keeps the cursor on the same job."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open", id="table.open"),
        Binding("j", "cursor_down", "Down", show=False, id="table.down"),
        Binding("k", "cursor_up", "Up", show=False, id="table.up"),
        Binding("g", "scroll_top", "Top", show=False, id="table.top"),
        Binding("end", "scroll_bottom", "Bottom", show=False, id="table.bottom"),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=False)
        self.jobs: list[JobRow] = []
        self.shown_columns: tuple[tuple[str, str, int | None], ...] = ()
        self._marks: Collection[int] = ()
        self._render_ctx: tuple[datetime, Lookup] | None = None
        self.sort_mark: tuple[str, bool] | None = None
        """The column key of a non-default order and whether it is descending."""
        self.heartbeats = False
        """Whether the heartbeat column is shown (the Running tab)."""
        self.placed: int | None = None
        """The row a refresh last put the cursor on to keep it on its job (``show``): the
        highlight that follows is the refresh's, not a person's move."""

    def on_mount(self) -> None:
        self._set_columns(fit_columns(self.size.width or 200, self.heartbeats))

    def on_resize(self, event: events.Resize) -> None:
        columns = fit_columns(event.size.width, self.heartbeats)
        if columns != self.shown_columns:
            self._rebuild(columns)

    def show_heartbeats(self, on: bool) -> None:
        """Show each running job's heartbeat age in place of the last error (Running tab)."""
        if on != self.heartbeats:
            self.heartbeats = on
            self._rebuild(fit_columns(self.size.width or 200, on))

    def mark_sort(self, order: SortOrder) -> None:
        """Mark the column of an order other than the default (newest first) with ▼ or ▲."""
        mark = None if order == SortOrder() else (SORT_COLUMNS[order.column], order.descending)
        if mark != self.sort_mark:
            self.sort_mark = mark
            self._rebuild(self.shown_columns)

    def _rebuild(self, columns: tuple[tuple[str, str, int | None], ...]) -> None:
        keep = self.cursor_row
        self.clear(columns=True)
        self._set_columns(columns)
        if self._render_ctx is not None:
            now, describe = self._render_ctx
            for row in self.jobs:
                self.add_row(*self._cells(row, now, describe, self._marks), key=str(row.id))
            if self.jobs:
                self.move_cursor(row=min(keep, len(self.jobs) - 1), animate=False)

    def _set_columns(self, columns: tuple[tuple[str, str, int | None], ...]) -> None:
        self.shown_columns = columns
        for key, label, width in columns:
            if self.sort_mark is not None and self.sort_mark[0] == key:
                label = f"{label} {'▼' if self.sort_mark[1] else '▲'}"
            self.add_column(label, key=key, width=width)

    def _cells(
        self, row: JobRow, now: datetime, describe: Lookup, marks: Collection[int]
    ) -> list[Text | str]:
        error_width = width_of(self.shown_columns, "error") or WIDTHS.flexible_min
        values = job_cells(row, now, describe, row.id in marks, error_width)
        cells = dict(zip(CELL_KEYS, values, strict=True))
        return [cells[key] for key, _l, _w in self.shown_columns]

    def action_select_cursor(self) -> None:
        if not self.jobs:  # no row to select: the screen's own Enter, refused or typed ahead
            self.call_later(self.app.run_action, "open_job", self.screen)
            return
        super().action_select_cursor()

    @property
    def current_job(self) -> JobRow | None:
        if not self.jobs or not 0 <= self.cursor_row < len(self.jobs):
            return None
        return self.jobs[self.cursor_row]

    def show(
        self,
        rows: Sequence[JobRow],
        now: datetime,
        describe: Lookup,
        marks: Collection[int],
        *,
        append: bool = False,
    ) -> None:
        """Render ``rows``; unchanged rows are updated in place and the cursor stays on its job.

        Any rows are accepted: a job listed twice (reads racing a state change) is shown once,
        the first time it appears.
        """
        rows = unique_jobs(rows)
        self._render_ctx, self._marks = (now, describe), marks
        if append:
            for row in rows:
                if str(row.id) not in self.rows:
                    self.jobs.append(row)
                    self.add_row(*self._cells(row, now, describe, marks), key=str(row.id))
            return
        keep = self.current_job
        old_index = self.cursor_row
        old_keys = [job.id for job in self.jobs]
        new_keys = [row.id for row in rows]
        if old_keys == new_keys:
            self.jobs = list(rows)
            for row in rows:
                self._update_cells(row, self._cells(row, now, describe, marks))
            return
        scroll_y = self.scroll_y
        self.clear()
        self.jobs = list(rows)
        for row in rows:
            self.add_row(*self._cells(row, now, describe, marks), key=str(row.id))
        if not rows:
            return
        index = min(old_index, len(rows) - 1)
        if keep is not None and keep.id in new_keys:
            index = new_keys.index(keep.id)
        # Keep the selected job where it was on screen, not just selected.
        self.scroll_to(y=max(0, scroll_y + index - old_index), animate=False, immediate=True)
        self.placed = index
        self.move_cursor(row=index, animate=False, scroll=False)

    def _update_cells(self, row: JobRow, cells: list[Text | str]) -> None:
        for (column, _label, _width), value in zip(self.shown_columns, cells, strict=True):
            try:
                if self.get_cell(str(row.id), column) != value:
                    self.update_cell(str(row.id), column, value)
            except (CellDoesNotExist, RowDoesNotExist):
                continue

    def set_marked(self, job_id: int, marked: bool) -> None:
        mark = Text("●", style="bold yellow") if marked else Text(" ")
        try:
            self.update_cell(str(job_id), "mark", mark)
        except (CellDoesNotExist, RowDoesNotExist):
            return

    def select_job(self, job_id: int) -> bool:
        try:
            index = self.get_row_index(str(job_id))
        except RowDoesNotExist:
            return False
        self.move_cursor(row=index)
        return True

    def job_at(self, coordinate: Coordinate) -> JobRow | None:
        if 0 <= coordinate.row < len(self.jobs):
            return self.jobs[coordinate.row]
        return None
