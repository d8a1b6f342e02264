"""The browser's filter: ``kind:``, ``queue:``, ``id:``, ``since:``, ``before:``, ``sort:``,
``out:``, ``out.PATH=VALUE`` and free text."""

from __future__ import annotations

from textual.widgets import Input

from awa_tui.resilience import Guarded

PLACEHOLDER = (
    "/ to filter: kind:send_email queue:mail id:42 since:1h sort:-when or any text"
    " (enter applies, esc leaves)"
)


class FilterBar(Guarded, Input):
    """An Input that only reports submissions; parsing lives in ``awa_tui.query``."""

    DEFAULT_CSS = """
    FilterBar { height: 3; }
    """

    def __init__(self, value: str = "", *, id: str | None = None) -> None:
        super().__init__(value, placeholder=PLACEHOLDER, id=id)
