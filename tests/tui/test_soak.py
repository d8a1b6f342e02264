"""Soak: the real app against a live workload, every tab and screen, for 30 s at 0.2 s refresh."""

from __future__ import annotations

from awa_tui.app import make_app
from storage import Client, JobState
from tests.tui.live import ADMIN_ACTIONS, STOPS, assert_alive, live_workload, tour
from tests.tui.scenarios import SIZE

SOAK_SECONDS = 30.0


async def test_console_survives_a_live_workload(migrated_dsn: str, schema: str) -> None:
    async with (
        live_workload(migrated_dsn, schema) as tally,
        await Client.connect(migrated_dsn, schema, read_only=True) as reader,
    ):

        async def find(state: JobState) -> int | None:
            """The oldest on the first page: the admin client acts on the newest."""
            rows = await reader.list_jobs(state=state, limit=50)
            return rows[-1].id if rows else None

        app = make_app(migrated_dsn, schema, refresh=0.2)
        async with app.run_test(size=SIZE) as pilot:
            seen = await tour(pilot, seconds=SOAK_SECONDS, find=find)
            assert_alive(app)
            await pilot.press("q")
        assert app._exception is None
    for visited in STOPS:
        assert seen[visited] > 0, f"the tour never reached {visited}: {seen}"
    for action in ADMIN_ACTIONS:
        assert tally[action] > 0, f"the workload never did {action}: {tally}"
    assert tally["inserted"] > 20
