"""Failure groups: what is failing most, and since when.

Failed, retryable and dead-lettered jobs grouped by kind and error signature (the error with
its numbers, ids and quoted values normalised; see ``storage.read.failure_groups``). Enter opens
the job browser on the group's kind and the signature's longest literal text. ``R`` retries
the group (its failed and dead-lettered jobs), ``C`` cancels it (its retryable jobs, which
would otherwise run again); both list the members first and confirm with their count, then go
through the state-guarded bulk actions, so a job that moved on meanwhile is skipped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Static

from awa_tui.actions import group_plan
from awa_tui.messages import FailureGroupsLoaded
from awa_tui.present import KEPT_OUTPUT_MARK, kind_text, plural
from awa_tui.query import JobQuery
from awa_tui.screens.base import Jump
from awa_tui.screens.confirm import ConfirmModal
from awa_tui.screens.table import HeadPart, TableScreen
from awa_tui.timefmt import both, relative
from awa_tui.widgets.group_outputs import GroupOutputsPanel, declared_fields, next_field
from awa_tui.widgets.widths import cut
from storage import Client, FailureGroup

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


class FailureGroupsScreen(TableScreen[FailureGroup]):
    """The largest groups first; the detail shows the sample error and where members are."""

    TITLE = "Failure groups"
    HELP = (
        "What is failing most: failed, retrying and dead-lettered jobs grouped by kind and "
        "error signature (numbers, ids and quoted values normalised), largest first. Enter "
        "opens the browser on the group's jobs (esc comes back to this row); R retries the "
        "group, C cancels its retryable jobs, o opens a sample job. Below, the outputs the "
        "members' failed attempts kept, by shape (their top-level keys) with counts and a "
        "sample; f splits them by a field the kind's output schema declares, one row per value."
    )
    JUMP = Jump("G", "failure_groups", "Failures")
    READ_GROUP = "groups"
    COLUMNS = (
        ("count", "count", 7),
        ("kind", "kind", 20),
        ("first", "first seen", 10),
        ("last", "last seen", 10),
        ("out", "out", 3),
        ("signature", "signature", None),  # last: it takes the room left
    )
    SHRINK = (("first", None), ("kind", 14), ("out", None))
    FLEXIBLE = ("signature",)
    FLEXIBLE_MIN = 40
    """Narrow: first seen leaves, kind narrows, the kept-output mark leaves; the signature keeps
    at least 40 cells, cut in its middle (``cut``) so two signatures never read the same."""
    ENTER = "jobs"
    WRITE_ACTIONS = WRITES

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="groups.back"),
        Binding("enter", "jobs", "Jobs of group", id="groups.jobs"),
        Binding("R", "retry_group", "Retry group", id="groups.retry"),
        Binding("C", "cancel_group", "Cancel group", id="groups.cancel"),
        Binding("o", "open_sample", "Sample job", id="groups.sample"),
        Binding("f", "split_field", "Split by field", id="groups.split"),
        Binding("r", "refresh", "Refresh", id="groups.refresh"),
        Binding("j", "down", "Down", show=False, id="groups.down"),
        Binding("k", "up", "Up", show=False, id="groups.up"),
    ]

    split: str | None = None
    """The declared output field the kept outputs are split by (``f``); None: not split."""

    def compose_detail(self) -> ComposeResult:
        yield Static("", id="group-summary")
        yield GroupOutputsPanel(id="group-outputs")

    async def fetch(self, client: Client) -> FailureGroupsLoaded:
        return FailureGroupsLoaded(await client.failure_groups())

    def on_failure_groups_loaded(self, message: FailureGroupsLoaded) -> None:
        self.show_rows(message.groups)

    def row_key(self, row: FailureGroup) -> str:
        return f"{row.kind}\x1f{row.signature}"

    def cells(self, row: FailureGroup, now: datetime) -> Sequence[RenderableType]:
        return (
            Text(f"{row.count:,}{'+' if row.capped else ''}", justify="right", style="bold"),
            kind_text(row.kind, self.awa.describe_kind(row.kind)),
            relative(row.first_seen, now),
            relative(row.last_seen, now),
            Text(KEPT_OUTPUT_MARK, style="yellow") if row.kept_output else "",
            Text(cut(row.signature, self.width_of("signature") or 90, middle=True), style="red"),
        )

    def headline(self) -> list[HeadPart]:
        total = sum(g.count for g in self.rows)
        parts: list[HeadPart] = [
            f" · {plural(len(self.rows), 'group')}, "
            f"{plural(total, 'failed, retrying or dead-lettered job')}"
        ]
        return parts

    def show_current(self) -> None:
        g = self.current
        box = self.query_one("#group-summary", Static)
        panel = self.query_one(GroupOutputsPanel)
        if g is None:
            box.update(Text("Nothing is failing." if self.loaded else "", style="dim"))
            panel.hide()
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
        if self.split not in self.fields(g):
            self.split = None
        panel.follow(self.awa.client, g, self.split)

    def fields(self, group: FailureGroup) -> list[str]:
        """The fields the group's kind declares in its output schema: what ``f`` splits by."""
        return declared_fields(self.awa.describe_kind(group.kind))

    def binding_reason(self, action: str) -> str | None:
        current = self.current
        if action in (*WRITES, "jobs", "open_sample", "split_field") and current is None:
            return "No failure group is selected."
        if action == "split_field" and current and not self.fields(current):
            return "This kind declares no output schema fields to split its outputs by."
        if action == "retry_group" and current and not (current.failed or current.dead_lettered):
            return "This group has no failed or dead-lettered job to retry (its jobs will retry)."
        if action == "cancel_group" and current and not current.retryable:
            return "This group has no retryable job to cancel (failed jobs have ended)."
        return None

    def action_jobs(self) -> None:
        g = self.current
        if g is None:
            return
        tab = group_tab(g)
        query = JobQuery(tab=tab, kind=g.kind, search=search_text(g.signature) or None)
        self.awa.drill(query, self)
        if tab == "all" and g.dead_lettered:
            self.notify(
                f"{g.dead_lettered} of this group's jobs are dead-lettered: the DLQ tab (0) "
                "lists them with this filter.",
                title="Failure group",
            )

    def action_open_sample(self) -> None:
        if self.current is not None:
            self.awa.open_job(self.current.sample_job_id)

    def action_split_field(self) -> None:
        """Split the kept outputs by the next declared field, then by none, then again."""
        if self.current is not None:
            self.split = next_field(self.fields(self.current), self.split)
            self.show_current()

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
        plan = group_plan(members, retry=retry)
        if retry:
            verb, keep = "Retry", "Don't retry"
            detail = (
                f"{len(members.failed):,} failed and {len(members.dead_lettered):,} "
                "dead-lettered jobs go back to their queues with attempt 0; their error "
                "history is kept."
            )
        else:
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
                    done += await client.bulk_action(
                        action.value, ids=ids, actor=self.awa.actor, reason=confirmed.reason
                    )
            past = "retried" if retry else "cancelled"
            self.awa.notify(f"{done:,} of {count:,} jobs {past}.", title=verb)
        finally:
            self.awa.broadcast_changed([])
