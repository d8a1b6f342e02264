"""Confirmations for every write, and a one-line text prompt (a callback's failure message)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

from awa_tui.resilience import Guarded

MAX_REASON = 1000  # what the audit trail keeps of a reason


@dataclass(frozen=True)
class Confirmed:
    """A yes, with the reason typed for the audit trail (None: none given)."""

    reason: str | None = None


class ConfirmModal(Guarded, ModalScreen[Confirmed | None]):
    """``Confirmed`` when the person confirms, None when they back out. Enter or y confirms,
    esc or n backs out; enter in the reason field confirms too.

    A write's dialog has one optional "Reason" field (``ask_reason``), kept with the write in
    the audit trail. Both buttons name what they do ("Cancel job" / "Keep"), never a bare
    "Cancel" that could mean either.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,n", "cancel", "Back out", id="confirm.cancel"),
        Binding("y", "confirm", "Confirm", id="confirm.yes"),
        Binding("tab", "tab", "Reason", show=False, id="confirm.tab"),
    ]

    def __init__(
        self,
        title: str,
        body: str,
        *,
        confirm_label: str,
        keep_label: str,
        danger: bool = False,
        ask_reason: bool = True,
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = title
        self.body = body
        self.confirm_label = confirm_label
        self.keep_label = keep_label
        self.danger = danger
        self.ask_reason = ask_reason

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-body", markup=False)
            if self.ask_reason:
                yield Input(
                    placeholder="Reason (optional, kept in the audit trail; tab to type)",
                    max_length=MAX_REASON,
                    id="confirm-reason",
                )
            with Horizontal(classes="dialog-buttons"):
                yield Button(
                    f"{self.confirm_label} (y)",
                    id="confirm",
                    variant="error" if self.danger else "primary",
                )
                yield Button(f"{self.keep_label} (n)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#confirm", Button).focus()

    def _yes(self) -> Confirmed:
        if not self.ask_reason:
            return Confirmed()
        reason = self.query_one("#confirm-reason", Input).value.strip()
        return Confirmed(reason or None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(self._yes())

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self._yes() if event.button.id == "confirm" else None)

    def action_confirm(self) -> None:
        self.dismiss(self._yes())

    def action_tab(self) -> None:
        """From a button, tab goes to the reason, as its hint says; from the reason, on to the
        buttons. (Plain focus order took the first tab to the other button, where the reason
        typed next was read as keys: a y in it confirmed, an n backed out.)"""
        reasons = self.query("#confirm-reason")
        if reasons and not reasons.first().has_focus:
            reasons.first().focus()
        else:
            self.focus_next()

    def action_cancel(self) -> None:
        self.dismiss(None)


class PromptModal(Guarded, ModalScreen[str | None]):
    """Ask for one line of text; None when cancelled. Empty text is refused."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="prompt.cancel")
    ]

    def __init__(
        self,
        title: str,
        body: str,
        *,
        confirm_label: str,
        keep_label: str,
        placeholder: str = "",
        value: str = "",
    ) -> None:
        super().__init__(classes="dialog-screen")
        self.confirm_label, self.keep_label = confirm_label, keep_label
        self.title_text = title
        self.body = body
        self.placeholder = placeholder
        self.value = value

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-body", markup=False)
            yield Input(self.value, placeholder=self.placeholder, id="prompt-input")
            yield Static("", id="prompt-error", classes="error-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self.confirm_label} (enter)", id="ok", variant="primary")
                yield Button(f"{self.keep_label} (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def _submit(self) -> None:
        text = self.query_one(Input).value.strip()
        if not text:
            self.query_one("#prompt-error", Static).update("Please enter some text.")
            return
        self.dismiss(text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self._submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
