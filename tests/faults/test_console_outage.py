"""The console under a database that goes away and comes back (its own PostgreSQL, stopped and
started again with pg_ctl under the running app)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from pgserver import _commands, postgres_server
from textual.pilot import Pilot

from awa_tui.app import AwaApp, make_app
from awa_tui.demo import SendEmail
from awa_tui.resilience import ConnectionState
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.screens.jobs import JobsScreen
from awa_tui.widgets.job_table import JobTable
from awa_tui.widgets.mode_banner import ModeBanner
from storage import Client, Job, migrate
from tests.tui.conftest import text_of

# pgserver makes its command wrappers at import time, so type checkers cannot see them.
pg_ctl: Callable[..., str] = vars(_commands)["pg_ctl"]

REFRESH = 1.0
# The acceptance: "connection lost" within 10 s, recovered within 15 s of the restart.
LOST_WITHIN = 20.0  # the silence floor (8 s) and a probe's interval, with room
BACK_WITHIN = 15.0


class Outage:
    def __init__(self, server: postgres_server.PostgresServer) -> None:
        self.server = server
        self.dsn = server.get_uri()

    async def stop(self) -> None:
        args = ["-w", "-m", "fast", "stop"]
        await asyncio.to_thread(
            pg_ctl, args, pgdata=self.server.pgdata, user=self.server.system_user
        )

    async def start(self) -> None:
        await asyncio.to_thread(self._start)

    def _start(self) -> None:
        with self.server._lock:
            self.server.ensure_postgres_running()


@pytest.fixture
async def outage() -> AsyncIterator[Outage]:
    """A PostgreSQL of this test's own (the session's server is shared by every test)."""
    root = Path(tempfile.mkdtemp(prefix="awa-outage-"))
    server = await asyncio.to_thread(
        postgres_server.get_server, root / "pgdata", cleanup_mode="delete"
    )
    try:
        yield Outage(server)
    finally:
        await asyncio.to_thread(server.cleanup)
        shutil.rmtree(root, ignore_errors=True)


async def until(pilot: Pilot[Any], condition: Callable[[], bool], within: float) -> float:
    """Poll a real condition until it holds; return how long it took (fails past ``within``)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > within:
            raise AssertionError(f"not within {within}s")
        await pilot.pause(0.1)
    return time.monotonic() - started


def connection(app: AwaApp) -> ConnectionState:
    return app.connection


async def test_the_console_marks_an_outage_and_recovers_by_itself(outage: Outage) -> None:
    await migrate(outage.dsn)
    async with await Client.connect(outage.dsn) as client:

        @client.task(SendEmail, queue="mail")
        async def send_email(job: Job[SendEmail]) -> None:
            del job

        ids = [
            (await client.insert(SendEmail(to=f"u{i}@example.com", template="hi"))).id
            for i in range(3)
        ]

    app = make_app(outage.dsn, "awa", refresh=REFRESH)
    async with app.run_test(size=(120, 36)) as pilot:
        jobs = app.screen
        assert isinstance(jobs, JobsScreen)
        await until(pilot, lambda: connection(app).status == "live", LOST_WITHIN)
        await until(pilot, lambda: len(jobs.query_one(JobTable).jobs) == 3, LOST_WITHIN)
        assert "live, refreshed" in app.sub_title

        await outage.stop()
        await until(pilot, lambda: connection(app).lost, LOST_WITHIN)
        assert "connection lost, retrying since" in app.sub_title
        table = jobs.query_one(JobTable)
        assert [job.id for job in table.jobs] == sorted(ids, reverse=True)  # kept
        assert table.has_class("-stale")
        assert "CONNECTION LOST" in text_of(jobs.query_one(ModeBanner))
        assert "STALE" in text_of(jobs.query_one("#status"))

        # A write is refused at once, saying why.
        from awa_tui.actions import JobAction

        app.run_job_action(JobAction.CANCEL, [ids[0]])
        await until(
            pilot,
            lambda: any("Not sent" in n.message for n in app._notifications),
            LOST_WITHIN,
        )

        # A job opened meanwhile says it could not be loaded, not "Loading job…" forever.
        app.open_job(ids[1])
        await until(
            pilot,
            lambda: isinstance(app.screen, JobDetailScreen) and bool(app.screen.query("#summary")),
            LOST_WITHIN,
        )
        detail = app.screen
        summary = detail.query_one("#summary")
        await until(pilot, lambda: "Could not load job" in text_of(summary), LOST_WITHIN)
        assert "CONNECTION LOST" in text_of(detail.query_one(ModeBanner))

        await outage.start()
        await until(pilot, lambda: connection(app).status == "live", BACK_WITHIN)
        assert "live, refreshed" in app.sub_title
        await until(pilot, lambda: "send_email" in text_of(summary), BACK_WITHIN)
        assert not detail.query_one(ModeBanner).has_class("-lost")
        await pilot.press("escape")
        await until(pilot, lambda: not table.has_class("-stale"), BACK_WITHIN)
        assert "STALE" not in text_of(jobs.query_one("#status"))


def _server_pids(outage: Outage) -> list[int]:
    """The postmaster and every process it started (backends, checkpointer, ...)."""
    postmaster = int(Path(outage.server.pgdata, "postmaster.pid").read_text().split()[0])
    children = Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split()
    return [postmaster, *map(int, children)]


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


async def test_a_database_that_stops_answering_is_marked_lost_and_recovers(
    outage: Outage,
) -> None:
    """A hung server fails no read, each one just waits: silence for two refresh intervals
    must still say ``connection lost``, and answers again must bring ``live`` back."""
    await migrate(outage.dsn)
    app = make_app(outage.dsn, "awa", refresh=REFRESH)
    async with app.run_test(size=(120, 36)) as pilot:
        await until(pilot, lambda: connection(app).status == "live", LOST_WITHIN)
        pids = _server_pids(outage)
        _signal_all(pids, signal.SIGSTOP)
        try:
            await until(pilot, lambda: connection(app).lost, LOST_WITHIN)
            assert "has not answered" in connection(app).reason
            assert "connection lost, retrying since" in app.sub_title
        finally:
            _signal_all(pids, signal.SIGCONT)
        await until(pilot, lambda: connection(app).status == "live", BACK_WITHIN)
        assert "live, refreshed" in app.sub_title
