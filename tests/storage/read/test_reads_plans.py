"""Unclaimed ready entries are found lane by lane through the lane index, whatever the
planner knows about the tables.

Straight after a load, autovacuum has analyzed the large ready-entries partition but not yet
the one-row ``queue_lanes``, which the planner then guesses at about a thousand lanes. Left
to itself it turned the lane walk into a hash join over every ready entry in the schema
(35-90 ms at 100,000 jobs instead of under one). The read must stay an index range scan per
lane.
"""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson
from pydantic import BaseModel

from storage import Client, Job
from storage.db.sql import UNCLAIMED_READY
from storage.read import listing, listing_filter, queues
from storage.read.counting import COUNT_CAP
from storage.read.descriptors import KIND_COUNTS
from tests.storage.plans import plan_nodes

JOBS = 3_000


class Tick(BaseModel):
    i: int


async def _noop(job: Job[Tick]) -> None:
    return None


async def _scanned_ready_partitions(conn: asyncpg.Connection, sql: str, *params: Any) -> set[str]:
    """The ready-entries partitions holding rows that the plan reads whole (sequential scans).
    An empty partition is read whole at no cost, and the planner rightly does so."""
    text = await conn.fetchval(f"EXPLAIN (FORMAT JSON) {sql}", *params)
    plan = orjson.loads(text)[0]["Plan"]
    holding = {
        r["relname"]
        for r in await conn.fetch(
            "SELECT c.relname FROM pg_class c WHERE c.relname LIKE 'ready_entries%'"
            " AND c.relnamespace = current_schema()::regnamespace AND c.reltuples > 0"
        )
    }
    assert holding, "the load left no analyzed ready entries to look at"
    return {
        node["Relation Name"]
        for node in plan_nodes(plan)
        if node["Node Type"] == "Seq Scan" and node.get("Relation Name") in holding
    }


async def _loaded_without_lane_statistics(client: Client, conn: asyncpg.Connection) -> None:
    """Run a history of jobs, then leave the tables as a load does: the ready entries analyzed,
    the lanes never (autovacuum off for them, so it cannot analyze them meanwhile)."""
    await conn.execute("ALTER TABLE queue_lanes SET (autovacuum_enabled = false)")
    client.task(Tick)(_noop)
    await client.insert_many([Tick(i=i) for i in range(JOBS)])
    await client.run_until_idle(maintenance_interval=None)
    await conn.execute("ANALYZE ready_entries")
    lanes_analyzed = await conn.fetchval(
        "SELECT reltuples >= 0 FROM pg_class WHERE oid = 'queue_lanes'::regclass"
    )
    assert lanes_analyzed is False


async def test_the_available_page_reads_lanes_through_their_index(
    client: Client, conn: asyncpg.Connection
) -> None:
    await _loaded_without_lane_statistics(client, conn)
    params = listing_filter.ListFilter.of().params(listing_filter.NO_BEFORE, 50)
    sql = listing.AVAILABLE.sql(listing_filter.DEFAULT_SORT)
    assert await _scanned_ready_partitions(conn, sql, *params) == set()


async def test_every_read_of_unclaimed_entries_reads_lanes_through_their_index(
    client: Client, conn: asyncpg.Connection
) -> None:
    """The fragment the kind counts and the available page share."""
    await _loaded_without_lane_statistics(client, conn)
    sql = f"SELECT r.kind, r.job_id FROM {UNCLAIMED_READY}"
    assert await _scanned_ready_partitions(conn, sql) == set()
    assert UNCLAIMED_READY in KIND_COUNTS


async def test_the_queue_summaries_read_lanes_through_their_index(
    client: Client, conn: asyncpg.Connection
) -> None:
    """Every ``/metrics`` scrape reads them: a scan of the ready entries would grow with the
    history and the backlog."""
    await _loaded_without_lane_statistics(client, conn)
    caps = (COUNT_CAP, queues.DONE_SCAN_CAP, queues.BATCH_SCAN_CAP)
    assert await _scanned_ready_partitions(conn, queues.SUMMARIES, *caps) == set()
