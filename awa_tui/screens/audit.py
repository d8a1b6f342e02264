"""The audit trail: every operator write, newest first (who, when, what, why), filterable by
actor and action; and the few lines the job detail shows of one job's entries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Static

from awa_tui.present import plural
from awa_tui.screens.base import Jump
from awa_tui.screens.confirm import PromptModal
from awa_tui.screens.table import HeadPart, TableScreen
from awa_tui.timefmt import both, relative
from storage import AuditEntry, Client

SHOWN = 200
EMPTY = (
    "No operator writes recorded yet: every retry, cancel, delete, purge, pause, resume and "
    "manual callback answer made here, over HTTP or from Python is recorded with its actor."
)
FILTER_HINT = "actor=NAME and/or action=ACTION (retry_job, bulk_retry, pause_queue, ...)"
FIELDS = ("actor", "action")


JOB_ENTRIES = 20  # what the job detail shows of one job's entries (``explain_job``'s actions)


@dataclass
class AuditLoaded(Message):
    entries: list[AuditEntry]
    filters: dict[str, str]


def target(entry: AuditEntry) -> str:
    """What an entry acted on: its jobs, a bulk's filter and count, or its queue."""
    if entry.filter is not None:
        return f"{plural(entry.count, 'job')} matching {entry.filter}"
    if len(entry.job_ids) > 1:
        return f"{entry.count:,} of {len(entry.job_ids):,} jobs given"
    if entry.job_ids:
        return f"job {entry.job_ids[0]}" + (f" in {entry.queue}" if entry.queue else "")
    return f"queue {entry.queue}" if entry.queue else "-"


def parse_filters(text: str) -> dict[str, str]:
    """``actor=ana action=retry_job`` as a dict; ValueError saying what is not understood."""
    found: dict[str, str] = {}
    for word in text.split():
        name, sep, value = word.partition("=")
        if not sep or name not in FIELDS or not value:
            raise ValueError(f"{word!r} is not {FILTER_HINT}")
        found[name] = value
    return found


class AuditScreen(TableScreen[AuditEntry]):
    """Enter opens the job an entry acted on."""

    TITLE = "Audit trail"
    HELP = (
        "Every operator write, newest first: who (the console's --actor, the HTTP token's "
        "name, Python's actor=), when, what and the reason given in the confirmation. A manual "
        "completion shows its output's size and hash, never its text. / filters by actor and "
        "action, c clears the filter, enter opens the entry's job."
    )
    JUMP = Jump("U", "audit", "Audit", show=False)
    READ_GROUP = "audit"
    COLUMNS = (
        ("when", "when", 10),
        ("actor", "actor", None),
        ("action", "action", None),
        ("what", "what", None),
        ("reason", "reason", None),
    )
    ENTER = "open_job"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back", id="audit.back"),
        Binding("enter", "open_job", "Open job", id="audit.open_job"),
        Binding("slash", "filter", "Filter", id="audit.filter"),
        Binding("c", "clear", "Clear filter", id="audit.clear"),
        Binding("r", "refresh", "Refresh", id="audit.refresh"),
        Binding("j", "down", "Down", show=False, id="audit.down"),
        Binding("k", "up", "Up", show=False, id="audit.up"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.filters: dict[str, str] = {}

    def compose_detail(self) -> ComposeResult:
        yield Static("", id="audit-entry")

    async def fetch(self, client: Client) -> AuditLoaded:
        filters = dict(self.filters)
        entries = await client.list_audit(
            actor=filters.get("actor"), action=filters.get("action"), limit=SHOWN
        )
        return AuditLoaded(entries, filters)

    def on_audit_loaded(self, message: AuditLoaded) -> None:
        if message.filters == self.filters:  # a late answer for a filter since changed: dropped
            self.show_rows(message.entries)

    def row_key(self, row: AuditEntry) -> str:
        return str(row.id)

    def cells(self, row: AuditEntry, now: datetime) -> Sequence[RenderableType]:
        return (
            relative(row.at, now),
            Text(row.actor, style="bold"),
            Text(row.action, style="cyan"),
            target(row),
            row.reason or Text("-", style="dim"),
        )

    def headline(self) -> list[HeadPart]:
        shown = " ".join(f"{k}={v}" for k, v in self.filters.items())
        where = [(f" · {shown}", "yellow")] if shown else []
        more = " (the newest)" if len(self.rows) == SHOWN else ""
        return [*where, f" · {plural(len(self.rows), 'entry', 'entries')}{more}"]

    def show_current(self) -> None:
        current = self.current
        detail = self.query_one("#audit-entry", Static)
        if current is None:
            text = "No entry matches this filter." if self.filters else EMPTY
            detail.update(Text(text, style="dim"))
        else:
            detail.update(entry_renderable(current, self.awa.now()))

    def binding_reason(self, action: str) -> str | None:
        current = self.current
        if action == "open_job" and (current is None or len(current.job_ids) != 1):
            return "This entry is not about one job."
        if action == "clear" and not self.filters:
            return "No filter is set."
        return None

    def action_open_job(self) -> None:
        current = self.current
        if current is not None and len(current.job_ids) == 1:
            self.awa.open_job(current.job_ids[0])

    def action_filter(self) -> None:
        def chosen(text: str | None) -> None:
            if text is None:
                return
            try:
                self.filters = parse_filters(text)
            except ValueError as exc:
                self.notify(str(exc), title="Audit filter", severity="warning")
                return
            self.loaded = False
            self.reload()

        shown = " ".join(f"{k}={v}" for k, v in self.filters.items())
        self.app.push_screen(
            PromptModal(
                "Filter the audit trail",
                f"Show only entries with {FILTER_HINT}.",
                confirm_label="Filter",
                keep_label="Back",
                placeholder="actor=ana@ops action=retry_job",
                value=shown,
            ),
            chosen,
        )

    def action_clear(self) -> None:
        self.filters = {}
        self.loaded = False
        self.reload()


def entry_renderable(entry: AuditEntry, now: datetime) -> RenderableType:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("Entry", f"#{entry.id} · {both(entry.at, now)}")
    grid.add_row("Actor", entry.actor)
    grid.add_row("Action", entry.action)
    grid.add_row("What", target(entry))
    if entry.job_ids and (entry.filter is not None or len(entry.job_ids) > 1):
        grid.add_row("Jobs", ", ".join(map(str, entry.job_ids[:20])))
    grid.add_row("Reason", entry.reason or Text("(none given)", style="dim"))
    if entry.output_size is not None:
        grid.add_row("Output", f"{entry.output_size:,} bytes · sha256 {entry.output_sha256}")
    if entry.args_size is not None:
        grid.add_row("Args", f"{entry.args_size:,} bytes · sha256 {entry.args_sha256}")
    if entry.original_args is not None:
        grid.add_row("Original args", Text(str(entry.original_args), style="dim"))
    return grid


def job_entries(entries: Sequence[AuditEntry] | None, now: datetime) -> Text:
    """The job detail's "Actions taken": one line per entry, newest first (None: the schema
    has no audit trail)."""
    if entries is None:
        return Text("(this schema has no audit trail: run awa-tui migrate)", style="dim")
    if not entries:
        return Text("(no operator action recorded)", style="dim")
    lines = Text()
    for entry in entries:
        if lines:
            lines.append("\n")
        lines.append(f"{relative(entry.at, now)}  ", style="dim")
        lines.append(entry.action, style="cyan")
        lines.append(f" by {entry.actor}")
        if entry.reason:
            lines.append(f": {entry.reason}", style="italic")
    return lines
