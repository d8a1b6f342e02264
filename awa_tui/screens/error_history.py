"""Every error entry of a job, newest first; the one that kept an output is marked and readable."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Footer, Label, Static

from awa_tui.present import one_line, plural, state_label
from awa_tui.screens.base import AwaScreen
from awa_tui.timefmt import absolute, parse_timestamp, relative
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.mode_banner import ModeBanner
from awa_tui.widgets.output_panel import JSONB_NOTE, LATEST_ONLY_NOTE, OutputPanel
from storage import JobAccount, JobKindDescriptor, JobRow

KEPT_LABEL = "◆ kept output"


def traceback_text(entry: dict[str, Any]) -> Text:
    """The entry's traceback, outermost frame first, as Python prints one; or why there is
    none."""
    frames = entry.get("traceback")
    if not isinstance(frames, list) or not frames:
        return Text(
            "No traceback: the handler raised nothing here, or the entry predates them.",
            style="dim italic",
        )
    text = Text("Traceback (most recent call last):\n", style="bold")
    for frame in frames:
        text.append(f"  {frame}\n")
    return text


class ErrorHistoryScreen(AwaScreen):
    """Rows are error entries, newest first; ``o`` jumps to the entry that kept an output."""

    TITLE = "Error history"
    HELP = (
        "Every error the job recorded, newest first, with the output its failed attempt kept "
        "(◆). o jumps to that entry."
    )

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="errors.back"),
        Binding("o", "kept", "Kept output", id="errors.kept"),
        Binding("p", "pretty", "Pretty/exact", id="errors.pretty"),
        Binding("y", "copy", "Copy output", id="errors.copy"),
        Binding("ctrl+s", "save", "Save JSON", show=False, id="errors.save"),
        Binding("j", "down", "Down", show=False, id="errors.down"),
        Binding("k", "up", "Up", show=False, id="errors.up"),
    ]

    def __init__(
        self,
        row: JobRow,
        descriptor: JobKindDescriptor | None,
        account: JobAccount | None = None,
    ) -> None:
        """``account``: the row read with ``Client.explain_job``, for the kept output's
        provenance (which attempt kept it, when it goes)."""
        super().__init__()
        self.row = row
        self.descriptor = descriptor
        self.account = account
        self.kept = row.kept_output_position()
        self.order = list(range(len(row.errors) - 1, -1, -1))  # table row -> entry position

    def compose(self) -> ComposeResult:
        yield AppHeader(icon="≡")
        yield ModeBanner()
        row = self.row
        kept = (
            "none kept an output" if self.kept is None else f"entry #{self.kept + 1} kept an output"
        )
        yield Static(
            Text.assemble(
                (f"Error history of job {row.id}", "bold"),
                f" · {row.kind} · {state_label(row)} · ",
                plural(len(row.errors), "entry", "entries"),
                f", newest first · {kept}",
            ),
            id="errors-head",
        )
        yield DataTable(id="error-table", cursor_type="row")
        with VerticalScroll(id="entry"):
            yield Label("", id="entry-title", classes="section-title")
            yield Static("", id="entry-error")
            yield Static("", id="entry-traceback")
            yield OutputPanel(id="entry-output")
            yield Static(Text(LATEST_ONLY_NOTE, style="dim italic"), id="latest-note")
        yield Footer(compact=True, show_command_palette=False)

    def on_mount(self) -> None:
        super().on_mount()
        table = self.query_one(DataTable)
        table.add_column("#", key="position", width=4)
        table.add_column("attempt", key="attempt", width=7)
        table.add_column("at", key="at", width=21)
        table.add_column("ago", key="ago", width=9)
        table.add_column("terminal", key="terminal", width=8)
        table.add_column("output", key="output", width=14)
        table.add_column("error", key="error")
        now = self.awa.now()
        for position in self.order:
            entry = self.row.errors[position]
            at = parse_timestamp(entry.get("at"))
            kept = position == self.kept
            table.add_row(
                Text(f"#{position + 1}", justify="right"),
                Text(str(entry.get("attempt", "?")), justify="right"),
                absolute(at),
                relative(at, now),
                Text("terminal", style="bold red") if entry.get("terminal") else "",
                Text(KEPT_LABEL, style="bold green") if kept else "",
                one_line(str(entry.get("error", "")), 80),
                key=str(position),
            )
        table.focus()
        self.watch(self.app, "tick", self._clock_ticked, init=False)
        if self.order:
            self.show_entry(self.order[0])
        else:
            self.query_one("#entry-title", Label).update("No errors recorded for this job.")

    def _clock_ticked(self) -> None:
        """The "ago" column follows the app's clock."""
        if not self.is_current:
            return
        table, now = self.query_one(DataTable), self.awa.now()
        for position in self.order:
            at = parse_timestamp(self.row.errors[position].get("at"))
            table.update_cell(str(position), "ago", relative(at, now))

    @property
    def current_position(self) -> int | None:
        table = self.query_one(DataTable)
        if not self.order or not 0 <= table.cursor_row < len(self.order):
            return None
        return self.order[table.cursor_row]

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row < len(self.order):
            self.show_entry(self.order[event.cursor_row])
        self.refresh_bindings()

    def entry_output_text(self, position: int) -> str | None:
        entry = self.row.errors[position]
        if "output" not in entry:
            return None
        return orjson.dumps(entry["output"]).decode()

    def show_entry(self, position: int) -> None:
        entry = self.row.errors[position]
        title = f"Entry #{position + 1} · attempt {entry.get('attempt', '?')}"
        if entry.get("terminal"):
            title += " · terminal"
        if position == self.kept:
            title += " · " + KEPT_LABEL
        self.query_one("#entry-title", Label).update(title)
        self.query_one("#entry-error", Static).update(
            Text(str(entry.get("error", "")), style="red")
        )
        self.query_one("#entry-traceback", Static).update(traceback_text(entry))
        panel = self.query_one(OutputPanel)
        panel.title = f"Output kept by entry #{position + 1}"
        if position == self.kept:
            now = self.awa.now()
            origin = None if self.account is None else self.account.kept_provenance(now)
            panel.show(
                self.entry_output_text(position),
                self.descriptor,
                note=JSONB_NOTE,
                provenance=None if origin is None else origin.text(now),
            )
        else:
            where = (
                f"entry #{self.kept + 1} keeps one"
                if self.kept is not None
                else "no entry keeps one"
            )
            panel.show(
                None,
                self.descriptor,
                absence=f"This entry has no output: it recorded none, or a later failed attempt's "
                f"output replaced it ({where}).",
            )

    def binding_reason(self, action: str) -> str | None:
        if action == "kept" and self.kept is None:
            return "No entry kept an output."
        if action == "pretty" and self.current_position != self.kept:
            return "This entry has no output."
        return None

    def action_back(self) -> None:
        self.dismiss()

    def action_down(self) -> None:
        self.query_one(DataTable).action_cursor_down()

    def action_up(self) -> None:
        self.query_one(DataTable).action_cursor_up()

    def action_kept(self) -> None:
        if self.kept is not None:
            self.query_one(DataTable).move_cursor(row=self.order.index(self.kept))

    def action_pretty(self) -> None:
        panel = self.query_one(OutputPanel)
        panel.pretty = not panel.pretty

    def action_copy(self) -> None:
        position = self.current_position
        text = self.entry_output_text(position) if position is not None else None
        if position is not None and text is not None:
            self.awa.copy_text(text, f"the output kept by entry #{position + 1}")
        else:
            self.awa.copy_text(str(self.row.id), f"job id {self.row.id}")

    def action_save(self) -> None:
        self.awa.save_job(self.row)
