"""Nothing kills the console: repeated rows, failing handlers, and what still reaches the top."""

from __future__ import annotations

import time

import pytest
from textual import events
from textual.widgets import Footer
from textual.widgets._header import HeaderTitle

from awa_tui.app import SILENCE_FLOOR
from awa_tui.errors import EXIT_INTERNAL
from awa_tui.screens.jobs import JobsScreen
from awa_tui.widgets.app_header import AppHeader
from awa_tui.widgets.job_table import JobTable
from storage.db.pool import connect_once
from tests.tui.conftest import settle
from tests.tui.scenarios import SIZE, Incident, build_app

SECRET = "s3cret-args-value"


def notifications(app: object) -> list[tuple[str, str]]:
    return [(n.title, n.message) for n in app._notifications]  # type: ignore[attr-defined]


async def test_job_table_shows_a_repeated_id_once(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """A job listed twice (reads racing a state change) is one row, not a DuplicateKey crash."""
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        table = app.screen.query_one(JobTable)
        jobs = list(table.jobs)
        assert len(jobs) >= 3
        twice = [jobs[0], *jobs, jobs[2], jobs[1]]
        table.show(twice, app.now(), app.describe_kind, set())
        assert table.row_count == len(jobs)
        assert [job.id for job in table.jobs] == [job.id for job in jobs]
        table.show(twice[:2], app.now(), app.describe_kind, set(), append=True)
        assert table.row_count == len(jobs)


async def test_a_failing_handler_is_a_notification_and_the_app_keeps_running(
    migrated_dsn: str, schema: str, incident: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_copy(self: JobsScreen) -> None:
        raise RuntimeError(f"copy failed for {SECRET}")

    monkeypatch.setattr(JobsScreen, "action_copy", broken_copy)
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("y")
        await settle(pilot)
        shown = notifications(app)
        assert any(
            title == "Unexpected error" and "RuntimeError" in text for title, text in shown
        ), shown
        assert all(SECRET not in text for _title, text in shown)
        assert app.is_running
        # The screen still handles keys: the next tab loads.
        await pilot.press("right_square_bracket")
        await settle(pilot)
        assert isinstance(app.screen, JobsScreen)
        assert app.screen.query_state.tab != "all"


async def test_an_error_at_the_top_level_exits_70_with_one_line_and_no_message(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """A widget whose loop Textual stops (not one of ours): exit at once, no locals or message."""

    def boom() -> None:
        args = {"card": SECRET}
        raise RuntimeError(f"failed on {args}")

    app = build_app(migrated_dsn, schema)

    async def run_until_it_stops() -> None:
        async with app.run_test(size=SIZE) as pilot:
            await settle(pilot)
            app.screen.query_one(Footer).call_later(boom)
            await app._exception_event.wait()

    with pytest.raises(RuntimeError):  # run_test re-raises what stopped the app
        await run_until_it_stops()
    assert app.return_code == EXIT_INTERNAL
    assert app.fatal_message is not None
    assert "RuntimeError" in app.fatal_message
    assert "boom" in app.fatal_message
    assert SECRET not in app.fatal_message
    assert "\n" not in app.fatal_message


async def test_retitling_a_header_that_is_being_torn_down_is_harmless(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """The subtitle changes on every refresh; one landing while a header loses its title
    widget (a screen being removed) must not end the console, as Textual's Header would."""
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        title = app.screen.query_one(AppHeader).query_one(HeaderTitle)
        await title.remove()
        app.sub_title = "live, refreshed 09:30:01Z"
        await pilot.pause()
        assert app.is_running
        assert app.return_code is None


async def test_a_failing_widget_handler_is_a_notification_and_the_widget_keeps_working(
    migrated_dsn: str, schema: str, incident: Incident, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error in one of the console's widgets (here the job table's resize handler) is shown,
    and that widget still takes messages afterwards: Textual alone would stop its loop."""
    calls: list[int] = []
    original = JobTable.on_resize

    def broken_resize(self: JobTable, event: events.Resize) -> None:
        calls.append(event.size.width)
        if len(calls) == 1:
            raise RuntimeError(f"resize failed for {SECRET}")
        original(self, event)

    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        monkeypatch.setattr(JobTable, "on_resize", broken_resize)
        await pilot.resize_terminal(SIZE[0] - 20, SIZE[1])
        await settle(pilot)
        shown = notifications(app)
        assert any(title == "Unexpected error" for title, _text in shown), shown
        assert all(SECRET not in text for _title, text in shown)
        await pilot.resize_terminal(*SIZE)
        await settle(pilot)
        assert len(calls) >= 2
        assert app.is_running


async def test_a_screens_reads_mark_the_connection_live_and_its_failures_are_shown(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """Textual tells only the screen that a worker ended; the app must hear of it too: a
    page read makes the header say live, and a failed one is a notification, not silence."""
    app = build_app(migrated_dsn, schema)  # live refresh paused: no probe has run yet
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert app.connection.status == "live"
        assert app.sub_title.startswith("live, refreshed ")
        async with connect_once(migrated_dsn) as conn:
            await conn.execute(f"DROP TABLE {schema}.dlq_entries CASCADE")
        await pilot.press("r")
        await settle(pilot)
        shown = notifications(app)
        assert any("migrate" in text.lower() for _title, text in shown), shown
        assert app.is_running


async def test_a_slow_answer_at_a_fast_refresh_is_not_a_lost_connection(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    """At ``--refresh 0.2`` two intervals are 0.4 s: silence that short (one slow read on a busy
    host) is not "connection lost"; silence past ``SILENCE_FLOOR`` is."""
    app = build_app(migrated_dsn, schema, refresh=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert not app.connection.lost
        app._last_read = time.monotonic() - 1.0  # 5 intervals, under the floor
        app._check_health()
        assert not app.connection.lost
        app._last_read = time.monotonic() - (SILENCE_FLOOR + 1)
        app._check_health()
        assert app.connection.lost
        assert "has not answered" in app.connection.reason
