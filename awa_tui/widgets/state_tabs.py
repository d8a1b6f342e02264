"""One line of clickable state tabs, each with its live count."""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from textual import events
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from awa_tui.query import TAB_KEYS, TAB_LABELS, TABS
from awa_tui.resilience import Guarded
from storage import JobState, StateCounts

SHORT_LABELS = {
    "available": "Avail",
    "running": "Run",
    "waiting_external": "Wait",
    "scheduled": "Sched",
    "retryable": "Retry",
    "failed": "Fail",
    "completed": "Done",
    "cancelled": "Canc",
}
"""Labels for a narrow terminal, so the tabs stay on one line (120 columns and less)."""


class StateTabs(Guarded, Static):
    """``1 All 1,204  2 Available 3 ...``, ``10,000+`` (``1,000+`` for completed, failed and
    cancelled) for "at least" (a count at its cap); the active tab reversed. Click, a digit,
    ``[``/``]``. Narrower than the full line, the labels shorten, then the digit keys go."""

    DEFAULT_CSS = """
    StateTabs { height: auto; padding: 0 1; }
    """

    active: reactive[str] = reactive("all")
    counts: reactive[StateCounts | None] = reactive(None)

    @dataclass
    class TabSelected(Message):
        tab: str

    def __init__(self, active: str = "all", *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.set_reactive(StateTabs.active, active)

    def on_mount(self) -> None:
        self.update(self.tabs_markup())

    def watch_active(self) -> None:
        self.update(self.tabs_markup())

    def watch_counts(self) -> None:
        self.update(self.tabs_markup())

    def on_resize(self, event: events.Resize) -> None:
        self.update(self.tabs_markup())

    def count_label(self, tab: str) -> str | None:
        """``1,204``, or ``10,000+`` when the count stopped at its cap (at least that many)."""
        count = self.count_of(tab)
        if count is None or self.counts is None:
            return None
        counts = self.counts
        if tab == "all":
            exact = counts.live_exact
        elif tab == "dlq":
            exact = not counts.dlq_capped
        else:
            exact = counts.is_exact(JobState(tab))
        return f"{count:,}" + ("" if exact else "+")

    def count_of(self, tab: str) -> int | None:
        counts = self.counts
        if counts is None:
            return None
        if tab == "all":  # dead-lettered jobs have their own tab
            return counts.live
        if tab == "dlq":
            return counts.dlq
        return counts.by_state.get(JobState(tab), 0)

    def tabs_markup(self) -> str:
        """The widest of the three forms that fits on one line (the last one always)."""
        room = self.content_size.width or 10_000  # not laid out yet: the full form
        forms = [(TAB_LABELS, True), ({**TAB_LABELS, **SHORT_LABELS}, True)]
        for labels, keys in forms:
            plain = sum(len(self.tab_text(tab, labels, keys)) for tab in TABS)
            if plain <= room:
                break
        else:
            labels, keys = forms[-1][0], False
        return "".join(self.tab_markup(tab, labels, keys) for tab in TABS)

    def tab_text(self, tab: str, labels: dict[str, str], keys: bool) -> str:
        shown = self.count_label(tab)
        key = f" {TAB_KEYS[tab]} " if keys else ""
        return f"{key}{labels[tab]}" + ("" if shown is None else f" {shown}") + " "

    def tab_markup(self, tab: str, labels: dict[str, str], keys: bool) -> str:
        label = escape(self.tab_text(tab, labels, keys))
        if keys and tab != self.active:
            label = label.replace(TAB_KEYS[tab], f"[dim]{TAB_KEYS[tab]}[/]", 1)
        if tab == self.active:
            label = f"[reverse bold]{label}[/]"
        elif tab in ("failed", "dlq") and self.count_of(tab):
            label = f"[$error]{label}[/]"
        return f"[@click=select_tab('{tab}')]{label}[/]"

    def action_select_tab(self, tab: str) -> None:
        self.post_message(self.TabSelected(tab))

    def step(self, delta: int) -> str:
        """The tab ``delta`` places from the active one (wrapping)."""
        index = TABS.index(self.active)
        return TABS[(index + delta) % len(TABS)]
