"""Every kind: its descriptor, declared output type and schema, job counts, stale flags, and
the selected kind's schema drift and last good output."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.widgets import Label, Static

from awa_tui.messages import KindsLoaded
from awa_tui.query import JobQuery
from awa_tui.screens.base import Jump
from awa_tui.screens.enqueue import EnqueueJobModal
from awa_tui.screens.table import HeadPart, TableScreen
from awa_tui.timefmt import both
from awa_tui.widgets.drift import DriftPanel
from awa_tui.widgets.json_view import JsonView
from awa_tui.widgets.last_good import LastGoodPanel
from storage import Client, JobRow, JobState, KindSummary

COUNTED = (
    ("avail", JobState.AVAILABLE),
    ("run", JobState.RUNNING),
    ("wait", JobState.WAITING_EXTERNAL),
    ("sched", JobState.SCHEDULED),
    ("retry", JobState.RETRYABLE),
    ("failed", JobState.FAILED),
)
EMPTY = "No kinds yet: no runtime has published a descriptor and no job exists."


class KindsScreen(TableScreen[KindSummary]):
    """Enter shows the kind's jobs; ``s`` its schema full screen; ``n`` enqueues a new job."""

    TITLE = "Kinds"
    HELP = (
        "Every kind a runtime declared or a job uses: its jobs by state, its declared output "
        "type and schema, and whether its descriptor is current. Enter opens the browser on "
        "the kind's jobs (esc comes back to this row); s shows its output schema. Below the "
        "descriptor, its schema drift: how many of its recent stored outputs (completed ones, "
        "and those its failed attempts kept, listed as kept: failed, retryable or "
        "dead_lettered) no longer fit the current schema (the window read is named), the "
        "newest listed with the path and keyword each breaks; then its last good output: its "
        "most recent completed output. n "
        "enqueues a new job of the kind from a form: its args open on a skeleton of the "
        "published args schema and are checked as you type; confirmed, with a reason, and "
        "audited."
    )
    JUMP = Jump("K", "kinds", "Kinds")
    READ_GROUP = "kinds"
    COLUMNS = (
        ("kind", "kind", None),  # then the counts: what on-call reads first
        *[(label, label, None) for label, _state in COUNTED],
        ("dlq", "dlq", None),
        ("type", "output type", None),
        ("schema", "schema", None),
        ("stale", "descriptor", None),
        ("name", "display name", None),
    )
    ENTER = "jobs"
    LIVE = False
    WRITE_ACTIONS = frozenset({"enqueue"})

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="kinds.back"),
        Binding("enter", "jobs", "Jobs of kind", id="kinds.jobs"),
        Binding("s", "schema", "Schema", id="kinds.schema"),
        Binding("n", "enqueue", "Enqueue…", id="kinds.enqueue"),
        Binding("r", "refresh", "Refresh", id="kinds.refresh"),
        Binding("j", "down", "Down", show=False, id="kinds.down"),
        Binding("k", "up", "Up", show=False, id="kinds.up"),
    ]

    def compose_detail(self) -> ComposeResult:
        yield Static("", id="kind-descriptor")
        yield DriftPanel(id="kind-drift")
        yield LastGoodPanel(id="kind-last-good")
        yield Label("Output schema", classes="section-title", id="kind-schema-title")
        yield JsonView(id="kind-schema", empty="(no schema published)")
        yield Label("Extra", classes="section-title", id="kind-extra-title")
        yield JsonView(id="kind-extra")

    async def fetch(self, client: Client) -> KindsLoaded:
        return KindsLoaded(await client.list_kinds())

    def on_kinds_loaded(self, message: KindsLoaded) -> None:
        self.awa.descriptors = {k.kind: k.descriptor for k in message.kinds if k.descriptor}
        self.show_rows(message.kinds)

    def row_key(self, row: KindSummary) -> str:
        return row.kind

    def cells(self, row: KindSummary, now: datetime) -> Sequence[RenderableType]:
        d = row.descriptor
        return (
            Text(row.kind, style="bold"),
            *[_count(row.counts.get(state, 0)) for _label, state in COUNTED],
            _count(row.dlq),
            Text(d.output_type_name, style="cyan")
            if d and d.output_type_name
            else Text("-", style="dim"),
            "✓" if d and d.output_schema else "",
            _stale(row),
            (d.display_name if d else None) or "",
        )

    def headline(self) -> list[HeadPart]:
        return [f" · {len(self.rows)} known"]

    def show_current(self) -> None:
        summary = self.current
        box = self.query_one("#kind-descriptor", Static)
        if summary is None:
            box.update(Text(EMPTY if self.loaded else "", style="dim"))
            self.query_one(LastGoodPanel).hide()
            self.query_one(DriftPanel).hide()
            return
        box.update(descriptor_renderable(summary, self.awa.now()))
        self.query_one(DriftPanel).follow(self.awa.client, summary, self.awa.now())
        self.query_one(LastGoodPanel).follow(self.awa.client, summary.kind, None, self.awa.now())
        d = summary.descriptor
        schema = d.output_schema if d is not None else None
        extra = d.declared_extra if d is not None else {}
        self.query_one("#kind-schema", JsonView).show_value(schema)
        self.query_one("#kind-extra", JsonView).show_value(extra)
        for name, shown in (("schema", d is not None), ("extra", bool(extra))):
            self.query_one(f"#kind-{name}-title").display = shown
            self.query_one(f"#kind-{name}").display = shown

    def binding_reason(self, action: str) -> str | None:
        current = self.current
        if action in ("jobs", "enqueue") and current is None:
            return "No kind is selected."
        if action == "enqueue" and current is not None and current.descriptor is None:
            return "No runtime published a descriptor for this kind, so it cannot be enqueued."
        if action == "schema" and (
            current is None
            or current.descriptor is None
            or current.descriptor.output_schema is None
        ):
            return "This kind publishes no output schema."
        return None

    def action_refresh(self) -> None:
        self.query_one(DriftPanel).forget()
        super().action_refresh()

    def action_jobs(self) -> None:
        current = self.current
        if current is not None:
            self.awa.drill(JobQuery(kind=current.kind), self)

    def action_schema(self) -> None:
        from awa_tui.screens.schema import SchemaScreen

        current = self.current
        if current is not None and current.descriptor is not None:
            self.app.push_screen(SchemaScreen(current.kind, current.descriptor))

    def action_enqueue(self) -> None:
        current = self.current
        if current is None or self.awa.refuse_write():
            return

        def enqueued(row: JobRow | None) -> None:
            if row is not None:
                self.reload()

        self.app.push_screen(EnqueueJobModal(current.kind, current.descriptor), enqueued)


def _count(value: int) -> Text:
    return Text(f"{value:,}" if value else "·", justify="right", style="" if value else "dim")


def _stale(summary: KindSummary) -> Text:
    if summary.descriptor is None:
        return Text("none", style="dim")
    return Text("stale", style="bold yellow") if summary.stale else Text("current", style="green")


def descriptor_renderable(summary: KindSummary, now: datetime) -> RenderableType:
    d = summary.descriptor
    if d is None:
        return Text(
            f"{summary.kind}: no runtime has published a descriptor for this kind "
            "(jobs exist, but nothing says what it is or what it outputs).",
            style="dim",
        )
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("Kind", Text(d.kind, style="bold"))
    grid.add_row("Display name", d.display_name or "-")
    grid.add_row("Description", d.description or "-")
    grid.add_row("Owner", d.owner or "-")
    grid.add_row("Docs", d.docs_url or "-")
    grid.add_row("Tags", ", ".join(d.tags) or "-")
    grid.add_row("Output type", d.output_type_name or "none declared")
    grid.add_row("Queue", d.queue or "-")
    grid.add_row(
        "Args schema", "published (n enqueues a job)" if d.args_schema is not None else "none"
    )
    grid.add_row("Last seen", both(d.last_seen_at, now))
    if summary.stale:
        grid.add_row(
            "Stale",
            Text("no running runtime has re-published this descriptor recently", style="yellow"),
        )
    return grid
