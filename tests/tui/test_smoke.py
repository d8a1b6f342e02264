from __future__ import annotations

from storage import Client
from tui.conftest import settle
from tui.scenarios import SIZE, Incident, build_app

from awa_tui.screens.jobs import JobsScreen
from awa_tui.widgets.job_table import JobTable


async def test_boots(migrated_dsn: str, schema: str, incident: Incident, client: Client) -> None:
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)
        assert isinstance(app.screen, JobsScreen)
        table = app.screen.query_one(JobTable)
        print([ (j.id, j.state, j.has_output) for j in table.jobs])
        app.save_screenshot("/tmp/shot.svg")
