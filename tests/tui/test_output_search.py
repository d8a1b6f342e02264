"""The browser's filter inside outputs: ``out.PATH=VALUE`` and ``out:TEXT`` typed into the filter
list the jobs whose output matches, within a time range the status line names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Static

from awa_tui.app import AwaApp, make_app
from awa_tui.query import TAB_KEYS
from storage import Client
from tests.storage.read.test_output_search import outputs
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import DSN_LABEL, SIZE
from tests.tui.test_browser import jobs_screen, shown_ids

__all__ = ["outputs"]  # the fixture: the same jobs as the storage tests


def build_app(dsn: str, schema: str) -> AwaApp:
    """``scenarios.build_app`` on the wall clock: the fixture's jobs finished just now, and
    some two hours ago."""
    return make_app(dsn, schema, clock=lambda: datetime.now(UTC), refresh=0, dsn_label=DSN_LABEL)


async def _completed(pilot: Pilot[Any], typed: str) -> tuple[set[int], str]:
    """The Completed tab with the filter ``typed``: the ids shown and the status line."""
    await settle(pilot)
    await pilot.press(TAB_KEYS["completed"], "slash", "ctrl+u", *typed, "enter")
    await settle(pilot)
    screen = jobs_screen(pilot.app)
    return set(shown_ids(screen)), text_of(screen.query_one("#status", Static))


async def test_typing_an_output_path_lists_the_jobs_with_that_output_in_the_hour(
    migrated_dsn: str, schema: str, client: Client, outputs: dict[str, int]
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        shown, status = await _completed(pilot, "out.status=partial since:1h")
        assert shown == {outputs["compact_partial"], outputs["general_partial"]}
        assert 'whose output has status = "partial" since 1h' in status
        screen = jobs_screen(app)

        await pilot.press(TAB_KEYS["all"])  # a failed attempt's kept output counts there
        await settle(pilot)
        assert set(shown_ids(screen)) == {
            outputs["compact_partial"],
            outputs["general_partial"],
            outputs["failed_partial"],
        }


async def test_without_since_the_last_hour_is_searched_and_the_status_line_says_so(
    migrated_dsn: str, schema: str, client: Client, outputs: dict[str, int]
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=(200, 36)) as pilot:
        shown, status = await _completed(pilot, 'out:"X-1"')
        assert shown == {outputs["compact_nested"], outputs["general_nested"]}
        assert "since 1h (the default for out:; since: widens it)" in status
        assert "tab counts ignore kind/queue/id/text (they follow the time range)" in status

        shown, status = await _completed(pilot, "out.a..b=1")  # refused, in one line
        assert "Filter: An output path has an empty step" in status
        assert shown == {outputs["compact_nested"], outputs["general_nested"]}
