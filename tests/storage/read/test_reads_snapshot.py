"""List reads and counts come from one snapshot: a job is listed once, in one state."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from typing import Any, cast

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Cancel, Client, InvalidFilter, Job, JobPage, JobState, RetryAfter
from storage.db.pool import Conn
from storage.read import listing
from storage.read.listing_filter import ListFilter
from storage.values.results import WaitForCallback


class Step(BaseModel):
    i: int


async def _noop(job: Job[Step]) -> None:
    return None


def _known(client: Client) -> Client:
    client.task(Step)(_noop)
    return client


class AfterFetch:
    """The engine's connection, with a hook run after its ``n``-th fetch: the moment between
    two of the per-state statements of one page."""

    def __init__(self, conn: Any, n: int, hook: Any) -> None:
        self._conn, self._n, self._hook = conn, n, hook
        self.fetches = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    async def fetch(self, *args: Any) -> Any:
        rows = await self._conn.fetch(*args)
        self.fetches += 1
        if self.fetches == self._n:
            await self._hook()
        return rows


async def test_a_job_cancelled_between_two_state_reads_is_listed_once(
    client: Client, migrated_dsn: str, schema: str
) -> None:
    """The all-states page reads scheduled, then available, ... then cancelled. A cancel that
    commits after the available read used to add the job again from the cancelled read."""
    job = await _known(client).insert(Step(i=1))
    async with await Client.connect(migrated_dsn, schema) as other:

        async def cancel() -> None:
            await other.cancel_job(job.id)

        async with client.pool.acquire() as raw:
            conn = AfterFetch(raw, 2, cancel)  # fetch 1: scheduled, fetch 2: available
            page = await listing.browse(
                cast("Conn", conn), ListFilter(), before_id=None, limit=50, outputs=True
            )
    assert conn.fetches > 2, "the hook never ran"
    assert [(row.id, row.state) for row in page.rows] == [(job.id, JobState.AVAILABLE)]
    assert page.counts.by_state[JobState.AVAILABLE] == 1
    assert page.counts.by_state[JobState.CANCELLED] == 0
    after = await client.list_jobs()
    assert [(row.id, row.state) for row in after] == [(job.id, JobState.CANCELLED)]


async def test_state_may_be_given_as_its_string(client: Client) -> None:
    job = await _known(client).insert(Step(i=1))
    rows = await client.list_jobs(state="available")
    assert [row.id for row in rows] == [job.id]
    assert await client.list_jobs(state="completed") == []
    page = await client.browse(state="available")
    assert [row.id for row in page.rows] == [job.id]


@pytest.mark.parametrize("bad", ["done", "AVAILABLE ", "", "nul\x00"])
async def test_an_unknown_state_is_refused_naming_the_allowed_ones(
    client: Client, bad: str
) -> None:
    with pytest.raises(InvalidFilter, match="use one of scheduled, available, running"):
        await client.list_jobs(state=bad)
    with pytest.raises(InvalidFilter, match="Unknown job state"):
        await client.browse(state=bad)


async def _page_all(client: Client, limit: int) -> list[JobPage]:
    pages = [await client.browse(limit=limit)]
    while pages[-1].has_more:
        pages.append(await client.browse(before_id=pages[-1].rows[-1].id, limit=limit))
    return pages


def _check(page: JobPage, *, whole: bool, state: JobState | None = None) -> None:
    ids = [row.id for row in page.rows]
    assert len(ids) == len(set(ids)), f"duplicates: {[i for i, n in Counter(ids).items() if n > 1]}"
    assert state is None or {row.state for row in page.rows} <= {state}
    if whole:  # the page holds every match: its states agree with the counts read with it
        seen = Counter(row.state for row in page.rows)
        expected = {s: seen.get(s, 0) for s in JobState}
        if state is None:
            assert expected == page.counts.by_state
        else:
            assert expected[state] == page.counts.by_state[state]


async def test_pages_have_no_duplicates_while_a_runtime_works(
    client: Client, migrated_dsn: str, schema: str
) -> None:
    """Retries, callbacks, completions on both paths and operator cancels run while the test
    pages through every state, many times over."""
    waiting: asyncio.Queue[str] = asyncio.Queue()

    @client.task(Step)
    async def step(job: Job[Step]) -> Any:
        match job.args.i % 6:
            case 0:
                job.set_output({"i": job.args.i})
                return None
            case 1 if job.attempt < 2:
                return RetryAfter(0)
            case 2:
                token = await job.register_callback(timeout_seconds=60)
                await waiting.put(token.callback_id)
                return WaitForCallback(token)
            case 3:
                return Cancel("not needed")
            case 4:
                raise RuntimeError("boom")
        return None

    total = 240
    stop = asyncio.Event()

    async def feed(other: Client) -> None:
        for start in range(0, total, 20):
            rows = await other.insert_many(
                [Step(i=i) for i in range(start, start + 20)],
                max_attempts=2,
                tags=["t"] if start % 40 else (),
            )
            with contextlib.suppress(Exception):
                await other.cancel_job(rows[5].id)
        while not stop.is_set():
            callback_id = await waiting.get()
            await other.complete_external(callback_id, output={"ok": True})

    async with await Client.connect(migrated_dsn, schema) as other:
        await client.start(maintenance_interval=0.05, concurrency=8, claim_size=4)
        feeder = asyncio.create_task(feed(other))
        try:
            pages = 0
            deadline = asyncio.get_running_loop().time() + 60
            while pages < 120 and asyncio.get_running_loop().time() < deadline:
                whole = await client.browse(limit=1000)
                _check(whole, whole=True)
                for page in await _page_all(client, 7):
                    _check(page, whole=False)
                    pages += 1
                for state in JobState:
                    page = await client.browse(state=state.value, limit=1000)
                    _check(page, whole=True, state=state)
            assert pages >= 120
        finally:
            stop.set()
            feeder.cancel()
            with contextlib.suppress(asyncio.CancelledError, asyncpg.PostgresError):
                await feeder
            await client.shutdown(abandon=True)
