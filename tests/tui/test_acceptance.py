"""The issue's acceptance path, driven by the keyboard alone against a real database."""

from __future__ import annotations

from textual import events
from textual.widgets import Static, TextArea

from awa_tui.screens.complete import CompleteCallbackModal
from awa_tui.screens.confirm import ConfirmModal
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.error_history import ErrorHistoryScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.output_panel import OutputPanel
from storage import Client, JobState
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app


async def test_find_latest_failed_job_and_read_its_kept_output(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"kind:sync_inventory", "enter")
        await settle(pilot)
        for _ in range(
            6
        ):  # all -> available -> running -> waiting -> scheduled -> retryable -> failed
            await pilot.press("right_square_bracket")
        await settle(pilot)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        assert jobs.query_state.tab == "failed"
        table = jobs.query_one(JobTable)
        assert [job.id for job in table.jobs] == [incident.failed]
        assert "connection reset by warehouse eu-3" in text_of(table.get_row_at(0)[-1])

        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        assert "connection reset by warehouse eu-3" in text_of(
            app.screen.query_one("#last-error", Static)
        )
        assert "output is kept in error entry #2" in text_of(app.screen.query_one(OutputPanel))

        await pilot.press("e")
        await settle(pilot)
        history = app.screen
        assert isinstance(history, ErrorHistoryScreen)
        await pilot.press("o")  # jump to the entry that kept an output
        await settle(pilot)
        assert history.current_position == 1
        panel = text_of(history.query_one(OutputPanel))
        assert '{"skipped":2,"updated":80,"failed_skus":["SKU-217"]}' in panel
        assert "SyncReport" in panel
        assert "fits the schema" in panel


async def test_refuse_invalid_output_then_complete_waiting_job(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("right_square_bracket", "right_square_bracket", "right_square_bracket")
        await settle(pilot)
        assert app.screen.query_one(JobTable).current_job.id == incident.waiting  # type: ignore[union-attr]
        await pilot.press("enter")
        await settle(pilot)
        await pilot.press("C")
        await settle(pilot)
        form = app.screen
        assert isinstance(form, CompleteCallbackModal)
        editor = form.query_one("#output-editor", TextArea)
        app.post_message(
            events.Paste('{"status": "maybe", "reference": "r-1", "amount_cents": 4900}')
        )
        await settle(pilot)
        check = text_of(form.query_one("#output-check", Static))
        assert "schema: $.status: is not one of" in check
        assert "allowed values" in check
        assert form.query_one("#submit").disabled

        editor.clear()
        app.post_message(
            events.Paste('{"status": "paid", "reference": "psp-77", "amount_cents": 4900}')
        )
        await settle(pilot)
        assert "fits the PaymentResult schema" in text_of(form.query_one("#output-check", Static))
        await pilot.press("ctrl+s")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await settle(pilot)
        assert pilot.app.screen is form  # the form stays open with the result
        assert "Completed: job 7 is completed" in text_of(form.query_one("#result", Static))

        row = await client.get_job(incident.waiting)
        assert row is not None
        assert row.state is JobState.COMPLETED
        assert row.output_text == '{"status":"paid","reference":"psp-77","amount_cents":4900}'

        await pilot.press("escape")
        await settle(pilot)
        detail = app.screen
        assert isinstance(detail, JobDetailScreen)
        assert detail.row is not None
        assert detail.row.state is JobState.COMPLETED
        assert row.output_text in text_of(detail.query_one(OutputPanel))
