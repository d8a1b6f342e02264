"""One line of clickable state tabs, each with its live count."""

from __future__ import annotations

from dataclasses import dataclass

from rich.markup import escape
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from awa_tui.query import TAB_KEYS, TAB_LABELS, TABS
from awa_tui.resilience import Guarded
from storage import JobState, StateCounts


class StateTabs(Guarded, Static):
    """``1 All 1,204  2 Available 3 ...``, ``10,000+`` (``1,000+`` for completed, failed and
    cancelled) for "at least" (a count at its cap); the active tab reversed. Click, a digit,
    ``[``/``]``."""

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
        parts = []
        for tab in TABS:
            count = self.count_of(tab)
            shown = self.count_label(tab)
            key = f"[dim]{TAB_KEYS[tab]}[/]" if tab != self.active else TAB_KEYS[tab]
            text = escape(f"{TAB_LABELS[tab]}" + ("" if shown is None else f" {shown}") + " ")
            label = f" {key} {text}"
            if tab == self.active:
                label = f"[reverse bold]{label}[/]"
            elif tab in ("failed", "dlq") and count:
                label = f"[$error]{label}[/]"
            parts.append(f"[@click=select_tab('{tab}')]{label}[/]")
        return "".join(parts)

    def action_select_tab(self, tab: str) -> None:
        self.post_message(self.TabSelected(tab))

    def step(self, delta: int) -> str:
        """The tab ``delta`` places from the active one (wrapping)."""
        index = TABS.index(self.active)
        return TABS[(index + delta) % len(TABS)]
