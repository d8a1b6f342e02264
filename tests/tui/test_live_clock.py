"""Nothing stale looks live: relative times follow the app's one clock while nothing reloads.

The job and its error entries do not change (live refresh is off), only the clock moves: the
detail's last error and the error history's "ago" column must follow it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable

from awa_tui.app import make_app
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.error_history import ErrorHistoryScreen
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import DSN_LABEL, FIXED_NOW, SIZE, Incident


class MovingClock:
    def __init__(self) -> None:
        self.now = FIXED_NOW

    def __call__(self) -> datetime:
        return self.now


async def shows(pilot: Pilot[Any], read: Callable[[], str], text: str, within: float = 5) -> str:
    """What ``read()`` shows once it contains ``text`` (polled), or at the deadline."""
    deadline = time.monotonic() + within
    seen = read()
    while text not in seen and time.monotonic() < deadline:
        await pilot.pause(0.05)
        seen = read()
    return seen


async def test_relative_times_tick_in_the_detail_and_the_error_history(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    clock = MovingClock()
    app = make_app(
        migrated_dsn,
        schema,
        refresh=0,
        clock=clock,
        dsn_label=DSN_LABEL,
        initial_job=incident.failed,
    )
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        detail = app.screen
        assert isinstance(detail, JobDetailScreen)

        def last_error() -> str:
            return text_of(detail.query_one("#last-error"))

        assert "1h31m ago" in last_error()  # entry #3 at 07:58:30Z, the clock at 09:30
        clock.now = FIXED_NOW + timedelta(minutes=10)
        assert "1h41m ago" in await shows(pilot, last_error, "1h41m ago")

        await pilot.press("e")
        await settle(pilot)
        history = app.screen
        assert isinstance(history, ErrorHistoryScreen)
        table = history.query_one(DataTable)

        def newest_ago() -> str:
            return text_of(table.get_cell("2", "ago"))

        assert newest_ago() == "1h41m ago"
        clock.now = FIXED_NOW + timedelta(minutes=20)
        assert await shows(pilot, newest_ago, "1h51m ago") == "1h51m ago"
