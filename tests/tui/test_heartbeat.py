"""A running job whose runtime was killed (its heartbeat minutes old) shows its heartbeat age
on the Running tab and in the detail, marked stale past the rescue threshold; a live one shows
its age unmarked. Storage reads the heartbeat with the list (one statement), not per row."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import asyncpg

from awa_tui.query import TAB_KEYS
from awa_tui.screens.detail import JobDetailScreen
from awa_tui.widgets.job_table import JobTable
from storage import HEARTBEAT_STALE_SECONDS, Client, Job, JobState
from storage.runtime import claim
from storage.runtime.loop import HEARTBEAT
from tests.tui.conftest import settle, text_of
from tests.tui.scenarios import FIXED_NOW, build_app

# The claim (ten minutes ago) and the last heartbeat of each attempt, on the pinned clock.
PIN_CLAIM = "UPDATE claim_batches SET claimed_at = $1::timestamptz - interval '10 minutes'"
PIN_BEATS = """
UPDATE attempt_state SET heartbeat_at = $1::timestamptz - CASE WHEN job_id = $2
                                                               THEN interval '4 minutes'
                                                               ELSE interval '5 seconds' END
"""


async def killed_and_live(client: Client, conn: asyncpg.Connection) -> tuple[int, int]:
    """Two jobs claimed by a runtime that heartbeated them: one (``dead``) last heartbeated 4
    minutes ago, as when its process was SIGKILLed, the other 5 s ago."""

    @client.task(kind="resize")
    async def resize(job: Job[dict[str, Any]]) -> None:
        del job

    dead = await client.insert({"n": 1}, kind="resize")
    live = await client.insert({"n": 2}, kind="resize")
    async with client.pool.acquire() as pooled:
        claimed = await claim.claim_batch(pooled, ["default"], 2, 1800)
        await pooled.execute(
            HEARTBEAT,
            [c.job_id for c in claimed],
            [c.run_lease for c in claimed],
            [c.claim_id for c in claimed],
            [None for _ in claimed],
        )
    await conn.execute(PIN_CLAIM, FIXED_NOW)
    await conn.execute(PIN_BEATS, FIXED_NOW, dead.id)
    return dead.id, live.id


async def test_storage_lists_and_reads_the_heartbeat_of_running_jobs(
    client: Client, conn: asyncpg.Connection
) -> None:
    dead, live = await killed_and_live(client, conn)
    rows = {row.id: row for row in await client.list_jobs(state=JobState.RUNNING)}
    assert rows[dead].heartbeat_age(FIXED_NOW) == timedelta(minutes=4)
    assert rows[live].heartbeat_age(FIXED_NOW) == timedelta(seconds=5)
    assert rows[dead].heartbeat_stale(FIXED_NOW)
    assert not rows[live].heartbeat_stale(FIXED_NOW)
    assert rows[dead].heartbeat_stale(FIXED_NOW, after=HEARTBEAT_STALE_SECONDS)
    one = await client.get_job(dead)
    assert one is not None
    assert one.heartbeat_at == rows[dead].heartbeat_at
    await conn.execute("DELETE FROM attempt_state WHERE job_id = $1", live)
    # Before its first heartbeat, an attempt's sign of life is its claim.
    never = await client.get_job(live)
    assert never is not None
    assert never.heartbeat_age(FIXED_NOW) == timedelta(minutes=10)
    assert all(row.heartbeat_at is None for row in await client.list_jobs(state=JobState.FAILED))


async def test_the_running_tab_and_the_detail_mark_a_killed_workers_job_stale(
    client: Client, conn: asyncpg.Connection, migrated_dsn: str, schema: str
) -> None:
    dead, live = await killed_and_live(client, conn)
    app = build_app(migrated_dsn, schema)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot)
        table = app.screen.query_one(JobTable)
        assert "beat" not in [key for key, _l, _w in table.shown_columns]  # All: last error
        await pilot.press(TAB_KEYS["running"])
        await settle(pilot)
        assert [key for key, _l, _w in table.shown_columns][-1] == "beat"
        assert [job.id for job in table.jobs] == [live, dead]
        assert text_of(table.get_cell(str(dead), "beat")) == "4m ago ⚠ stale"
        assert text_of(table.get_cell(str(live), "beat")) == "5s ago"
        table.select_job(dead)
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(app.screen, JobDetailScreen)
        summary = text_of(app.screen.query_one("#summary"))
        assert "Heartbeat" in summary
        assert "4m ago ⚠ stale: worker presumed dead (rescue after 60s)" in summary
