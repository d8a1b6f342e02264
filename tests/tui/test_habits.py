"""Terminal habits: help, the palette, j/k, esc, mouse, start-up options, NO_COLOR."""

from __future__ import annotations

import pytest
from textual.content import Content

from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.help import HelpScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.state_tabs import StateTabs
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app


async def test_help_lists_the_keys_of_the_current_screen_with_reasons(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        assert isinstance(app.screen, HelpScreen)
        keys = text_of(app.screen.query_one("#help-keys"))
        assert "Job detail" in text_of(app.screen)
        for line in ("e", "Errors", "Complete", "Save JSON", "Help", "Kinds"):
            assert line in keys
        assert "Job 1 is completed; only failed or cancelled jobs can be retried." in keys
        await pilot.press("escape")
        await pilot.press("escape")
        await settle(pilot)
        await pilot.press("question_mark")
        await settle(pilot)
        keys = text_of(app.screen.query_one("#help-keys"))
        assert "Job browser" in text_of(app.screen)
        hint = text_of(app.screen.query_one("#help-hint"))
        assert "kind:NAME queue:NAME id:42 since:1h" in hint  # the filter syntax
        assert "id:N shows job N on its own state's tab" in hint
        for internal in ("Focus Next", "Focus Previous", "Copy selected text", "scroll_"):
            assert internal not in keys  # Textual's own bindings are not the screen's
        assert "Filter" in keys
        assert "Mark" in keys
        assert "All matching" in keys


async def test_the_palette_offers_every_action_that_applies(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.failed)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert {"Retry", "Delete", "Errors", "Save JSON", "Kinds", "DLQ"} <= titles
        assert "Go to job id" in titles
        assert "Complete" not in titles  # not waiting for a callback
        command = next(c for c in app.get_system_commands(app.screen) if c.title == "Errors")
        await command.callback()
        await settle(pilot)
        assert type(app.screen).__name__ == "ErrorHistoryScreen"


async def test_keyboard_navigation_and_escape(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(JobTable)
        await pilot.press("j", "j", "down", "k")
        assert table.cursor_row == 2
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        assert app.screen.job_id == 10
        await pilot.press("escape")
        assert isinstance(app.screen, JobsScreen)
        assert table.cursor_row == 2


async def test_mouse_selects_tabs_and_rows(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        tabs = app.screen.query_one(StateTabs)
        plain = Content.from_markup(tabs.tabs_markup()).plain
        column = plain.index("Fail") + 1  # the widget has one cell of padding
        await pilot.click(StateTabs, offset=(column + 1, 0))
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        assert screen.query_state.tab == "failed"
        await pilot.click(JobTable, offset=(10, 1))
        await pilot.click(JobTable, offset=(10, 1))
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        assert app.screen.job_id == incident.failed


async def test_start_up_options(migrated_dsn: str, schema: str, incident: Incident) -> None:
    app = build_app(migrated_dsn, schema, initial_state="failed", initial_kind="sync_inventory")
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, JobsScreen)
        assert screen.query_state.tab == "failed"
        assert screen.query_state.kind == "sync_inventory"
        assert [job.id for job in screen.query_one(JobTable).jobs] == [incident.failed]


async def test_no_color_is_respected(
    migrated_dsn: str, schema: str, incident: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.no_color
        svg = app.export_screenshot()
        assert "#ff0000" not in svg.lower()
