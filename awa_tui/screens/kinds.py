"""Every kind: its descriptor, declared output type and schema, job counts, stale flags."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Label, Static

from awa_tui.messages import KindsLoaded
from awa_tui.query import JobQuery
from awa_tui.screens.base import TableScreen
from awa_tui.timefmt import both
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.json_view import JsonView
from awa_tui.widgets.mode_banner import ModeBanner
from storage import JobState, KindSummary

COUNTED = (
    ("avail", JobState.AVAILABLE),
    ("run", JobState.RUNNING),
    ("wait", JobState.WAITING_EXTERNAL),
    ("sched", JobState.SCHEDULED),
    ("retry", JobState.RETRYABLE),
    ("failed", JobState.FAILED),
)


class KindsScreen(TableScreen):
    """Enter shows the kind's jobs; ``s`` its schema full screen."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="kinds.back"),
        Binding("enter", "jobs", "Jobs of kind", id="kinds.jobs"),
        Binding("s", "schema", "Schema", id="kinds.schema"),
        Binding("r", "refresh", "Refresh", id="kinds.refresh"),
        Binding("j", "down", "Down", show=False, id="kinds.down"),
        Binding("k", "up", "Up", show=False, id="kinds.up"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.kinds: list[KindSummary] = []

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        yield Static(Text("Job kinds", style="bold"), id="kinds-head")
        yield DataTable(id="kinds-table", cursor_type="row")
        with VerticalScroll(id="kind-detail"):
            yield Static("", id="kind-descriptor")
            yield Label("Output schema", classes="section-title", id="kind-schema-title")
            yield JsonView(id="kind-schema", empty="(no schema published)")
            yield Label("Extra", classes="section-title", id="kind-extra-title")
            yield JsonView(id="kind-extra")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        table.add_column("kind", key="kind")  # then the counts: what on-call reads first
        for label, _state in COUNTED:
            table.add_column(label, key=label)
        table.add_column("dlq", key="dlq")
        table.add_column("output type", key="type")
        table.add_column("schema", key="schema")
        table.add_column("descriptor", key="stale")
        table.add_column("display name", key="name")
        table.focus()
        self.load()

    @work(exclusive=True, exit_on_error=False, group="kinds")
    async def load(self) -> None:
        client = await self.awa.client()
        self.post_message(KindsLoaded(await client.list_kinds()))

    def on_kinds_loaded(self, message: KindsLoaded) -> None:
        self.kinds = message.kinds
        self.awa.descriptors = {k.kind: k.descriptor for k in message.kinds if k.descriptor}
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        table.clear()
        for summary in self.kinds:
            d = summary.descriptor
            table.add_row(
                Text(summary.kind, style="bold"),
                *[_count(summary.counts.get(state, 0)) for _label, state in COUNTED],
                _count(summary.dlq),
                Text(d.output_type_name, style="cyan")
                if d and d.output_type_name
                else Text("-", style="dim"),
                "✓" if d and d.output_schema else "",
                _stale(summary),
                (d.display_name if d else None) or "",
                key=summary.kind,
            )
        if self.kinds:
            table.move_cursor(row=min(cursor, len(self.kinds) - 1))
            self.show_kind(table.cursor_row)
        else:
            self.query_one("#kind-descriptor", Static).update(
                Text(
                    "No kinds yet: no runtime has published a descriptor and no job exists.",
                    style="dim",
                )
            )
        self.query_one("#kinds-head", Static).update(
            Text.assemble(("Job kinds", "bold"), f" · {len(self.kinds)} known")
        )

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_kind(event.cursor_row)

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        self.action_jobs()

    @property
    def current(self) -> KindSummary | None:
        row = self.query_one(DataTable).cursor_row
        return self.kinds[row] if 0 <= row < len(self.kinds) else None

    def show_kind(self, index: int) -> None:
        if not 0 <= index < len(self.kinds):
            return
        summary = self.kinds[index]
        self.query_one("#kind-descriptor", Static).update(
            descriptor_renderable(summary, self.awa.now())
        )
        d = summary.descriptor
        schema = d.output_schema if d is not None else None
        extra = d.extra if d is not None else {}
        self.query_one("#kind-schema", JsonView).show_value(schema)
        self.query_one("#kind-extra", JsonView).show_value(extra)
        for name, shown in (("schema", d is not None), ("extra", bool(extra))):
            self.query_one(f"#kind-{name}-title").display = shown
            self.query_one(f"#kind-{name}").display = shown
        self.refresh_bindings()

    def binding_reason(self, action: str) -> str | None:
        current = self.current if self.is_mounted else None
        if action == "jobs" and current is None:
            return "No kind is selected."
        if action == "schema" and (
            current is None
            or current.descriptor is None
            or current.descriptor.output_schema is None
        ):
            return "This kind publishes no output schema."
        return None

    def reload(self) -> None:
        self.load()

    def action_jobs(self) -> None:
        current = self.current
        if current is not None:
            self.awa.show_jobs(JobQuery(kind=current.kind))

    def action_schema(self) -> None:
        from awa_tui.screens.schema import SchemaScreen

        current = self.current
        if current is not None and current.descriptor is not None:
            self.app.push_screen(SchemaScreen(current.kind, current.descriptor))


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
    grid.add_row("Last seen", both(d.last_seen_at, now))
    if summary.stale:
        grid.add_row(
            "Stale",
            Text("no running runtime has re-published this descriptor recently", style="yellow"),
        )
    return grid
