"""Which queue-storage schema the console shows: the installed ones, each with its counts."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, cast

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from awa_tui.present import plural
from awa_tui.resilience import Guarded
from storage import JobState, SchemaSummary

if TYPE_CHECKING:
    from awa_tui.app import AwaApp


def schema_line(summary: SchemaSummary, current: str) -> str:
    """``billing   12 jobs · 3 failed · 1 in the DLQ   (shown now)``"""
    counts = summary.counts
    jobs = "job" if counts.live == 1 and counts.live_exact else "jobs"
    live = f"{counts.live:,}{'' if counts.live_exact else '+'} {jobs}"
    failed = counts.by_state.get(JobState.FAILED, 0)
    failed_text = f"{failed:,}{'+' if JobState.FAILED in counts.capped else ''} failed"
    dlq = f"{counts.dlq:,}{'+' if counts.dlq_capped else ''} in the DLQ"
    mark = "   (shown now)" if summary.name == current else ""
    return f"{summary.name:<24} {live} · {failed_text} · {dlq}{mark}"


class SchemaPickerModal(Guarded, ModalScreen[str | None]):
    """Enter shows the highlighted schema; every screen starts over on it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="schemas.cancel")
    ]

    def __init__(self, current: str, only: tuple[str, ...]) -> None:
        super().__init__(classes="dialog-screen")
        self.current = current
        self.only = only

    @property
    def awa(self) -> AwaApp:
        return cast("AwaApp", self.app)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Show another queue-storage schema", classes="dialog-title")
            yield Static("loading…", id="schemas-note", classes="dialog-body", markup=False)
            yield OptionList(id="schemas")

    def on_mount(self) -> None:
        self.load()

    @work(exclusive=True, exit_on_error=False, group="schemas")
    async def load(self) -> None:
        client = await self.awa.client()
        found = await client.list_schemas(self.only or None)
        options = self.query_one("#schemas", OptionList)
        options.add_options(Option(schema_line(s, self.current), id=s.name) for s in found)
        names = [s.name for s in found]
        if self.current in names:
            options.highlighted = names.index(self.current)
        asked = f" of the {plural(len(self.only), 'schema')} named by --schema" if self.only else ""
        self.query_one("#schemas-note", Static).update(
            f"{plural(len(found), 'installed schema')}{asked}. Enter shows one; esc keeps "
            f"{self.current}."
        )
        options.focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(str(event.option.id))

    def action_cancel(self) -> None:
        self.dismiss(None)
