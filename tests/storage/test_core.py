"""Engine core against a real PostgreSQL: enqueue, claim, both completion paths, the guard."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job, JobState
from storage.finalize.attempt_writes import complete_general
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import AttemptRecord, AttemptRef, CompactCompletion, Outcome
from storage.runtime.claim import claim_batch
from storage.testing import work_one


class Noop(BaseModel):
    n: int


@pytest.fixture
def noop_handler(client: Client) -> None:
    """Kind ``noop`` handled by this test's client, so its inserts do not depend on another
    test having published a ``noop`` descriptor in the shared control schema."""

    @client.task(Noop)
    async def noop(job: Job[Noop]) -> None:
        return None


async def _claim_one(client: Client, deadline: float = 1800.0):  # type: ignore[no-untyped-def]
    async with client.pool.acquire() as c:
        (claimed,) = await claim_batch(c, ["default"], 1, deadline)
    return claimed


async def test_ten_thousand_noop_jobs_complete_on_the_compact_path(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(Noop)
    async def noop(job: Job[Noop]) -> None:
        return None

    for start in range(0, 10_000, 2_000):
        await client.insert_many([Noop(n=i) for i in range(start, start + 2_000)])
    await client.run_until_idle(
        concurrency=512, claim_size=512, claim_threshold=512, maintenance_interval=None
    )

    counts = await client.counts(cap=20_000)
    assert counts.by_state[JobState.COMPLETED] == 10_000
    assert counts.total == 10_000
    batches = await conn.fetchval("SELECT count(*) FROM receipt_completion_batches")
    assert batches <= 10_000 // 512 + 5
    assert (
        await conn.fetchval("SELECT sum(completed_count) FROM receipt_completion_batches") == 10_000
    )
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 0
    assert (
        await conn.fetchval("SELECT count(*) FROM terminal_jobs WHERE path = 'compact'") == 10_000
    )
    row = await client.get_job(1)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert row.storage_path == "compact"


async def test_tagged_job_completes_through_one_done_entry(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(Noop)
    async def noop(job: Job[Noop]) -> None:
        assert job.tags == ["billing"]

    inserted = await client.insert(Noop(n=1), tags=["billing"])
    result = await work_one(client)
    assert result is not None
    assert result.ended.outcome is Outcome.WRITTEN
    assert await conn.fetchval("SELECT count(*) FROM done_entries WHERE state = 'completed'") == 1
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 0
    view = await conn.fetchrow("SELECT * FROM terminal_jobs WHERE job_id = $1", inserted.id)
    assert view is not None
    assert view["state"] == "completed"
    assert view["path"] == "general"
    row = await client.get_job(inserted.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert row.tags == ["billing"]
    assert row.storage_path == "general"


@pytest.mark.usefixtures("noop_handler")
async def test_priority_then_lane_order(client: Client) -> None:
    low = await client.insert(Noop(n=1), kind="noop", priority=4)
    high = await client.insert(Noop(n=2), kind="noop", priority=1)
    first = await client.insert(Noop(n=3), kind="noop", priority=2)
    second = await client.insert(Noop(n=4), kind="noop", priority=2)
    order = [(await _claim_one(client)).job_id for _ in range(4)]
    assert order == [high.id, first.id, second.id, low.id]


@pytest.mark.usefixtures("noop_handler")
async def test_claim_records_one_claim_batch_and_no_per_job_row(
    client: Client, conn: asyncpg.Connection
) -> None:
    await client.insert_many([Noop(n=i) for i in range(5)], kind="noop")
    async with client.pool.acquire() as c:
        claimed = await claim_batch(c, ["default"], 10, 60)
    assert [j.attempt for j in claimed] == [1] * 5
    assert await conn.fetchval("SELECT count(*) FROM claim_batches") == 1
    assert await conn.fetchval("SELECT count(*) FROM attempt_state") == 0
    assert {r.state for r in await client.list_jobs(state=JobState.RUNNING)} == {JobState.RUNNING}


@pytest.mark.usefixtures("noop_handler")
async def test_scheduled_job_waits_for_promotion(client: Client) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    row = await client.insert(Noop(n=1), kind="noop", run_at=later)
    assert row.state is JobState.SCHEDULED
    stored = await client.get_job(row.id)
    assert stored is not None
    assert stored.state is JobState.SCHEDULED
    async with client.pool.acquire() as c:
        assert await claim_batch(c, ["default"], 10, 60) == []


@pytest.mark.usefixtures("noop_handler")
async def test_completion_after_cancel_is_stale_and_writes_nothing(
    client: Client, conn: asyncpg.Connection
) -> None:
    await client.insert(Noop(n=1), kind="noop")
    claimed = await _claim_one(client)
    await client.cancel_job(claimed.job_id)
    item = CompactCompletion(
        claimed.job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, '{"x":1}', False
    )
    async with client.pool.acquire() as c:
        outcome = await complete_compact(c, [item], outputs_supported=True)
    assert outcome == [Outcome.STALE]
    assert await conn.fetchval("SELECT count(*) FROM receipt_completion_batches") == 0
    row = await client.get_job(claimed.job_id)
    assert row is not None
    assert row.state is JobState.CANCELLED
    assert row.output is None


@pytest.mark.usefixtures("noop_handler")
async def test_completion_from_a_rescued_attempt_is_stale(client: Client) -> None:
    job = await client.insert(Noop(n=1), kind="noop")
    old = await _claim_one(client, deadline=0)
    report = await client.run_maintenance()
    assert report.rescued == 1
    await client.run_maintenance()  # promotes the immediate retry
    new = await _claim_one(client)
    assert new.job_id == job.id
    assert new.run_lease == old.run_lease + 1
    assert new.attempt == 2
    stale = AttemptRecord(AttemptRef(old.job_id, old.run_lease, old.claim_id), 1, 25, None)
    async with client.pool.acquire() as c:
        ended = await complete_general(c, stale, keyed=False, outputs_supported=True)
    assert ended.outcome is Outcome.STALE
    fresh = CompactCompletion(new.job_id, new.run_lease, new.claim_id, new.lane_seq, None, False)
    async with client.pool.acquire() as c:
        assert await complete_compact(c, [fresh], outputs_supported=True) == [Outcome.WRITTEN]
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert row.attempt == 2
    assert [e["error"] for e in row.errors] == []  # compact completion carries no history
    # the rescue entry stays on the ready row of the second attempt
    assert row.run_lease == new.run_lease


@pytest.mark.usefixtures("noop_handler")
async def test_finalize_retry_after_lost_ack_is_idempotent(
    client: Client, conn: asyncpg.Connection
) -> None:
    await client.insert_many([Noop(n=1)], kind="noop")
    await client.insert(Noop(n=2), kind="noop", tags=["t"])
    compact, general = await _claim_one(client), await _claim_one(client)
    item = CompactCompletion(
        compact.job_id, compact.run_lease, compact.claim_id, compact.lane_seq, '{"a":1.0}', False
    )
    record = AttemptRecord(
        AttemptRef(general.job_id, general.run_lease, general.claim_id),
        1,
        25,
        None,
        output_text='{"b":2}',
    )
    async with client.pool.acquire() as c:
        first = await complete_compact(c, [item], outputs_supported=True)
        again = await complete_compact(c, [item], outputs_supported=True)
        g1 = await complete_general(c, record, keyed=False, outputs_supported=True)
        g2 = await complete_general(c, record, keyed=False, outputs_supported=True)
    assert first == [Outcome.WRITTEN]
    assert again == [Outcome.ALREADY]
    assert g1.outcome is Outcome.WRITTEN
    assert g2.outcome is Outcome.ALREADY
    assert await conn.fetchval("SELECT sum(completed_count) FROM receipt_completion_batches") == 1
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1
    stored = await client.get_job(compact.job_id)
    assert stored is not None
    assert stored.output_text == '{"a":1.0}'


async def test_list_jobs_newest_first_with_keyset_paging(client: Client) -> None:
    @client.task(Noop)
    async def noop(job: Job[Noop]) -> None:
        return None

    ids = [r.id for r in await client.insert_many([Noop(n=i) for i in range(30)])]
    await client.run_until_idle(maintenance_interval=None)
    page1 = await client.list_jobs(state=JobState.COMPLETED, limit=10)
    page2 = await client.list_jobs(state=JobState.COMPLETED, limit=10, before_id=page1[-1].id)
    assert [r.id for r in page1 + page2] == sorted(ids, reverse=True)[:20]
    assert all(r.output_text is None for r in page1 + page2)
    everything = await client.list_jobs(limit=100)
    assert [r.id for r in everything] == sorted(ids, reverse=True)
    assert await client.list_jobs(kind="other") == []


@pytest.mark.parametrize(
    ("args", "kind", "message"),
    [({"n": 1}, None, "needs kind"), ({"n": 1}, "nobody_handles_this", "nothing was inserted")],
)
async def test_unknown_kinds_are_refused_and_nothing_is_written(
    client: Client, conn: asyncpg.Connection, args: dict[str, int], kind: str | None, message: str
) -> None:
    from storage import UnknownKind

    with pytest.raises(UnknownKind, match=message):
        await client.insert(args, kind=kind)
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0


async def test_args_that_do_not_validate_are_refused(
    client: Client, conn: asyncpg.Connection
) -> None:
    from storage import ArgsValidationError

    @client.task(Noop)
    async def noop(job: Job[Noop]) -> None:
        return None

    with pytest.raises(ArgsValidationError, match="do not match Noop"):
        await client.insert({"n": "not a number"}, kind="noop")

    @client.task(kind="free_form")
    async def free(job: Job[dict[str, float]]) -> None:
        return None

    with pytest.raises(ArgsValidationError, match=r"cannot be stored.*\$\.n.*not finite"):
        await client.insert({"n": float("nan")}, kind="free_form")
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0


@pytest.mark.parametrize(
    ("dsn", "error"),
    [
        ("postgresql://user@localhost:notaport/db", "ConfigError"),
        ("postgresql://user:secret@127.0.0.1:1/db", "ConnectionFailed"),
    ],
)
async def test_bad_dsns_give_clear_errors_without_the_password(dsn: str, error: str) -> None:
    import storage

    with pytest.raises(getattr(storage, error)) as caught:
        await Client.connect(dsn)
    assert "secret" not in str(caught.value)


async def test_connecting_to_an_unmigrated_schema_says_so(migrated_dsn: str) -> None:
    from storage import SchemaNotMigrated

    with pytest.raises(SchemaNotMigrated, match="no queue storage"):
        await Client.connect(migrated_dsn, "not_installed_here")
