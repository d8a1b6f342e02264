"""``?``: the keys of the screen underneath, with why a dimmed one does not apply."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Label, Static

from awa_tui.resilience import Guarded
from awa_tui.screens.base import AwaScreen

NOTES = (
    "Mouse: click a tab, a row (click again to open), or a button.  "
    "ctrl+p opens the command palette with every action.  "
    "Writes always ask for confirmation and are hidden in read-only mode."
)


def declared(node: DOMNode) -> set[str]:
    """The actions bound by the console's own classes along ``node``'s MRO: what the screen
    does, not Textual's internals (focus cycling, the text selection copy, ctrl+q)."""
    return {
        binding.action if isinstance(binding, Binding) else binding[1]
        for cls in type(node).__mro__
        if cls.__module__.startswith("awa_tui")
        for binding in cls.__dict__.get("BINDINGS", ())
        if not isinstance(binding, str)
    }


def keys_table(screen: Screen[object]) -> Table:
    table = Table(box=None, padding=(0, 2), show_header=True, header_style="bold")
    table.add_column("key", no_wrap=True)
    table.add_column("action")
    table.add_column("")
    seen: set[tuple[str, str]] = set()
    ours = [
        (key, active)
        for key, active in screen.active_bindings.items()
        if active.binding.action in declared(active.node)
    ]
    ours.sort(key=lambda item: (item[1].node is screen.app, item[1].node is not screen))
    for key, active in ours:
        binding = active.binding
        if not binding.description:
            continue
        label = binding.key_display or screen.app.get_key_display(binding)
        if (label, binding.description) in seen:
            continue
        seen.add((label, binding.description))
        reason = None
        if not active.enabled and isinstance(screen, AwaScreen):
            reason = screen.refusal(binding.action.split("(")[0])
        status = Text(reason or "", style="dim") if not active.enabled else Text("")
        style = "" if active.enabled else "dim"
        table.add_row(
            Text(label or key, style="bold " + style),
            Text(binding.description, style=style),
            status,
        )
    for binding in hidden(screen):  # left out of the footer: help still says why
        label = binding.key_display or screen.app.get_key_display(binding)
        if (label, binding.description) in seen:
            continue
        seen.add((label, binding.description))
        assert isinstance(screen, AwaScreen)
        reason = screen.refusal(binding.action.split("(")[0]) or ""
        table.add_row(
            Text(label, style="bold dim"),
            Text(binding.description, style="dim"),
            Text(reason, style="dim"),
        )
    return table


def hidden(screen: Screen[object]) -> list[Binding]:
    """The screen's own keys its footer leaves out now because they cannot apply to what it
    shows (a completed job's Complete): not the writes a read-only session hides."""
    if not isinstance(screen, AwaScreen):
        return []
    shown = {active.binding.action for active in screen.active_bindings.values()}
    found = []
    for binding in type(screen).BINDINGS:
        if not isinstance(binding, Binding) or not binding.description:
            continue
        action = binding.action.split("(")[0]
        if binding.action in shown or screen.refusal(action) is None:
            continue
        if action in screen.WRITE_ACTIONS and not screen.awa.writable:
            continue
        found.append(binding)
    return found


class HelpScreen(Guarded, ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="help.close")
    ]

    def __init__(self, screen: Screen[object]) -> None:
        super().__init__(classes="dialog-screen")
        self.title_text = screen.title or "this screen"
        self.hint = getattr(screen, "HELP", "")
        self.keys = keys_table(screen)

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide"):
            yield Label(self.title_text, classes="dialog-title")
            if self.hint:
                yield Static(Text(self.hint), id="help-hint")
            yield Static(self.keys, id="help-keys")
            yield Static(Text(NOTES, style="dim"), id="help-notes")
            yield Static(Text("j/k or arrows move · esc goes back · ? closes this", style="dim"))

    def action_close(self) -> None:
        self.dismiss()
