"""The schedules screen (stored periodic schedules, their next run) and the unique key in the
job detail."""

from __future__ import annotations

from textual.widgets import DataTable

from awa_tui.demo import SendEmail
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.schedules import SchedulesScreen
from storage import Client
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app, work


async def test_schedules_list_their_next_run_and_open_their_jobs(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("S")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, SchedulesScreen)
        table = screen.query_one(DataTable)
        rows = [[text_of(cell) for cell in table.get_row_at(i)] for i in range(table.row_count)]
        assert [row[0] for row in rows] == ["cleanup_tmp", "daily-sales"]
        assert rows[0][3:] == ["every 15 min", "-", "in 10m", "5m ago", str(incident.untyped)]
        assert rows[1][3:] == ["0 6 * * 1-5", "Europe/Paris", "in 1d19h", "never", "-"]
        detail = text_of(screen.query_one("#schedule-detail"))
        assert "every 15 min" in detail
        assert "only the latest is enqueued" in detail
        await pilot.press("j")
        await settle(pilot)
        detail = text_of(screen.query_one("#schedule-detail"))
        assert "At 06:00 on Monday through Friday (Europe/Paris)" in detail
        assert "2026-03-16 05:00:00Z" in detail
        await pilot.press("k")

        await pilot.press("j", "o")  # daily-sales has enqueued nothing yet
        await settle(pilot)
        assert app.screen is screen
        await pilot.press("k", "o")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        assert app.screen.job_id == incident.untyped
        await pilot.press("escape", "enter")
        await settle(pilot)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        assert jobs.query_state.kind == "cleanup_tmp"


async def test_no_schedules_says_how_they_get_there(migrated_dsn: str, schema: str) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("S")
        await settle(pilot)
        assert isinstance(app.screen, SchedulesScreen)
        assert "client.periodic" in text_of(app.screen.query_one("#schedule-detail"))


async def test_the_detail_shows_the_unique_key_and_whether_the_job_holds_it(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    states = ["scheduled", "available", "running", "waiting_external", "retryable"]
    held = await client.insert(
        SendEmail(to="a@example.com", template="welcome"),
        unique_key="welcome:a@example.com",
        unique_states=[*states, "completed"],
    )
    released = await client.insert(
        SendEmail(to="b@example.com", template="welcome"), unique_key="welcome:b@example.com"
    )
    for _ in range(3):  # the incident's waiting email first, then these two
        await work(client, "mail")
    for job_id, expected in (
        (held.id, "welcome:a@example.com  held while unfinished or completed"),
        (released.id, "welcome:b@example.com  released (held while unfinished)"),
    ):
        app = build_app(migrated_dsn, schema, initial_job=job_id)
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            assert isinstance(app.screen, JobDetailScreen)
            assert expected in text_of(app.screen.query_one("#summary"))
