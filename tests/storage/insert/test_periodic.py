"""Periodic jobs: one job per tick however many clients run maintenance, clear schedule errors,
timezones, and what happens to ticks missed while nothing ran."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, InvalidSchedule, Job, JobState, ScheduleNotFound
from storage.insert.periodic import cadence, enqueue_due, store
from storage.ops.maintenance import MaintenanceSettings, run_pass

T0 = datetime(2026, 1, 15, 12, 0, 0, tzinfo=UTC)


class Ping(BaseModel):
    n: int = 0


async def _noop(job: Job[Ping]) -> None:
    return None


@pytest.fixture
async def two_clients(migrated_dsn: str, schema: str) -> AsyncIterator[tuple[Client, Client]]:
    async with (
        await Client.connect(migrated_dsn, schema) as a,
        await Client.connect(migrated_dsn, schema) as b,
    ):
        for c in (a, b):
            c.task(Ping)(_noop)
            c.periodic(Ping(n=7), every=timedelta(seconds=1), name="ping")
        yield a, b


async def _store_at(client: Client, now: datetime) -> None:
    async with client.pool.acquire() as c:
        await store(c, list(client._schedules.values()), now)


async def _jobs(conn: asyncpg.Connection) -> list[asyncpg.Record]:
    return await conn.fetch(
        "SELECT job_id, unique_key, (args->>'n')::int AS n FROM ready_entries"
        " ORDER BY unique_key, job_id"
    )


async def test_two_clients_running_maintenance_make_one_job_per_tick(
    two_clients: tuple[Client, Client], conn: asyncpg.Connection
) -> None:
    a, b = two_clients
    await _store_at(a, T0)
    await _store_at(b, T0)  # the same definition: its place is kept
    settings = MaintenanceSettings()
    for second in range(1, 6):
        now = T0 + timedelta(seconds=second, milliseconds=300)
        async with (
            a.pool.acquire() as ca,
            b.pool.acquire() as cb,
            a.pool.acquire() as ca2,
            b.pool.acquire() as cb2,
        ):
            await asyncio.gather(
                run_pass(ca, settings, outputs_supported=True, now=now),
                run_pass(cb, settings, outputs_supported=True, now=now),
                enqueue_due(ca2, now),  # no leader lock: the schedule row alone must hold
                enqueue_due(cb2, now),
            )

    jobs = await _jobs(conn)
    keys = [j["unique_key"] for j in jobs]
    assert keys == [f"periodic:ping:{(T0 + timedelta(seconds=s)).isoformat()}" for s in range(1, 6)]
    assert all(j["n"] == 7 for j in jobs)
    row = await conn.fetchrow(
        "SELECT next_run_at, last_tick_at, last_job_id FROM periodic_schedules"
    )
    assert row is not None
    assert row["next_run_at"] == T0 + timedelta(seconds=6)
    assert row["last_tick_at"] == T0 + timedelta(seconds=5)
    assert row["last_job_id"] == jobs[-1]["job_id"]


async def test_a_pass_before_the_first_tick_enqueues_nothing(
    two_clients: tuple[Client, Client], conn: asyncpg.Connection
) -> None:
    a, _ = two_clients
    await _store_at(a, T0 + timedelta(milliseconds=500))
    async with a.pool.acquire() as c:
        assert await enqueue_due(c, T0 + timedelta(milliseconds=900)) == []
        assert len(await enqueue_due(c, T0 + timedelta(seconds=1))) == 1  # exactly on the tick
    assert len(await _jobs(conn)) == 1


async def test_only_the_latest_missed_tick_is_enqueued(
    client: Client, conn: asyncpg.Connection
) -> None:
    client.task(Ping)(_noop)
    client.periodic(Ping(), cron="*/5 * * * *", name="five")
    await _store_at(client, T0)
    async with client.pool.acquire() as c:
        fired = await enqueue_due(c, T0 + timedelta(hours=2, minutes=3))  # 24 ticks missed
        again = await enqueue_due(c, T0 + timedelta(hours=2, minutes=4))
    assert len(fired) == 1
    assert again == []
    (job,) = await _jobs(conn)
    assert job["unique_key"] == f"periodic:five:{(T0 + timedelta(hours=2)).isoformat()}"
    next_run = await conn.fetchval("SELECT next_run_at FROM periodic_schedules")
    assert next_run == T0 + timedelta(hours=2, minutes=5)


async def test_cron_ticks_are_wall_clock_times_in_the_schedule_timezone(
    client: Client, conn: asyncpg.Connection
) -> None:
    client.task(Ping)(_noop)
    client.periodic(Ping(), cron="0 9 * * *", timezone="America/New_York", name="nine")
    winter = datetime(2026, 1, 15, 0, 0, tzinfo=UTC)
    await _store_at(client, winter)
    assert await conn.fetchval("SELECT next_run_at FROM periodic_schedules") == datetime(
        2026, 1, 15, 14, 0, tzinfo=UTC
    )  # 09:00 EST is 14:00 UTC
    async with client.pool.acquire() as c:
        assert len(await enqueue_due(c, datetime(2026, 1, 15, 14, 0, 30, tzinfo=UTC))) == 1
    assert await conn.fetchval("SELECT next_run_at FROM periodic_schedules") == datetime(
        2026, 1, 16, 14, 0, tzinfo=UTC
    )

    summer = cadence("0 9 * * *", None, "America/New_York")
    assert summer.following(datetime(2026, 7, 1, tzinfo=UTC)) == datetime(
        2026, 7, 1, 13, 0, tzinfo=UTC
    )  # 09:00 EDT is 13:00 UTC
    assert summer.latest(datetime(2026, 7, 1, 13, 0, tzinfo=UTC)) == datetime(
        2026, 7, 1, 13, 0, tzinfo=UTC
    )


async def test_changing_the_cadence_restarts_the_schedule_at_its_next_tick(
    client: Client, conn: asyncpg.Connection
) -> None:
    client.task(Ping)(_noop)
    client.periodic(Ping(), cron="0 * * * *", name="s")
    await _store_at(client, T0)
    assert await conn.fetchval("SELECT next_run_at FROM periodic_schedules") == T0 + timedelta(
        hours=1
    )
    client.periodic(Ping(n=2), cron="*/10 * * * *", name="s")
    await _store_at(client, T0 + timedelta(minutes=1))
    row = await conn.fetchrow("SELECT next_run_at, (args->>'n')::int AS n FROM periodic_schedules")
    assert row is not None
    assert row["next_run_at"] == T0 + timedelta(minutes=10)
    assert row["n"] == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"cron": "61 * * * *"},
            "Cron expression '61 \\* \\* \\* \\*' is not valid \\(Bad minute\\)",
        ),
        ({"cron": "* * *"}, "Wrong number of fields.*five fields"),
        ({"cron": "* * * * *", "timezone": "Mars/Olympus"}, "Timezone 'Mars/Olympus' is not known"),
        ({"cron": "* * * * *", "every": timedelta(seconds=5)}, "either cron=... or every="),
        ({}, "either cron=... or every="),
        ({"every": timedelta(milliseconds=200)}, "at least 1 second"),
        ({"every": timedelta(seconds=5), "timezone": "Europe/Paris"}, "applies to cron"),
        ({"cron": "* * * * *", "run_at": T0}, "neither run_at"),
        ({"cron": "* * * * *", "unique_key": "k"}, "neither run_at"),
    ],
)
async def test_a_bad_schedule_is_refused_with_a_clear_error(
    client: Client, options: dict[str, object], message: str
) -> None:
    client.task(Ping)(_noop)
    with pytest.raises(InvalidSchedule, match=message):
        client.periodic(Ping(), **options)  # type: ignore[arg-type]
    assert client._schedules == {}


async def test_the_console_lists_schedules_with_their_next_run(client: Client) -> None:
    client.task(Ping)(_noop)
    client.periodic(Ping(), cron="*/5 * * * *", name="five", queue="reports")
    client.periodic(Ping(), every=timedelta(minutes=2))
    await _store_at(client, T0)
    listed = await client.list_schedules()
    assert [(s.name, s.kind, s.queue, s.next_run_at, s.description) for s in listed] == [
        ("five", "ping", "reports", T0 + timedelta(minutes=5), "Every fifth minute of every hour"),
        ("ping", "ping", "default", T0 + timedelta(minutes=2), "every 2 min"),
    ]
    assert await client.remove_schedule("five")
    assert [s.name for s in await client.list_schedules()] == ["ping"]


async def test_two_running_clients_make_one_job_per_tick_of_a_one_second_schedule(
    two_clients: tuple[Client, Client], conn: asyncpg.Connection
) -> None:
    """End to end on the real clock: both runtimes lead maintenance in turn."""
    a, b = two_clients
    for c in (a, b):
        await c.start(maintenance_interval=0.1)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        counts = await a.counts()
        if counts.by_state[JobState.COMPLETED] >= 3:
            break
        await asyncio.sleep(0.1)
    await a.shutdown()
    await b.shutdown()
    keys = [j["unique_key"] for j in await _jobs(conn)]
    assert len(keys) >= 3
    assert len(keys) == len(set(keys))
    ticks = sorted(datetime.fromisoformat(k.removeprefix("periodic:ping:")) for k in keys)
    assert all(t.microsecond == 0 for t in ticks)  # whole-second ticks, one job each


async def test_triggering_a_schedule_enqueues_one_ready_job_and_keeps_its_next_tick(
    client: Client,
) -> None:
    client.task(Ping)(_noop)
    client.periodic(Ping(n=3), every=timedelta(hours=1), name="hourly", queue="reports")
    await _store_at(client, T0)
    row = await client.trigger_schedule("hourly")
    assert (row.kind, row.queue, row.state, row.args) == (
        "ping",
        "reports",
        JobState.AVAILABLE,
        {"n": 3},
    )
    (listed,) = await client.list_schedules()
    assert (listed.next_run_at, listed.last_tick_at, listed.last_job_id) == (
        T0 + timedelta(hours=1),
        None,
        row.id,
    )
    again = await client.trigger_schedule("hourly")  # no tick key: each trigger is a new job
    assert again.id != row.id


async def test_triggering_an_unknown_schedule_is_refused_and_writes_nothing(
    client: Client,
) -> None:
    with pytest.raises(ScheduleNotFound, match="No stored schedule is named 'nope'"):
        await client.trigger_schedule("nope")
    assert await client.list_jobs() == []
