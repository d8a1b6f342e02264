"""``awa-tui --demo`` leaves nothing behind: its server stops and its directory goes, on quit
(the real demo code path, headless) and when SIGTERM or a closed terminal (SIGHUP) ends it."""

from __future__ import annotations

import argparse
import asyncio
import time

from awa_tui.demo import build_demo_app
from awa_tui.embedded import EmbeddedPostgres, process_alive
from awa_tui.query import TABS
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.jobs import JobsScreen
from storage import Client, JobState, migrate
from storage.ops.rescue import SHUTDOWN_REASON
from tests.tui.live import arrive, assert_alive, step
from tests.tui.scenarios import SIZE

DEMO_SECONDS = 20.0


async def test_demo_runs_live_then_quits_without_waiting_and_cleans_up() -> None:
    server = EmbeddedPostgres()
    await asyncio.to_thread(server.start)
    root, pid = server.root, server.pid
    try:
        assert root is not None
        assert pid is not None
        assert process_alive(pid)
        await migrate(server.dsn)
        args = argparse.Namespace(
            read_only=False, refresh=0.2, job=None, kind=None, state=None, actor=None
        )
        app = build_demo_app(server.dsn, args)
        async with app.run_test(size=SIZE) as pilot:
            await arrive(pilot, JobsScreen)
            deadline = time.monotonic() + DEMO_SECONDS
            while time.monotonic() < deadline:
                for _ in range(5):  # mostly on All, live
                    await step(pilot, "j", "j", "enter")
                    if isinstance(app.screen, JobDetailScreen):
                        await step(pilot, "escape")
                    await step(pilot, "g")
                for _ in TABS:  # every tab, back to All
                    await step(pilot, "right_square_bracket")
            assert_alive(app)
            await pilot.press("q")
        assert app._exception is None
        # The 45 s report was abandoned, not awaited: given back at once, to run again.
        async with await Client.connect(server.dsn) as client:
            reports = await client.list_jobs(kind="build_report", limit=10)
        nightly = [r for r in reports if r.args["report"] == "nightly-sales"]
        assert [r.state for r in nightly] == [JobState.RETRYABLE]
        assert nightly[0].last_error == SHUTDOWN_REASON
    finally:
        await asyncio.to_thread(server.stop)
    assert not process_alive(pid)
    assert not root.exists()
