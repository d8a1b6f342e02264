"""Unique jobs: one holder per (kind, unique key), enforced by the database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pydantic import BaseModel

from storage import (
    Client,
    InvalidOption,
    Job,
    JobState,
    TerminalError,
    UniqueConflict,
)
from storage.db.pool import connect_once
from storage.ops.maintenance import MaintenanceSettings
from storage.ops.rings import rotate
from storage.testing import work_one


class Invoice(BaseModel):
    n: int = 0


@pytest.fixture
def invoices(client: Client) -> None:
    @client.task(Invoice)
    async def invoice(job: Job[Invoice]) -> None:
        if job.args.n < 0:
            raise TerminalError("negative invoice")


async def test_the_same_key_twice_returns_the_first_job_marked_duplicate(
    client: Client, invoices: None, conn: asyncpg.Connection
) -> None:
    first = await client.insert(Invoice(n=1), unique_key="invoice-42")
    second = await client.insert(Invoice(n=2), unique_key="invoice-42")

    assert not first.duplicate
    assert first.unique_key == "invoice-42"
    assert second.duplicate
    assert second.id == first.id
    assert second.args == {"n": 1}  # the holder, not the args of the refused insert
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 1


async def test_twenty_concurrent_clients_with_one_key_make_one_job(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    clients = [await Client.connect(migrated_dsn, schema, max_connections=1) for _ in range(20)]
    try:
        for c in clients:
            c.task(Invoice)(_noop)
        rows = await asyncio.gather(
            *(c.insert(Invoice(n=i), unique_key="once") for i, c in enumerate(clients))
        )
    finally:
        await asyncio.gather(*(c.close() for c in clients))

    assert len({row.id for row in rows}) == 1
    assert sum(not row.duplicate for row in rows) == 1
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 1
    assert await conn.fetchval("SELECT count(*) FROM unique_keys") == 1


async def _noop(job: Job[Invoice]) -> None:
    return None


async def test_other_kinds_and_other_keys_do_not_collide(client: Client, invoices: None) -> None:
    @client.task(kind="receipt")
    async def receipt(job: Job[dict[str, int]]) -> None:
        return None

    a = await client.insert(Invoice(), unique_key="k1")
    b = await client.insert(Invoice(), unique_key="k2")
    c = await client.insert({"n": 1}, kind="receipt", unique_key="k1")
    assert len({a.id, b.id, c.id}) == 3
    assert [a.duplicate, b.duplicate, c.duplicate] == [False, False, False]


async def test_insert_many_applies_the_rule_per_row(
    client: Client, invoices: None, conn: asyncpg.Connection
) -> None:
    held = await client.insert(Invoice(n=0), unique_key="a")
    rows = await client.insert_many([Invoice(n=1), Invoice(n=2)], unique_key="a")
    assert [r.id for r in rows] == [held.id, held.id]
    assert all(r.duplicate for r in rows)

    plain_and_keyed = await client.insert_many([Invoice(n=3), Invoice(n=4)])
    assert not any(r.duplicate for r in plain_and_keyed)
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 3


async def test_insert_many_takes_a_key_per_row_from_a_function_of_the_args(
    client: Client, invoices: None
) -> None:
    rows = await client.insert_many(
        [Invoice(n=1), Invoice(n=2), Invoice(n=1)], unique_key=lambda a: f"inv-{a.n}"
    )
    assert [r.unique_key for r in rows] == ["inv-1", "inv-2", "inv-1"]
    assert [r.duplicate for r in rows] == [False, False, True]
    assert rows[2].id == rows[0].id


async def test_a_key_is_free_again_once_the_job_completes(
    client: Client, invoices: None, conn: asyncpg.Connection
) -> None:
    first = await client.insert(Invoice(n=1), unique_key="daily")
    await work_one(client)
    assert (await client.get_job(first.id)).state is JobState.COMPLETED  # type: ignore[union-attr]
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 1  # the general path

    second = await client.insert(Invoice(n=2), unique_key="daily")
    assert not second.duplicate
    assert second.id != first.id


async def test_completed_in_unique_states_keeps_the_key_after_completion(
    client: Client, invoices: None
) -> None:
    states = [*_unfinished(), "completed"]
    first = await client.insert(Invoice(n=1), unique_key="idem", unique_states=states)
    await work_one(client)
    again = await client.insert(Invoice(n=2), unique_key="idem", unique_states=states)
    assert again.duplicate
    assert again.id == first.id
    assert again.state is JobState.COMPLETED
    assert again.unique_states == states
    assert again.holds_unique_key is True


async def test_a_scheduled_job_holds_its_key(client: Client, invoices: None) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)
    first = await client.insert(Invoice(), unique_key="later", run_at=later)
    again = await client.insert(Invoice(), unique_key="later")
    assert first.state is JobState.SCHEDULED
    assert again.duplicate
    assert again.id == first.id
    assert again.state is JobState.SCHEDULED


async def test_a_failed_job_lets_the_key_go_and_its_retry_is_refused_while_another_holds_it(
    client: Client, invoices: None
) -> None:
    failed = await client.insert(Invoice(n=-1), unique_key="k", max_attempts=1)
    await work_one(client)
    assert (await client.get_job(failed.id)).state is JobState.FAILED  # type: ignore[union-attr]

    newer = await client.insert(Invoice(n=1), unique_key="k")
    assert not newer.duplicate

    with pytest.raises(UniqueConflict, match=f"held by job {newer.id}"):
        await client.retry_job(failed.id)
    assert (await client.get_job(failed.id)).state is JobState.FAILED  # type: ignore[union-attr]

    await work_one(client)  # the newer job completes and lets the key go
    await client.retry_job(failed.id)
    row = await client.get_job(failed.id)
    assert row is not None
    assert row.state is JobState.AVAILABLE
    assert row.holds_unique_key is True
    assert (await client.insert(Invoice(), unique_key="k")).id == failed.id


async def test_cancel_and_delete_free_the_key(
    client: Client, invoices: None, conn: asyncpg.Connection
) -> None:
    held = await client.insert(
        Invoice(), unique_key="c", unique_states=[*_unfinished(), "cancelled"]
    )
    await client.cancel_job(held.id)
    assert (await client.insert(Invoice(), unique_key="c")).id == held.id  # cancelled holds it

    await client.delete_job(held.id)
    assert await conn.fetchval("SELECT count(*) FROM unique_keys") == 0
    fresh = await client.insert(Invoice(), unique_key="c")
    assert not fresh.duplicate


async def test_pruning_a_slot_forgets_the_keys_of_the_jobs_in_it(
    migrated_dsn: str, schema: str
) -> None:
    name = f"{schema}_r3"
    async with connect_once(migrated_dsn) as c:
        await c.execute("SELECT awa.install_queue_storage($1, 3, 3)", name)
    states = [*_unfinished(), "completed"]
    async with await Client.connect(migrated_dsn, name) as client:
        client.task(Invoice)(_noop)
        done = await client.insert(Invoice(), unique_key="p", unique_states=states)
        await work_one(client)
        async with client.pool.acquire() as c:
            for _ in range(3):  # around the ring: the job's slot is pruned on the way
                await client.insert(Invoice(), queue="filler")  # rotation skips an idle slot
                await work_one(client, ["filler"])
                await rotate(c, "queue", timedelta(0), MaintenanceSettings(), True, force=True)
            keys = await c.fetchval("SELECT count(*) FROM unique_keys WHERE job_id = $1", done.id)
        assert await client.get_job(done.id) is None
        assert keys == 0
        again = await client.insert(Invoice(), unique_key="p", unique_states=states)
        assert not again.duplicate


def test_unique_states_must_hold_the_key_through_every_unfinished_state() -> None:
    from storage.insert.unique import resolve_states

    assert resolve_states(None) == tuple(_unfinished())
    assert resolve_states([*_unfinished(), "failed"])[-1] == "failed"
    with pytest.raises(InvalidOption, match="running missing"):
        resolve_states(["scheduled", "available", "waiting_external", "retryable"])
    with pytest.raises(InvalidOption, match="'done', which is not a job state"):
        resolve_states([*_unfinished(), "done"])


async def test_a_bad_unique_states_option_writes_nothing(
    client: Client, invoices: None, conn: asyncpg.Connection
) -> None:
    with pytest.raises(InvalidOption):
        await client.insert(Invoice(), unique_key="x", unique_states=["available"])
    with pytest.raises(InvalidOption, match="needs a unique_key"):
        await client.insert(Invoice(), unique_states=[*_unfinished(), "completed"])
    assert await conn.fetchval("SELECT count(*) FROM unique_keys") == 0


def _unfinished() -> list[str]:
    return ["scheduled", "available", "running", "waiting_external", "retryable"]


async def test_every_unique_and_periodic_statement_prepares(conn: asyncpg.Connection) -> None:
    from storage.insert import periodic, unique

    statements = {
        f"{module.__name__}.{name}": value
        for module in (unique, periodic)
        for name, value in vars(module).items()
        if name.isupper()
        and isinstance(value, str)
        and value.lstrip().startswith(("SELECT", "INSERT", "UPDATE", "DELETE", "WITH"))
    }
    assert len(statements) >= 15
    for name, sql in statements.items():
        assert await conn.prepare(sql) is not None, name
