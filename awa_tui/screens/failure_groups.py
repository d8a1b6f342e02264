"""Failure groups: what is failing most, and since when.

Failed, retryable and dead-lettered jobs grouped by kind and error signature (the error with
its numbers, ids and quoted values normalised; see ``storage.failure_groups``). Enter opens
the job browser on the group's kind and the signature's longest literal text. ``R`` retries
the group (its failed and dead-lettered jobs), ``C`` cancels it (its retryable jobs, which
would otherwise run again); both list the members first and confirm with their count, then go
through the state-guarded bulk actions, so a job that moved on meanwhile is skipped.
"""

from __future__ import annotations

import re
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Static

from awa_tui.messages import FailureGroupsLoaded, JobsChanged
from awa_tui.present import KEPT_OUTPUT_MARK, kind_text, one_line, plural
from awa_tui.query import JobQuery
from awa_tui.screens.base import TableScreen
from awa_tui.screens.confirm import ConfirmModal
from awa_tui.timefmt import both, relative
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.mode_banner import ModeBanner
from storage import FailureGroup

WRITES = frozenset({"retry_group", "cancel_group"})
_PLACEHOLDER = re.compile(r"<(?:n|str|uuid|hex)>")


def search_text(signature: str) -> str:
    """The signature's longest literal run, without its ``Class:`` prefix: what the browser's
    text filter can look for in the jobs' error messages."""
    _head, sep, message = signature.partition(": ")
    pieces = [p.strip() for p in _PLACEHOLDER.split(message if sep else signature)]
    return max(pieces, key=len, default="")


def group_tab(group: FailureGroup) -> str:
    """The browser tab that lists the group's members: their one place, else All (which
    does not list dead-lettered jobs: the DLQ tab does)."""
    places = {"failed": group.failed, "retryable": group.retryable, "dlq": group.dead_lettered}
    present = [tab for tab, count in places.items() if count]
    return present[0] if len(present) == 1 else "all"


class FailureGroupsScreen(TableScreen):
    """The largest groups first; the detail shows the sample error and where members are."""

    WRITE_ACTIONS = WRITES

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="groups.back"),
        Binding("enter", "jobs", "Jobs of group", id="groups.jobs"),
        Binding("R", "retry_group", "Retry group", id="groups.retry"),
        Binding("C", "cancel_group", "Cancel group", id="groups.cancel"),
        Binding("o", "open_sample", "Sample job", id="groups.sample"),
        Binding("r", "refresh", "Refresh", id="groups.refresh"),
        Binding("j", "down", "Down", show=False, id="groups.down"),
        Binding("k", "up", "Up", show=False, id="groups.up"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.groups: list[FailureGroup] = []
        self.loaded = False
        self.stale = False
        self.fetching = False

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        yield Static(Text("Failure groups", style="bold"), id="groups-head")
        yield DataTable(id="groups-table", cursor_type="row")
        with VerticalScroll(id="group-detail"):
            yield Static("", id="group-summary")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        for key, label, width in (
            ("count", "count", 7),
            ("kind", "kind", 20),
            ("first", "first seen", 10),
            ("last", "last seen", 10),
            ("out", "out", 3),
            ("signature", "signature", None),  # last: a narrow terminal cuts only this
        ):
            table.add_column(label, key=key, width=width)
        table.focus()
        self.load()
        self.start_live_refresh()

    @work(exclusive=True, exit_on_error=False, group="groups")
    async def load(self) -> None:
        client = await self.awa.client()
        self.fetching = True
        try:
            self.post_message(FailureGroupsLoaded(await client.failure_groups()))
        finally:
            self.fetching = False

    def on_failure_groups_loaded(self, message: FailureGroupsLoaded) -> None:
        keep = self.current  # before the rows change: the row the cursor is on
        self.groups = message.groups
        self.loaded = True
        self.stale = False
        table = self.query_one(DataTable)
        table.clear()
        now = self.awa.now()
        for g in self.groups:
            table.add_row(
                Text(f"{g.count:,}{'+' if g.capped else ''}", justify="right", style="bold"),
                kind_text(g.kind, self.awa.describe_kind(g.kind)),
                relative(g.first_seen, now),
                relative(g.last_seen, now),
                Text(KEPT_OUTPUT_MARK, style="yellow") if g.kept_output else "",
                Text(one_line(g.signature, 90), style="red"),
                key=_key(g),
            )
        keys = [_key(g) for g in self.groups]
        if keep is not None and _key(keep) in keys:
            table.move_cursor(row=keys.index(_key(keep)), animate=False)
        self._head()
        self.show_current()
        self.refresh_bindings()

    def _head(self) -> None:
        total = sum(g.count for g in self.groups)
        parts: list[str | tuple[str, str]] = [
            ("Failure groups", "bold"),
            f" · {plural(len(self.groups), 'group')}, "
            f"{plural(total, 'failed, retrying or dead-lettered job')}",
        ]
        if self.stale:
            parts.append((" · stale: the connection is lost", "bold red"))
        self.query_one("#groups-head", Static).update(Text.assemble(*parts))

    def stale_changed(self, stale: bool) -> None:
        """Marked while lost; when it is back, the app's JobsChanged reloads the rows."""
        self.stale = stale
        self._head()

    def on_jobs_changed(self, message: JobsChanged) -> None:
        self.load()

    @property
    def current(self) -> FailureGroup | None:
        row = self.query_one(DataTable).cursor_row
        return self.groups[row] if 0 <= row < len(self.groups) else None

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_current()
        self.refresh_bindings()

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_jobs()

    def show_current(self) -> None:
        g = self.current
        box = self.query_one("#group-summary", Static)
        if g is None:
            box.update(Text("Nothing is failing." if self.loaded else "", style="dim"))
            return
        now = self.awa.now()
        where = ", ".join(
            f"{n:,} {label}"
            for n, label in (
                (g.failed, "failed"),
                (g.retryable, "retryable"),
                (g.dead_lettered, "dead-lettered"),
            )
            if n
        )
        lines = [
            Text.assemble(("Kind ", "bold"), (g.kind, "bold"), f" · queues {', '.join(g.queues)}"),
            Text.assemble(("Signature: ", "bold"), (g.signature, "red")),
            Text.assemble(("Jobs: ", "bold"), where + (" (at least)" if g.capped else "")),
            Text.assemble(("First seen: ", "bold"), both(g.first_seen, now)),
            Text.assemble(("Last seen: ", "bold"), both(g.last_seen, now)),
            Text.assemble(
                ("Sample: ", "bold"), f"job {g.sample_job_id} (o opens it): ", (g.sample_error, "")
            ),
        ]
        if g.kept_output:
            lines.append(
                Text(f"{KEPT_OUTPUT_MARK} At least one member kept its failed attempt's output.")
            )
        box.update(Group(*lines))

    def binding_reason(self, action: str) -> str | None:
        if action in WRITES and not self.awa.writable:
            return self.awa.read_only_reason
        current = self.current if self.is_mounted else None
        if action in (*WRITES, "jobs", "open_sample") and current is None:
            return "No failure group is selected."
        if action == "retry_group" and current and not (current.failed or current.dead_lettered):
            return "This group has no failed or dead-lettered job to retry (its jobs will retry)."
        if action == "cancel_group" and current and not current.retryable:
            return "This group has no retryable job to cancel (failed jobs have ended)."
        return None

    def reload(self) -> None:
        self.load()

    def action_jobs(self) -> None:
        g = self.current
        if g is None:
            return
        tab = group_tab(g)
        self.awa.show_jobs(JobQuery(tab=tab, kind=g.kind, search=search_text(g.signature) or None))
        if tab == "all" and g.dead_lettered:
            self.notify(
                f"{g.dead_lettered} of this group's jobs are dead-lettered: the DLQ tab (0) "
                "lists them with this filter.",
                title="Failure group",
            )

    def action_open_sample(self) -> None:
        if self.current is not None:
            self.awa.open_job(self.current.sample_job_id)

    def action_retry_group(self) -> None:
        if self.current is not None:
            self.act_on_group(self.current, retry=True)

    def action_cancel_group(self) -> None:
        if self.current is not None:
            self.act_on_group(self.current, retry=False)

    @work(exclusive=True, exit_on_error=False, group="write")
    async def act_on_group(self, group: FailureGroup, *, retry: bool) -> None:
        """List the members now, confirm with their count, then run the bulk actions."""
        if self.awa.refuse_write():
            return
        client = await self.awa.client()
        members = await client.failure_group_jobs(group.kind, group.signature)
        if retry:
            plan = [("retry", members.failed), ("retry_dlq", members.dead_lettered)]
            verb, keep = "Retry", "Don't retry"
            detail = (
                f"{len(members.failed):,} failed and {len(members.dead_lettered):,} "
                "dead-lettered jobs go back to their queues with attempt 0; their error "
                "history is kept."
            )
        else:
            plan = [("cancel", members.retryable)]
            verb, keep = "Cancel", "Keep"
            detail = (
                f"{plural(len(members.retryable), 'retryable job')}: cancelled, never run again."
            )
        count = sum(len(ids) for _action, ids in plan)
        if count == 0:
            self.awa.notify("The group has no job this applies to now.", severity="warning")
            return
        confirmed = await self.app.push_screen_wait(
            ConfirmModal(
                f"{verb} {plural(count, 'job')} of this group?",
                f"{group.kind} · {group.signature} (counted just now). "
                f"{detail} Jobs that moved on when the action runs are skipped.",
                confirm_label=f"{verb} {plural(count, 'job')}",
                keep_label=keep,
                danger=not retry,
            )
        )
        if not confirmed:
            return
        try:
            done = 0
            for action, ids in plan:
                if ids:
                    done += await client.bulk_action(action, ids=ids)
            past = "retried" if retry else "cancelled"
            self.awa.notify(f"{done:,} of {count:,} jobs {past}.", title=verb)
        finally:
            self.awa.broadcast_changed([])


def _key(group: FailureGroup) -> str:
    return f"{group.kind}\x1f{group.signature}"
