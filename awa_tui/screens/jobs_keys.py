"""The job browser's keys: one table, so the footer, help and the palette read the same list.

On a browser opened from a group (a drill-down) R, X and D are bound twice: as the job's own
action (``retry_job``, ...) shown only there, and as the plain one shown elsewhere.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

from awa_tui.query import TAB_KEYS, TAB_LABELS

JOB_KEYS = {"retry_job": "retry", "cancel_job": "cancel", "delete_job": "delete"}
"""On a browser opened from a group (a drill-down) R, X and D say they act on jobs: the group's
own R is on the screen esc goes back to, and the footer must not suggest it is this one."""
WRITE_ACTIONS = frozenset({"retry", "cancel", "delete", "bulk_matching", *JOB_KEYS})
DRILLED_ONLY = frozenset({"back", *JOB_KEYS})
PLAIN_ONLY = frozenset({"clear", *JOB_KEYS.values()})

BINDINGS: list[BindingType] = [
    Binding("enter", "open_job", "Open", id="jobs.open"),
    Binding("slash", "focus_filter", "Filter", id="jobs.filter"),
    Binding(
        "left_square_bracket",
        "tab(-1)",
        "Prev tab",
        key_display="[",
        show=False,
        id="jobs.prev",
    ),
    Binding(
        "right_square_bracket",
        "tab(1)",
        "Next tab",
        key_display="]",
        show=False,
        id="jobs.next",
    ),
    *(
        Binding(
            key,
            f"select_tab('{tab}')",
            f"{TAB_LABELS[tab]} tab",
            show=False,
            id=f"jobs.tab.{tab}",
        )
        for tab, key in TAB_KEYS.items()
    ),
    Binding("space", "toggle_mark", "Mark", id="jobs.mark"),
    Binding("n", "next_page", "More", show=False, id="jobs.more"),
    Binding("s", "sort", "Sort", id="jobs.sort"),
    Binding("o", "reverse", "Reverse order", show=False, id="jobs.reverse"),
    Binding("r", "refresh", "Refresh", show=False, id="jobs.refresh"),
    Binding("p", "toggle_pause", "Pause", show=False, id="jobs.pause"),
    Binding("plus", "interval(-1)", "Faster", show=False, key_display="+", id="jobs.faster"),
    Binding("minus", "interval(1)", "Slower", show=False, key_display="-", id="jobs.slower"),
    Binding("escape", "back", "Back", id="jobs.back"),
    Binding("R", "retry", "Retry", id="jobs.retry"),
    Binding("R", "retry_job", "Retry job", id="jobs.retry_job"),
    Binding("X", "cancel", "Cancel", id="jobs.cancel"),
    Binding("X", "cancel_job", "Cancel job", id="jobs.cancel_job"),
    Binding("D", "delete", "Delete", id="jobs.delete"),
    Binding("D", "delete_job", "Delete job", id="jobs.delete_job"),
    Binding("A", "bulk_matching", "All matching…", id="jobs.bulk"),
    Binding("y", "copy", "Copy id", show=False, id="jobs.copy"),
    Binding("ctrl+s", "save", "Save JSON", show=False, id="jobs.save"),
    Binding("escape", "clear", "Clear", show=False, id="jobs.clear"),
]
