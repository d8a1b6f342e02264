"""The kinds screen (descriptors, types, schemas, counts, stale flags) and the DLQ screen."""

from __future__ import annotations

from textual.widgets import DataTable

from awa_tui.demo import ChargeCard
from awa_tui.screens.confirm import ConfirmModal
from awa_tui.screens.dlq import DlqScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.screens.kinds import KindsScreen
from awa_tui.widgets.job_table import JobTable
from storage import Client, JobState
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app, work


async def test_kinds_list_types_schemas_counts_and_stale_descriptors(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("K")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, KindsScreen)
        table = screen.query_one(DataTable)
        rows = {
            text_of(table.get_row_at(i)[0]): [text_of(c) for c in table.get_row_at(i)]
            for i in range(table.row_count)
        }
        assert rows["sync_inventory"][5:7] == ["1", "1"]  # retryable, failed
        assert rows["charge_card"][7] == "1"  # dead-lettered
        assert rows["sync_inventory"][8] == "SyncReport"
        assert rows["sync_inventory"][9] == "✓"
        assert rows["legacy_export"][10] == "stale"
        assert rows["cleanup_tmp"][8] == "-"
        await pilot.press("j")  # build_report
        await settle(pilot)
        detail = text_of(screen.query_one("#kinds-detail"))
        assert "ReportSummary" in detail
        assert '"pages"' in detail
        await pilot.press("j", "j", "j")  # legacy_export
        await settle(pilot)
        assert "re-published" in text_of(screen.query_one("#kind-descriptor"))
        await pilot.press("j", "j")  # send_email
        await pilot.press("enter")
        await settle(pilot)
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        assert jobs.query_state.kind == "send_email"
        assert {job.kind for job in jobs.query_one(JobTable).jobs} == {"send_email"}


async def test_dlq_screen_retry_and_purge(
    migrated_dsn: str, schema: str, incident: Incident, client: Client
) -> None:
    second = await client.insert(ChargeCard(order_id=513, amount_cents=700), max_attempts=1)
    await work(client, "payments")
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("L")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, DlqScreen)
        assert [row.id for row in screen.rows] == [second.id, incident.dead]
        entry = text_of(screen.query_one("#dlq-entry"))
        assert "card declined: insufficient_funds" in entry
        assert "Error entry #1 kept a failed attempt's output" in entry
        await pilot.press("P")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await settle(pilot)
        assert await client.get_job(second.id) is None
        assert [row.id for row in screen.rows] == [incident.dead]
        await pilot.press("R", "y")
        await settle(pilot)
        row = await client.get_job(incident.dead)
        assert row is not None
        assert row.dlq is None
        assert row.state is JobState.AVAILABLE
        assert screen.rows == []
        assert "The dead-letter queue is empty." in text_of(screen.query_one("#dlq-entry"))
