"""Migration v006: done entries get an index by (state, finalized_at, job_id), so a page of
failed or cancelled jobs by finish time, or under a time range, reads one index range of that
state however many jobs of other states finished meanwhile."""

from __future__ import annotations

import asyncpg
import orjson

from storage.read import listing, listing_filter
from storage.read.listing_filter import ListFilter, SortOrder
from tests.storage.migration_db import HAS_INDEX, locks_on_schema
from tests.storage.plans import index_names

INDEX = "done_entries_state_finalized_at_idx"


async def test_installed_schemas_have_it_and_a_rerun_takes_no_lock(
    conn: asyncpg.Connection, schema: str
) -> None:
    assert await conn.fetchval(HAS_INDEX, INDEX)
    async with conn.transaction():
        await conn.execute("SELECT awa.add_done_time_index_v006($1)", schema)
        locked = await locks_on_schema(conn, schema)
    assert locked == 0


async def test_a_schema_from_before_v006_gets_it(conn: asyncpg.Connection, schema: str) -> None:
    await conn.execute(f"DROP INDEX {INDEX}")
    assert not await conn.fetchval(HAS_INDEX, INDEX)
    await conn.execute("SELECT awa.add_done_time_index_v006($1)", schema)
    assert await conn.fetchval(HAS_INDEX, INDEX)


async def test_failed_jobs_by_finish_time_read_the_state_range(conn: asyncpg.Connection) -> None:
    """20,000 completed and 5 failed done entries: the failed page sorted by finish time uses
    the new index, and one under a time range a state-first index (v004's finalized_at index
    would walk every completed entry to find the 5)."""
    await conn.execute(
        "INSERT INTO done_entries (slot, job_id, run_lease, state, attempt, finalized_at)"
        " SELECT 0, n, 1, CASE WHEN n % 4000 = 0 THEN 'failed' ELSE 'completed' END, 1,"
        "        now() - n * interval '1 second' FROM generate_series(1, 20000) n"
    )
    await conn.execute("ANALYZE done_entries")
    for order, since in ((SortOrder.parse("-when"), None), (SortOrder.parse("-id"), "1 hour")):
        where = ListFilter.of()
        params = where.params(listing_filter.NO_BEFORE, 50)
        if since is not None:
            params[5] = await conn.fetchval(f"SELECT now() - interval '{since}'")
        cursor = (
            [] if order.column is listing_filter.SortColumn.ID else [order.cursor(None, None)[0]]
        )
        sql = listing.DONE.sql(order)
        text = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *params, "failed", *cursor)
        names = index_names(orjson.loads(text)[0]["Plan"])
        # by time: the new index; by id: either state-first index, never a walk of all states
        wanted = "_state_finalized_at" if since is None else "_state_"
        assert any(wanted in name for name in names), (order, since, names)
