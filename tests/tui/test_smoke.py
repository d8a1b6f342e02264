from __future__ import annotations

from storage import Client
from tui.conftest import settle
from tui.scenarios import SIZE, Incident, build_app


async def test_tour(migrated_dsn: str, schema: str, incident: Incident, client: Client) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        app.save_screenshot("/tmp/s1_jobs.svg")
        app.open_job(incident.failed)
        await settle(pilot)
        app.save_screenshot("/tmp/s2_detail_failed.svg")
        await pilot.press("e")
        await settle(pilot)
        app.save_screenshot("/tmp/s3_errors.svg")
        await pilot.press("j")
        await settle(pilot)
        app.save_screenshot("/tmp/s3b_errors.svg")
        await pilot.press("escape", "escape")
        app.open_job(incident.emails[0])
        await settle(pilot)
        app.save_screenshot("/tmp/s4_detail_done.svg")
        await pilot.press("escape")
        app.open_job(incident.waiting)
        await settle(pilot)
        app.save_screenshot("/tmp/s5_waiting.svg")
        await pilot.press("C")
        await settle(pilot)
        await pilot.press(*'{"status": "maybe"}')
        await settle(pilot)
        app.save_screenshot("/tmp/s6_complete_invalid.svg")
        await pilot.press("escape", "escape")
        await pilot.press("K")
        await settle(pilot)
        app.save_screenshot("/tmp/s7_kinds.svg")
        await pilot.press("escape", "L")
        await settle(pilot)
        app.save_screenshot("/tmp/s8_dlq.svg")
        await pilot.press("question_mark")
        await settle(pilot)
        app.save_screenshot("/tmp/s9_help.svg")
