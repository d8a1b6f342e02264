"""The dead-letter queue: entries with reason and time, detail, retry, purge, bulk."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from functools import partial
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import DataTable, Static

from awa_tui.actions import ACTIONS, JobAction
from awa_tui.messages import JobsLoaded
from awa_tui.present import KEPT_OUTPUT_MARK, kind_text, one_line, plural
from awa_tui.query import JobQuery
from awa_tui.screens.base import Jump
from awa_tui.screens.table import HeadPart, TableScreen
from awa_tui.timefmt import both, relative
from awa_tui.writes import confirm_job_action
from storage import Client, JobRow

PAGE_SIZE = 50
DLQ_QUERY = JobQuery(tab="dlq")
WRITES = frozenset({"retry", "purge", "bulk_retry", "bulk_purge"})


class DlqScreen(TableScreen[JobRow]):
    """Dead-lettered jobs, newest first. Enter opens one; R retries, P purges (confirmed)."""

    TITLE = "Dead-letter queue"
    HELP = (
        "Jobs that ended for good and were dead-lettered, newest first, with the reason. "
        "Enter opens one; R retries it, P purges it; space marks several; ctrl+r and ctrl+x "
        "act on every entry."
    )
    JUMP = Jump("L", "dlq", "DLQ")
    READ_GROUP = "dlq"
    COLUMNS = (
        ("mark", " ", 1),
        ("id", "id", 7),
        ("kind", "kind", 24),
        ("queue", "queue", 10),
        ("when", "dead-lettered", 13),
        ("attempt", "att", 5),
        ("out", "out", 3),
        ("reason", "reason", None),
    )
    ENTER = "open_job"
    WRITE_ACTIONS = WRITES

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="dlq.back"),
        Binding("enter", "open_job", "Open", id="dlq.open"),
        Binding("space", "toggle_mark", "Mark", id="dlq.mark"),
        Binding("R", "retry", "Retry", id="dlq.retry"),
        Binding("P", "purge", "Purge", id="dlq.purge"),
        Binding("ctrl+r", "bulk_retry", "Retry all", id="dlq.retry_all"),
        Binding("ctrl+x", "bulk_purge", "Purge all", id="dlq.purge_all"),
        Binding("n", "next_page", "More", id="dlq.more"),
        Binding("r", "refresh", "Refresh", id="dlq.refresh"),
        Binding("y", "copy", "Copy id", id="dlq.copy"),
        Binding("j", "down", "Down", show=False, id="dlq.down"),
        Binding("k", "up", "Up", show=False, id="dlq.up"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.marks: set[int] = set()
        self.has_more = False

    def compose_detail(self) -> ComposeResult:
        yield Static("", id="dlq-entry")

    async def fetch(self, client: Client, *, append: bool = False) -> JobsLoaded:
        """The newest entries again (as many as shown), or with ``append`` the next page."""
        before = self.rows[-1].id if append and self.rows else None
        limit = PAGE_SIZE if append else max(PAGE_SIZE, len(self.rows))
        rows = (await client.browse(dlq=True, before_id=before, limit=limit)).rows
        return JobsLoaded(DLQ_QUERY, rows, append, not append, len(rows) == limit)

    def on_jobs_loaded(self, message: JobsLoaded) -> None:
        rows = self.rows + message.rows if message.append else list(message.rows)
        self.has_more = message.has_more
        self.marks &= {row.id for row in rows}
        self.show_rows(rows)

    def row_key(self, row: JobRow) -> str:
        return str(row.id)

    def cells(self, row: JobRow, now: datetime) -> Sequence[RenderableType]:
        dlq_at = row.dlq.dlq_at if row.dlq is not None else None
        reason = row.dlq.reason if row.dlq is not None else ""
        return (
            self._mark(row.id),
            Text(str(row.id), justify="right"),
            kind_text(row.kind, self.awa.describe_kind(row.kind)),
            row.queue,
            relative(dlq_at, now),
            f"{row.attempt}/{row.max_attempts}",
            Text(KEPT_OUTPUT_MARK, style="yellow")
            if row.kept_output_position() is not None
            else "",
            Text(one_line(reason, 70), style="red"),
        )

    def _mark(self, job_id: int) -> RenderableType:
        return Text("●", style="bold yellow") if job_id in self.marks else " "

    def headline(self) -> list[HeadPart]:
        more = " · more below (n)" if self.has_more else ""
        return [f" · {len(self.rows):,} shown, newest first{more}"]

    def show_current(self) -> None:
        row = self.current
        box = self.query_one("#dlq-entry", Static)
        if row is None or row.dlq is None:
            box.update(
                Text("The dead-letter queue is empty." if not self.rows else "", style="dim")
            )
            return
        now = self.awa.now()
        lines = [
            Text.assemble(
                ("Job ", "bold"), (str(row.id), "bold"), f" · {row.kind} · queue {row.queue}"
            ),
            Text.assemble(("Reason: ", "bold"), (row.dlq.reason, "red")),
            Text.assemble(("Dead-lettered: ", "bold"), both(row.dlq.dlq_at, now)),
            Text.assemble(
                ("Attempts: ", "bold"),
                f"{row.attempt} of {row.max_attempts}, "
                + plural(len(row.errors), "error entry", "error entries"),
            ),
        ]
        if row.last_error:
            lines.append(Text.assemble(("Last error: ", "bold"), (row.last_error, "red")))
        kept = row.kept_output_position()
        if kept is not None:
            lines.append(
                Text(
                    f"{KEPT_OUTPUT_MARK} Error entry #{kept + 1} kept a failed attempt's output "
                    "(enter, then e).",
                    style="yellow",
                )
            )
        box.update(Group(*lines))

    def binding_reason(self, action: str) -> str | None:
        if (
            action in ("open_job", "retry", "purge", "copy", "toggle_mark")
            and self.current is None
            and not (action in ("retry", "purge") and self.marks)
        ):
            return "The dead-letter queue is empty." if not self.rows else "No entry is selected."
        if action in ("bulk_retry", "bulk_purge") and not self.rows:
            return "The dead-letter queue is empty."
        if action == "next_page" and not self.has_more:
            return "This is the last page."
        return None

    def action_open_job(self) -> None:
        if self.current is not None:
            self.awa.open_job(self.current.id)

    def action_toggle_mark(self) -> None:
        row = self.current
        if row is None:
            return
        (self.marks.discard if row.id in self.marks else self.marks.add)(row.id)
        self.query_one(DataTable).update_cell(str(row.id), "mark", self._mark(row.id))
        self.query_one(DataTable).action_cursor_down()

    def action_next_page(self) -> None:
        self.read(partial(self.fetch, append=True))

    def action_copy(self) -> None:
        if self.current is not None:
            self.awa.copy_text(str(self.current.id), f"job id {self.current.id}")

    def action_retry(self) -> None:
        self._confirm(JobAction.RETRY_DLQ)

    def action_purge(self) -> None:
        self._confirm(JobAction.PURGE_DLQ)

    def action_bulk_retry(self) -> None:
        self.awa.run_bulk_matching(JobAction.RETRY_DLQ, DLQ_QUERY)

    def action_bulk_purge(self) -> None:
        self.awa.run_bulk_matching(JobAction.PURGE_DLQ, DLQ_QUERY)

    def _confirm(self, action: JobAction) -> None:
        info = ACTIONS[action]
        if self.marks:
            ids = sorted(self.marks, reverse=True)
            subject = f"the {plural(len(ids), 'marked dead-lettered job')}"
        elif self.current is not None:
            ids = [self.current.id]
            subject = f"dead-lettered job {self.current.id} ({self.current.kind})"
        else:
            return

        confirm_job_action(
            self.awa,
            action,
            ids,
            f"{info.label}: {subject}?",
            "Purging deletes them for good."
            if action is JobAction.PURGE_DLQ
            else "They go back to their queue with attempt 0; their error history is kept.",
            confirmed=lambda: self.marks.difference_update(ids),
        )
