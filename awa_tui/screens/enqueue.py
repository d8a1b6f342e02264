"""The enqueue form (``n`` on Kinds): a new job of the selected kind, its args checked as typed.

The args editor opens on a skeleton of the kind's published args schema (``awa_tui.skeleton``)
with its fields listed beside it, and every keystroke runs the engine's own check
(``Client.check_args``: the args type this process registered, else the published schema), so a
refusal names the path and the rule before anything is sent. Queue, priority and run-at are
checked here; the write goes through ``awa_tui.writes.confirm_enqueue`` (a confirmation with an
optional reason, then ``Client.enqueue_job``, audited).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, ClassVar, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Static, TextArea

from awa_tui.query import DURATION, read_moment
from awa_tui.resilience import Guarded
from awa_tui.skeleton import skeleton_text
from awa_tui.validation import ArgsCheck, check_args
from awa_tui.widgets.field_list import FieldList
from awa_tui.writes import NewJob, confirm_enqueue
from storage import Client, JobKindDescriptor, JobRow

if TYPE_CHECKING:
    from awa_tui.app import AwaApp

PRIORITIES = range(1, 5)
RUN_AT_HINT = "empty: now; a delay (30s, 15m, 2h); or an ISO time (2026-12-02T10:00, UTC)"
WAITING = ArgsCheck(False, None, None, "checking… (connecting)")


def run_at_of(text: str, now: datetime) -> datetime | None:
    """The form's run-at: None for now, a delay from ``now``, or a moment (UTC without a zone);
    ``ValueError`` saying what it takes."""
    text = text.strip()
    if not text:
        return None
    try:
        at = read_moment(text, now)
    except ValueError:
        raise ValueError(f"run at takes {RUN_AT_HINT}") from None
    return now + (now - at) if DURATION.fullmatch(text) else at


class EnqueueJobModal(Guarded, ModalScreen[JobRow | None]):
    """Returns the new job once it is enqueued (None when closed without one)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Enqueue", id="enqueue.submit", priority=True),
        Binding("escape", "close", "Close", id="enqueue.close"),
    ]

    def __init__(self, kind: str, descriptor: JobKindDescriptor | None) -> None:
        super().__init__(classes="dialog-screen")
        self.kind = kind
        self.descriptor = descriptor
        self.schema = descriptor.args_schema if descriptor is not None else None
        self.skeleton = skeleton_text(self.schema)
        self.client: Client | None = None
        self.check = WAITING
        self.options_error: str | None = None

    @property
    def awa(self) -> AwaApp:
        return cast("AwaApp", self.app)

    def compose(self) -> ComposeResult:
        d = self.descriptor
        with VerticalScroll(classes="dialog wide", id="enqueue-form"):
            yield Label(f"Enqueue a job of kind {self.kind}", classes="dialog-title")
            about = (d.display_name or d.description) if d is not None else None
            yield Static(Text(about or "", style="dim"), id="enqueue-about")
            with Horizontal(id="enqueue-options"):
                with Vertical(classes="enqueue-option"):
                    yield Label("Queue", classes="field-label")
                    yield Input("", id="enqueue-queue")
                with Vertical(classes="enqueue-option"):
                    yield Label("Priority (1-4)", classes="field-label")
                    yield Input("2", id="enqueue-priority")
                with Vertical(id="enqueue-run-at-box"):
                    yield Label("Run at (empty: now; 15m; ISO UTC)", classes="field-label")
                    yield Input("", id="enqueue-run-at")
            with Horizontal(id="args-row"):
                with Vertical(id="args-column"):
                    yield Label("Args (JSON)", classes="field-label")
                    yield TextArea(
                        self.skeleton or "{}",
                        id="args-editor",
                        soft_wrap=True,
                        show_line_numbers=True,
                    )
                    yield Static("", id="args-check")
                    yield Static("", id="options-check")
                if isinstance(self.schema, dict):
                    title = self.schema.get("title")
                    yield FieldList(
                        self.schema,
                        title if isinstance(title, str) else "the args",
                        id="args-fields",
                    )
            with Horizontal(classes="dialog-buttons"):
                yield Button("Enqueue… (ctrl+s)", id="submit", variant="success")
                yield Button("Close (esc)", id="close")
        yield Footer(compact=True, show_command_palette=False)

    async def on_mount(self) -> None:
        editor = self.query_one("#args-editor", TextArea)
        editor.focus()
        editor.select_all()  # the skeleton: a paste replaces it, an arrow key keeps it to edit
        self.revalidate()
        self.client = await self.awa.client()
        self.query_one("#enqueue-queue", Input).value = self.client.default_queue(
            self.kind, self.descriptor
        )
        self.revalidate()

    # -- live checks ---------------------------------------------------------------------------
    @on(TextArea.Changed)
    @on(Input.Changed)
    def _changed(self) -> None:
        self.revalidate()

    def revalidate(self) -> None:
        if self.client is not None:
            source = self.query_one("#args-editor", TextArea).text
            self.check = check_args(source, self.client, self.kind, self.descriptor)
        mark, style = ("✓ ", "green") if self.check.ok else ("✗ ", "bold red")
        shown = self.check.message if self.check.ok else self.check.refusal
        self.query_one("#args-check", Static).update(Text(mark + shown, style=style))
        try:
            self.options()
        except ValueError as exc:
            self.options_error = str(exc)
        else:
            self.options_error = None
        self.query_one("#options-check", Static).update(
            Text("✗ " + self.options_error, style="bold red") if self.options_error else ""
        )
        ready = self.check.ok and self.options_error is None
        self.query_one("#submit", Button).disabled = not ready

    def options(self) -> tuple[str, int, datetime | None]:
        """Queue, priority and run-at as typed, or ``ValueError`` naming the one that is wrong."""
        queue = self.query_one("#enqueue-queue", Input).value.strip()
        if not queue:
            raise ValueError("a queue is needed")
        priority = self.query_one("#enqueue-priority", Input).value.strip()
        if not priority.isdigit() or int(priority) not in PRIORITIES:
            raise ValueError("priority is a whole number from 1 (highest) to 4")
        run_at = run_at_of(self.query_one("#enqueue-run-at", Input).value, self.awa.now())
        return queue, int(priority), run_at

    # -- submit --------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "submit":
            self.action_submit()
        else:
            self.action_close()

    def action_submit(self) -> None:
        self.revalidate()
        if not self.check.ok or self.options_error is not None:
            why = self.check.refusal if not self.check.ok else self.options_error
            self.notify(why or "", title="Not enqueued", severity="warning")
            return
        if self.awa.refuse_write():
            return
        queue, priority, run_at = self.options()
        job = NewJob(self.kind, self.check.value, self.check.size or 0, queue, priority, run_at)
        confirm_enqueue(self.awa, job, self.enqueued)

    def enqueued(self, row: JobRow) -> None:
        if self.is_current:
            self.dismiss(row)

    def action_close(self) -> None:
        self.dismiss(None)
