"""The last good output of a kind, beside a failed attempt's kept output in the job detail and
under the selected kind on the Kinds screen (``awa_tui.widgets.last_good``)."""

from __future__ import annotations

from textual.widgets import DataTable

from awa_tui.demo import ChargeCard
from awa_tui.screens.kinds import KindsScreen
from awa_tui.widgets.last_good import LastGoodPanel
from storage import Client
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import SIZE, Incident, build_app, work
from tests.tui.test_detail import detail

DECLINED = '"decline_code":"insufficient_funds"'
GOOD = '{"provider":"stripe","decline_code":null,"retryable":false}'


async def test_a_failed_jobs_kept_output_is_shown_beside_the_last_good_one_of_its_kind(
    migrated_dsn: str, schema: str, client: Client, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.dead)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        panel = detail(app).query_one(LastGoodPanel)
        shown = text_of(panel)
        assert panel.display
        assert "Kept by the failed attempt of error entry #1" in shown
        assert DECLINED in shown.replace(" ", "")
        assert "Last good output of charge_card in queue payments" in shown
        assert "None among the latest 1,000 compact and 1,000 general-path" in shown  # none yet

    good = await client.insert(ChargeCard(order_id=513, amount_cents=1000))
    await work(client, "payments")
    app = build_app(migrated_dsn, schema, initial_job=incident.dead)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        shown = text_of(detail(app).query_one(LastGoodPanel))
        assert f"job {good.id}, completed" in shown
        assert "(compact path)" in shown
        assert GOOD in shown


async def test_a_completed_job_shows_no_comparison(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema, initial_job=incident.emails[0])
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert not detail(app).query_one(LastGoodPanel).display


async def test_the_kinds_screen_shows_the_selected_kinds_last_good_output(
    migrated_dsn: str, schema: str, incident: Incident
) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        await pilot.press("K")
        await settle(pilot)
        screen = app.screen
        assert isinstance(screen, KindsScreen)
        seen: dict[str, str] = {}
        for _ in range(screen.query_one(DataTable).row_count):
            current = screen.current
            assert current is not None
            seen[current.kind] = text_of(screen.query_one(LastGoodPanel))
            await pilot.press("j")
            await settle(pilot)
    assert (
        f"Last good output of send_email  job {incident.emails[-1]}, completed"
        in seen["send_email"]
    )
    assert '"message_id":"msg-000003"' in seen["send_email"]
    assert "None among the latest 1,000" in seen["sync_inventory"]  # it never completed
