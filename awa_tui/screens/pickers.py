"""Choosing what to do with everything a filter matches."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Label, OptionList, Static
from textual.widgets.option_list import Option

from awa_tui.actions import ACTIONS, JobAction
from awa_tui.query import JobQuery
from awa_tui.resilience import Guarded

_BY_TAB: dict[str, tuple[JobAction, ...]] = {
    "dlq": (JobAction.RETRY_DLQ, JobAction.PURGE_DLQ),
    "failed": (JobAction.RETRY, JobAction.DELETE),
    "cancelled": (JobAction.RETRY, JobAction.DELETE),
    "completed": (JobAction.DELETE,),
    "all": (JobAction.RETRY, JobAction.CANCEL, JobAction.DELETE),
}
_OPEN = (JobAction.CANCEL,)


def bulk_actions_for(query: JobQuery) -> tuple[JobAction, ...]:
    return _BY_TAB.get(query.tab, _OPEN)


class BulkActionModal(Guarded, ModalScreen[JobAction | None]):
    """Pick the action; the app then counts the matches and asks again with the count."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="bulk.cancel")
    ]

    def __init__(self, query: JobQuery) -> None:
        super().__init__(classes="dialog-screen")
        self.job_query = query
        self.choices = bulk_actions_for(query)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label("Act on everything matching this view", classes="dialog-title")
            yield Static(
                f"All {self.job_query.describe()}, not only the rows loaded on screen. "
                "The next step shows how many jobs that is before anything changes.",
                classes="dialog-body",
                markup=False,
            )
            yield OptionList(
                *[Option(ACTIONS[action].label, id=action.value) for action in self.choices],
                id="bulk-actions",
            )

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(JobAction(str(event.option.id)))

    def action_cancel(self) -> None:
        self.dismiss(None)
