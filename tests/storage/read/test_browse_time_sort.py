"""The browser's time filter, sort orders and the counts under a time range.

Every state is filtered on its own time column (``storage.read.listing_filter``): ``since`` is
inclusive, ``before`` exclusive. Each order pages by keyset without a gap or a repeat, ties
included; an order the state's indexes do not serve is refused, saying why, and nothing is
read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from storage import (
    Client,
    InvalidFilter,
    Job,
    JobRow,
    JobState,
    SortColumn,
    SortOrder,
    WaitForCallback,
)
from storage.read import listing
from storage.read.listing_filter import row_time
from storage.runtime.claim import claim_batch
from storage.testing import work_one
from tests.tui.scenarios import seed_incident

TICK = timedelta(microseconds=1)
TABS: tuple[tuple[JobState | None, bool], ...] = (
    (None, False),
    *((state, False) for state in JobState),
    (None, True),
)


def _expected_time(row: JobRow) -> datetime | None:
    """The column each state is filtered on, spelled out once more for the test."""
    if row.dlq is not None:
        return row.dlq.dlq_at
    match row.state:
        case JobState.AVAILABLE | JobState.SCHEDULED | JobState.RETRYABLE:
            return row.run_at
        case JobState.RUNNING | JobState.WAITING_EXTERNAL:
            return row.attempted_at  # when the attempt was claimed
        case JobState.COMPLETED | JobState.FAILED | JobState.CANCELLED:
            return row.finalized_at


@pytest.mark.parametrize(("state", "dlq"), TABS, ids=lambda v: str(getattr(v, "value", v)))
async def test_each_state_filters_on_its_own_time_column_with_inclusive_since(
    client: Client, conn: asyncpg.Connection, state: JobState | None, dlq: bool
) -> None:
    await seed_incident(client, conn)
    rows = await client.list_jobs(state=state, dlq=dlq, limit=100)
    if state is JobState.RUNNING:  # the scenario leaves no job running: claim one
        assert rows == []
        return
    assert rows, "the scenario has a job in every other state"
    for row in rows:
        at = _expected_time(row)
        assert at is not None
        assert row_time(row) == at

        async def ids(since: datetime | None = None, before: datetime | None = None) -> list[int]:
            rows = await client.list_jobs(state=state, dlq=dlq, since=since, before=before)
            return [r.id for r in rows]

        assert row.id in await ids(since=at)
        assert row.id not in await ids(since=at + TICK)
        assert row.id not in await ids(before=at)
        assert row.id in await ids(before=at + TICK)
        same_time = [r.id for r in rows if _expected_time(r) == at]
        assert await ids(since=at, before=at + TICK) == same_time


BASE = datetime(2026, 11, 30, 10, 0, tzinfo=UTC)
# Three distinct times per table, so every order has ties that the job id must break.
_AT = "$1::timestamptz + ({}) * interval '1 minute'"
TIES = [
    f"UPDATE ready_entries SET run_at = {_AT.format('job_id % 3')}, attempt = 1 + job_id % 3",
    f"UPDATE deferred_jobs SET run_at = {_AT.format('job_id % 3')}, attempt = 1 + job_id % 3",
    f"UPDATE claim_batches SET claimed_at = {_AT.format('claim_id % 3')}",
    f"UPDATE done_entries SET finalized_at = {_AT.format('job_id % 3')}",
    f"UPDATE receipt_completion_batches SET finalized_at = {_AT.format('batch_id % 3')}",
    f"UPDATE dlq_entries SET dlq_at = {_AT.format('job_id % 3')}",
]


async def _boom(job: object) -> None:
    raise RuntimeError("boom")


async def _history(client: Client, conn: asyncpg.Connection) -> None:
    """Jobs in every state, several per state, with tied times and attempt counts."""

    async def done(job: object) -> None:
        return None

    client.task(kind="t_done", queue="done")(done)
    client.task(kind="t_fail", queue="fail")(_boom)
    client.task(kind="t_dead", queue="dead")(_boom)
    client.task(kind="t_retry", queue="retry")(_boom)
    client.task(kind="t_run", queue="run")(done)

    async def park(job: Job[object]) -> WaitForCallback:
        return WaitForCallback(await job.register_callback(timeout_seconds=3600))

    client.task(kind="t_wait", queue="wait")(park)
    await client.configure_queue("dead", dlq=True)
    for n in range(7):
        await client.insert({"n": n}, kind="t_done")  # compact
        await client.insert({"n": n}, kind="t_done", tags=["general"])
    for n in range(4):
        await client.insert({"n": n}, kind="t_fail", max_attempts=1)
        await client.insert({"n": n}, kind="t_dead", max_attempts=1)
        await client.insert({"n": n}, kind="t_wait")
        await client.insert({"n": n}, kind="t_retry", max_attempts=5)
    for queue in ("done", "fail", "dead", "wait", "retry"):
        while await work_one(client, [queue]) is not None:
            pass
    client.task(kind="t_bulk", queue="bulk")(done)  # compact batches of several jobs
    await client.insert_many([{"n": n} for n in range(40)], kind="t_bulk")
    await client.run_until_idle(["bulk"], claim_size=8, maintenance_interval=None)
    assert await conn.fetchval("SELECT max(completed_count) FROM receipt_completion_batches") > 1
    for n in range(3):
        cancelled = await client.insert({"n": n}, kind="t_done")
        await client.cancel_job(cancelled.id)
        await client.insert({"n": n}, kind="t_run")  # stays available, then 3 are claimed
        await client.insert({"n": n}, kind="t_done", run_at=datetime(2999, 1, 1, tzinfo=UTC))
    for n in range(4):
        await client.insert({"n": n}, kind="t_run")
    async with client.pool.acquire() as c:
        assert len(await claim_batch(c, ["run"], 3, 1800)) == 3
    for statement in TIES:
        await conn.execute(statement, BASE)


ORDERS = [SortOrder.parse(text) for text in ("-id", "id", "-when", "when", "-attempts", "attempts")]


async def test_every_order_pages_without_gaps_or_repeats(
    client: Client, conn: asyncpg.Connection
) -> None:
    await _history(client, conn)
    served = 0
    for state, dlq in TABS:
        everything = {r.id for r in await client.list_jobs(state=state, dlq=dlq, limit=1000)}
        assert everything, (state, dlq)
        for order in ORDERS:
            if order.refusal(state, dlq) is not None:
                with pytest.raises(InvalidFilter, match="cannot be"):
                    await client.list_jobs(state=state, dlq=dlq, sort=order)
                continue
            served += 1
            for since in (None, BASE + timedelta(minutes=1)):
                whole = await client.list_jobs(
                    state=state, dlq=dlq, sort=order.text, since=since, limit=1000
                )
                keys = [order.key(row) for row in whole]
                assert keys == sorted(keys, reverse=order.descending), (state, order)
                assert len(set(keys)) == len(keys)
                if since is None:
                    assert {row.id for row in whole} == everything
                else:
                    assert all(row_time(row) >= since for row in whole)  # type: ignore[operator]
                paged: list[JobRow] = []
                after: JobRow | None = None
                while True:
                    page = await client.list_jobs(
                        state=state, dlq=dlq, sort=order, since=since, after=after, limit=2
                    )
                    paged.extend(page)
                    if len(page) < 2:
                        break
                    after = page[-1]
                assert [r.id for r in paged] == [r.id for r in whole], (state, dlq, order, since)
    assert served >= 30


async def test_counts_follow_the_time_range(client: Client, conn: asyncpg.Connection) -> None:
    await _history(client, conn)
    since = BASE + timedelta(minutes=2)
    page = await client.browse(since=since, limit=1000)
    expected = {state: 0 for state in JobState}
    for row in page.rows:
        expected[row.state] += 1
    assert page.counts.by_state == expected
    dead = await client.list_jobs(dlq=True, since=since, limit=1000)
    assert page.counts.dlq == len(dead) > 0
    assert sum(expected.values()) < len(await client.list_jobs(limit=1000))
    empty = await client.browse(before=BASE, limit=1000)
    assert empty.rows == []
    assert empty.counts.total == 0


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ({"sort": "oldest"}, "Cannot sort by 'oldest'; use one of id, when, attempts"),
        ({"state": "completed", "sort": "-attempts"}, "Completed jobs cannot be sorted by att"),
        ({"sort": "id"}, "All jobs cannot be listed oldest id first"),
        ({"dlq": True, "sort": "attempts"}, "Dead-lettered jobs cannot be sorted by attempts"),
        ({"since": BASE, "before": BASE}, "The time range is empty"),
        ({"since": datetime(2026, 1, 1)}, "since must be an aware datetime"),  # noqa: DTZ001
    ],
)
async def test_bad_sort_or_time_values_are_refused_clearly(
    client: Client, conn: asyncpg.Connection, call: dict[str, object], message: str
) -> None:
    client.task(kind="t_any")(_boom)
    job = await client.insert({"n": 1}, kind="t_any")
    for read in (client.list_jobs, client.browse):
        with pytest.raises(InvalidFilter, match=message.replace("(", r"\(")):
            await read(**call)  # type: ignore[arg-type]
    assert [r.id for r in await client.list_jobs()] == [job.id]


async def test_every_list_statement_prepares_in_every_order(conn: asyncpg.Connection) -> None:
    orders = [SortOrder(column, down) for column in SortColumn for down in (True, False)]
    for statement in listing.STATEMENTS:
        for order in orders:
            if order.column is SortColumn.ATTEMPTS and statement.attempts is None:
                continue  # refused before any SQL (SortOrder.refusal)
            for outputs in (True, False):
                assert await conn.prepare(statement.sql(order, outputs=outputs))
    for sql in listing.COMPACT_BATCHES.values():
        assert await conn.prepare(sql)  # (the walks by time take the cursor id as $7)


async def test_a_place_pages_as_the_row_it_came_from(
    client: Client, conn: asyncpg.Connection
) -> None:
    """``after`` takes the (value, id) ``SortOrder.key`` gives, for callers that keep no rows
    (the HTTP API's cursor); a place of the wrong type for the order is refused, saying so."""
    await _history(client, conn)
    for text in ("-when", "when", "-id"):
        order = SortOrder.parse(text)
        first = await client.list_jobs(sort=order, limit=5)
        by_row = await client.list_jobs(sort=order, after=first[-1], limit=5)
        by_place = await client.list_jobs(sort=order, after=order.key(first[-1]), limit=5)
        assert [r.id for r in by_place] == [r.id for r in by_row] != []
    for sort, place in [("-when", (5, 1)), ("-id", (BASE, 1)), ("-id", (1, 2**63))]:
        with pytest.raises(InvalidFilter, match=f"after must be a row or its place in sort {sort}"):
            await client.list_jobs(sort=sort, after=place)  # type: ignore[arg-type]
