"""The external-completion form: callback id, output editor with live checks, payload, result."""

from __future__ import annotations

import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal, cast

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult, SuspendNotSupported
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Footer, Input, Label, Static, TextArea

from awa_tui.errors import describe
from awa_tui.present import state_text
from awa_tui.resilience import Guarded
from awa_tui.screens.confirm import Confirmed, ConfirmModal
from awa_tui.skeleton import skeleton_text
from awa_tui.validation import NO_DECLARATION, OutputCheck, check_output, check_payload
from awa_tui.widgets.field_list import FieldList
from awa_tui.widgets.json_view import JsonView
from storage import (
    AwaError,
    CallbackNotFound,
    DeclaredOutput,
    JobKindDescriptor,
    JobRow,
    JobState,
    OutputError,
    StaleAttempt,
)

if TYPE_CHECKING:
    from awa_tui.app import AwaApp

Outcome = Literal["completed", "stale", "not_found", "error"]


@dataclass
class CallbackAnswered(Message):
    """The completion ran: completed, stale (someone else first), not found, or an error."""

    outcome: Outcome
    row: JobRow | None
    message: str


class CompleteCallbackModal(Guarded, ModalScreen[JobRow | None]):
    """Returns the refreshed row after a completion (None if nothing was completed)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "submit", "Complete", id="complete.submit", priority=True),
        Binding("ctrl+o", "edit_external", "$EDITOR", id="complete.editor", priority=True),
        # TextArea keeps its own keys (ctrl+a is line start there); f7 is its select-all,
        # shown here, and ctrl+l, which it does not bind, clears (ctrl+z undoes it).
        Binding("f7", "select_all", "Select all", id="complete.select_all", priority=True),
        Binding("ctrl+l", "clear", "Clear", id="complete.clear", priority=True),
        Binding("escape", "close", "Close", id="complete.close"),
    ]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]  # noqa: RUF012 (Textual's type)
    """Below 100 columns the field list narrows beside the editor (``app.tcss``)."""

    def __init__(self, row: JobRow, descriptor: JobKindDescriptor | None) -> None:
        super().__init__(classes="dialog-screen")
        self.row = row
        self.descriptor = descriptor
        self.declared: DeclaredOutput = NO_DECLARATION
        self.skeleton = skeleton_text(self.schema)
        self.check: OutputCheck = check_output("")
        self.result: JobRow | None = None
        self.completed = False

    @property
    def awa(self) -> AwaApp:
        return cast("AwaApp", self.app)

    @property
    def schema(self) -> dict[str, object] | None:
        return self.descriptor.output_schema if self.descriptor is not None else None

    @property
    def type_name(self) -> str | None:
        return self.descriptor.output_type_name if self.descriptor is not None else None

    def compose(self) -> ComposeResult:
        row = self.row
        callback_id = row.callback.callback_id if row.callback is not None else ""
        declared = self.type_name or "no declared output type"
        with VerticalScroll(classes="dialog wide", id="complete-form"):
            yield Label(f"Complete job {row.id} through its callback", classes="dialog-title")
            yield Static(
                self.job_line(row),
                id="complete-job",
            )
            yield Label("Callback id", classes="field-label")
            yield Input(callback_id, id="callback-id")
            with Horizontal(id="output-row", classes="editing"):
                with Vertical(id="output-column"):
                    yield Label(
                        f"Output (JSON, stored as the job's output) · {declared}",
                        classes="field-label",
                    )
                    yield TextArea(
                        self.skeleton, id="output-editor", soft_wrap=True, show_line_numbers=True
                    )
                    yield Static("", id="output-check")
                    yield Label(
                        "Payload (optional JSON, passed on, never stored)",
                        classes="field-label",
                    )
                    yield TextArea("", id="payload-editor", soft_wrap=True)
                    yield Static("", id="payload-check")
                if self.schema is not None:
                    yield FieldList(self.schema, declared, id="field-list")
            with Horizontal(classes="dialog-buttons"):
                yield Button(
                    "Complete… (ctrl+s)", id="submit", variant="success", classes="editing"
                )
                yield Button("Edit in $EDITOR (ctrl+o)", id="editor", classes="editing")
                yield Button("Close (esc)", id="close")
            yield Static("", id="result")
            yield JsonView(id="result-output")
            if self.schema is not None:
                yield Label(f"Declared schema, as published ({declared})", classes="field-label")
                yield JsonView(id="schema-view")
        yield Footer(compact=True, show_command_palette=False)

    def job_line(self, row: JobRow) -> Text:
        return Text.assemble(
            (row.kind, "bold"),
            f" · queue {row.queue} · ",
            state_text(row),
            f" · attempt {row.attempt} of {row.max_attempts} · run lease {row.run_lease}",
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        editing = ("submit", "edit_external", "select_all", "clear")
        return not (action in editing and self.completed)

    async def on_mount(self) -> None:
        editor = self.query_one("#output-editor", TextArea)
        editor.focus()
        editor.select_all()  # the skeleton: a paste replaces it, an arrow key keeps it to edit
        if self.schema is not None:
            self.query_one("#schema-view", JsonView).show_value(self.schema)
        self.query_one("#result-output", JsonView).display = False
        # The declaration complete_external checks against: the kind's model when this
        # process registered it (the demo's console runs the workers), else the schema,
        # which is what the first frame checks while the client is reached.
        published = self.descriptor.output if self.descriptor is not None else None
        self.declared = DeclaredOutput(published)
        self.revalidate()
        client = await self.awa.client()
        self.declared = client.output_declaration(self.row.kind, published)
        self.revalidate()

    # -- select all, clear ---------------------------------------------------------------------
    def editing_area(self) -> TextArea:
        """The focused editor, else the output editor."""
        focused = self.focused
        if isinstance(focused, TextArea):
            return focused
        return self.query_one("#output-editor", TextArea)

    def action_select_all(self) -> None:
        area = self.editing_area()
        area.focus()
        area.select_all()

    def action_clear(self) -> None:
        area = self.editing_area()
        area.focus()
        area.clear()

    # -- live validation ----------------------------------------------------------------------
    @on(TextArea.Changed)
    def _changed(self, event: TextArea.Changed) -> None:
        self.revalidate()

    def revalidate(self) -> None:
        source = self.query_one("#output-editor", TextArea).text
        self.check = check_output(source, self.declared)
        mark, style = ("✓ ", "green") if self.check.ok else ("✗ ", "bold red")
        self.query_one("#output-check", Static).update(Text(mark + self.check.message, style=style))
        payload = check_payload(self.query_one("#payload-editor", TextArea).text)
        self.query_one("#payload-check", Static).update(
            Text(payload.message, style="dim" if payload.ok else "bold red")
        )
        self.query_one("#submit", Button).disabled = self.completed or not (
            self.check.ok and payload.ok
        )

    # -- submit -------------------------------------------------------------------------------
    def on_button_pressed(self, event: Button.Pressed) -> None:
        match event.button.id:
            case "submit":
                self.action_submit()
            case "editor":
                self.action_edit_external()
            case _:
                self.action_close()

    def action_submit(self) -> None:
        if self.completed:
            return
        check = self.check
        payload = check_payload(self.query_one("#payload-editor", TextArea).text)
        if not check.ok or not payload.ok:
            why = check.refusal if not check.ok else payload.message
            self.notify(why, title="Not completed", severity="warning")
            return
        callback_id = self.query_one("#callback-id", Input).value.strip()
        if not callback_id:
            self.notify("A callback id is needed.", title="Not completed", severity="warning")
            return
        title = f"Complete job {self.row.id}?"
        if check.stored_text is None and self.type_name is not None:
            # The kind promises an output; completing without one is allowed but deliberate.
            title = f"Complete job {self.row.id} without an output?"
            body = (
                f"Kind {self.row.kind} declares output {self.type_name}; complete without an "
                f"output? Callback {callback_id}."
            )
        else:
            what = (
                "without an output"
                if check.stored_text is None
                else f"with a {check.size:,}-byte output"
            )
            body = f"Complete job {self.row.id} via callback {callback_id} {what}?"
        if payload.value is not None:
            body += " The payload is passed on and not stored."

        def confirmed(ok: Confirmed | None) -> None:
            if ok:
                self.complete(callback_id, check.value, payload.value, ok.reason)

        self.app.push_screen(
            ConfirmModal(title, body, confirm_label="Complete job", keep_label="Back to the form"),
            confirmed,
        )

    @work(exclusive=True, exit_on_error=False, group="complete")
    async def complete(
        self, callback_id: str, output: object, payload: object, reason: str | None = None
    ) -> None:
        client = await self.awa.client()
        job_id = self.row.id
        try:
            row = await client.complete_external(
                callback_id,
                payload,
                output=output,
                run_lease=self.row.run_lease,
                actor=self.awa.actor,
                reason=reason,
            )
        except StaleAttempt as exc:
            fresh = await client.get_job(job_id)
            self.post_message(CallbackAnswered("stale", fresh, exc.message))
        except CallbackNotFound as exc:
            # Stale when the job this form was opened for still exists but no longer waits
            # on its callback (someone resolved it first); otherwise nothing matched at all.
            fresh = await client.get_job(job_id)
            opened_for = self.row.callback.callback_id if self.row.callback else None
            still_waiting = (
                fresh is not None
                and fresh.state is JobState.WAITING_EXTERNAL
                and fresh.callback is not None
                and fresh.callback.callback_id == opened_for
            )
            outcome: Outcome = "stale" if fresh is not None and not still_waiting else "not_found"
            self.post_message(CallbackAnswered(outcome, fresh, exc.message))
        except OutputError as exc:
            self.post_message(CallbackAnswered("error", None, describe(exc).text))
        except AwaError as exc:
            self.post_message(CallbackAnswered("error", None, describe(exc).text))
        else:
            self.post_message(CallbackAnswered("completed", row, ""))
        finally:
            self.awa.broadcast_changed([job_id])

    def on_callback_answered(self, message: CallbackAnswered) -> None:
        self.query_one("#result", Static).update(self.result_renderable(message))
        stored = self.query_one("#result-output", JsonView)
        if message.row is not None and message.row.output_text is not None:
            stored.show_text(message.row.output_text)
            stored.display = True
        else:
            stored.display = False
        if message.outcome == "completed":
            self.completed = True
            self.result = message.row
            self.query_one("#submit", Button).disabled = True
            for editing in self.query(".editing"):
                editing.display = False  # done: the result and the stored output move up
            if message.row is not None:
                self.query_one("#complete-job", Static).update(self.job_line(message.row))
            self.refresh_bindings()
            self.query_one("#close", Button).focus(scroll_visible=False)
        # Not animated: two animated scrolls raced, and where the form came to rest depended on
        # the machine's load. Once completed the fields are hidden and the result is at the top,
        # so the form scrolls home; otherwise the result is brought into view once laid out.
        if self.completed:
            self.query_one("#complete-form", VerticalScroll).scroll_home(animate=False)
        else:
            result = self.query_one("#result", Static)
            self.call_after_refresh(result.scroll_visible, animate=False)

    def result_renderable(self, message: CallbackAnswered) -> Text:
        row = message.row
        parts: list[Text] = []
        match message.outcome:
            case "completed":
                assert row is not None
                parts.append(
                    Text(f"✓ Completed: job {row.id} is {row.state.value}.", style="bold green")
                )
            case "stale":
                now = (
                    f"job {row.id} is now {row.state.value}"
                    if row is not None
                    else "the job is gone"
                )
                parts.append(
                    Text(
                        f"⚠ Stale: the callback was resolved by someone else first ({now}). "
                        "Nothing was written by this completion.",
                        style="bold yellow",
                    )
                )
                parts.append(Text(message.message, style="dim"))
            case "not_found":
                parts.append(Text(f"✗ Not found: {message.message}", style="bold red"))
            case "error":
                parts.append(Text(f"✗ Not completed: {message.message}", style="bold red"))
        if row is not None:
            parts.append(
                Text.assemble(
                    "Row now: ",
                    state_text(row),
                    f" · attempt {row.attempt} of {row.max_attempts} · run lease {row.run_lease}",
                )
            )
            if row.output_text is not None:
                size = len(row.output_text.encode())
                parts.append(Text(f"Stored output, exactly as stored ({size:,} B):", style="bold"))
            else:
                parts.append(Text("The job has no stored output.", style="dim"))
        return Text("\n").join(parts)

    # -- $EDITOR ------------------------------------------------------------------------------
    def action_edit_external(self) -> None:
        editor_cmd = self.awa.settings.editor
        if not editor_cmd:
            self.notify("Set $VISUAL or $EDITOR to edit in an external editor.", severity="warning")
            return
        area = self.query_one("#output-editor", TextArea)
        with tempfile.TemporaryDirectory(prefix="awa-output-") as folder:
            path = Path(folder) / f"job-{self.row.id}-output.json"
            path.write_text(area.text, encoding="utf-8")
            try:
                with self.app.suspend():
                    subprocess.run([*shlex.split(editor_cmd), str(path)], check=False)
            except SuspendNotSupported:
                self.notify("This terminal cannot hand over to an editor.", severity="warning")
                return
            area.load_text(path.read_text(encoding="utf-8"))
        self.revalidate()

    def action_close(self) -> None:
        """Esc with typed text asks first: an on-call engineer may have pasted a long output."""
        output = self.query_one("#output-editor", TextArea).text
        payload = self.query_one("#payload-editor", TextArea).text
        typed = output.strip() not in ("", self.skeleton.strip()) or bool(payload.strip())
        if self.completed or not typed:
            self.dismiss(self.result)
            return

        def confirmed(discard: Confirmed | None) -> None:
            if discard:
                self.dismiss(self.result)

        self.app.push_screen(
            ConfirmModal(
                "Discard the typed output?",
                "Nothing has been completed; the text in the form is lost on close.",
                confirm_label="Discard and close",
                keep_label="Back to the form",
                danger=True,
                ask_reason=False,
            ),
            confirmed,
        )
