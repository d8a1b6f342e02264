"""The error history: newest first, the entry that kept an output marked and readable."""

from __future__ import annotations

from textual.widgets import DataTable

from awa_tui.screens.error_history import ErrorHistoryScreen
from awa_tui.widgets.output_panel import OutputPanel
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app


async def test_entries_newest_first_with_the_kept_output_marked(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.failed)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ErrorHistoryScreen)
        table = screen.query_one(DataTable)
        rows = [[text_of(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert [row[0] for row in rows] == ["#3", "#2", "#1"]
        assert [row[1] for row in rows] == ["3", "2", "1"]
        assert [row[4] for row in rows] == ["terminal", "", ""]
        assert [row[5] for row in rows] == ["", "◆ kept output", ""]
        assert rows[0][2] == "2026-03-14 07:58:30Z"
        assert "connection reset by warehouse eu-3" in rows[0][6]
        assert "Only the latest failed attempt that recorded an output keeps it" in text_of(
            screen.query_one("#latest-note")
        )
        # Each entry shows the frames of the exception its attempt raised.
        trace = text_of(screen.query_one("#entry-traceback"))
        assert "Traceback (most recent call last):" in trace
        assert "tests/tui/scenarios.py:" in trace
        assert trace.rstrip().endswith("in register.<locals>.sync_inventory")
        # The newest entry recorded no output; say why.
        assert "This entry has no output" in text_of(screen.query_one(OutputPanel))
        await pilot.press("j")
        await settle(pilot)
        panel = text_of(screen.query_one(OutputPanel))
        assert "Output kept by entry #2" in panel
        assert '{"skipped":2,"updated":80,"failed_skus":["SKU-217"]}' in panel
        assert "SyncReport" in panel
        assert "52 B of 4,096 B" in panel
        await pilot.press("y")
        assert app.clipboard == '{"skipped":2,"updated":80,"failed_skus":["SKU-217"]}'
        await pilot.press("p")
        await settle(pilot)
        assert '"updated": 80' in text_of(screen.query_one(OutputPanel))  # pretty view
        await pilot.press("j")
        await settle(pilot)
        assert "a later failed attempt's output replaced it" in text_of(
            screen.query_one(OutputPanel)
        )
        await pilot.press("escape")
        await settle(pilot)
        assert not isinstance(app.screen, ErrorHistoryScreen)


async def test_dead_lettered_entry_keeps_its_output(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.dead)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("e")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, ErrorHistoryScreen)
        assert screen.kept == 0
        panel = text_of(screen.query_one(OutputPanel))
        assert '"decline_code":"insufficient_funds"' in panel
        assert "ChargeAttempt" in panel
