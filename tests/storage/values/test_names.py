"""The one name rule (issue 12, item 4): schema names refused alike by Python and by the SQL
installer, a maximum-length schema working end to end (insert, cancel notification, external
completion), and kind and queue names PostgreSQL cannot store refused before anything is sent.
"""

from __future__ import annotations

import asyncio
import itertools
import os
from typing import Any

import asyncpg
import pytest

from storage import Client, InvalidFilter, InvalidName, Job, JobState, WaitForCallback
from storage.db.migrator import install_schema
from storage.db.pool import connect_once
from storage.testing import work_one
from storage.values.names import (
    CHANNEL_PREFIXES,
    SCHEMA_NAME_MAX_LENGTH,
    channel,
    check_schema_name,
)

_numbers = itertools.count(1)

REFUSED_SCHEMAS = {
    "63 characters": "s" * 63,
    "51 characters": "s" * 51,
    "70 characters (would be truncated)": "s" * 70,
    "newline-terminated": "jobs\n",
    "upper-case": "Jobs",
    "quoted": '"jobs"',
    "hyphen": "my-jobs",
    "leading digit": "1jobs",
    "reserved prefix": "pg_jobs",
    "empty": "",
}


def _max_length_name() -> str:
    prefix = f"m{os.getpid()}_{next(_numbers)}_"
    return prefix + "x" * (SCHEMA_NAME_MAX_LENGTH - len(prefix))


def test_the_limit_is_the_identifier_limit_less_the_longest_channel_prefix() -> None:
    assert SCHEMA_NAME_MAX_LENGTH == 50
    name = "s" * SCHEMA_NAME_MAX_LENGTH
    assert max(len(channel(kind, name)) for kind in CHANNEL_PREFIXES) == 63


@pytest.mark.parametrize("name", REFUSED_SCHEMAS.values(), ids=REFUSED_SCHEMAS.keys())
async def test_python_refuses_the_schema_name_before_connecting(name: str) -> None:
    with pytest.raises(InvalidName, match="Schema name"):
        check_schema_name(name)
    # Refused before any connection is tried: this DSN would fail differently.
    with pytest.raises(InvalidName):
        await Client.connect("postgresql://nobody@127.0.0.1:1/none", name)


@pytest.mark.parametrize("name", REFUSED_SCHEMAS.values(), ids=REFUSED_SCHEMAS.keys())
async def test_the_sql_installer_refuses_the_schema_name_and_creates_nothing(
    migrated_dsn: str, name: str
) -> None:
    async with connect_once(migrated_dsn) as conn:
        with pytest.raises(asyncpg.InvalidParameterValueError, match="schema name"):
            await conn.execute("SELECT awa.install_queue_storage($1)", name)
        assert not await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM awa.queue_storage_registry WHERE schema_name = $1)"
            " OR EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1 OR nspname = left($1, 63))",
            name,
        )


@pytest.mark.parametrize("length", [SCHEMA_NAME_MAX_LENGTH, SCHEMA_NAME_MAX_LENGTH + 1])
async def test_python_and_sql_draw_the_length_line_at_the_same_place(
    migrated_dsn: str, length: int
) -> None:
    name = (f"p{os.getpid()}_{next(_numbers)}_" + "x" * 64)[:length]
    try:
        check_schema_name(name)
        python_accepts = True
    except InvalidName:
        python_accepts = False
    async with connect_once(migrated_dsn) as conn:
        try:
            await conn.execute("SELECT awa.check_queue_storage_schema_name($1)", name)
            sql_accepts = True
        except asyncpg.InvalidParameterValueError:
            sql_accepts = False
    assert python_accepts == sql_accepts == (length <= SCHEMA_NAME_MAX_LENGTH)


async def test_a_max_length_schema_works_end_to_end(migrated_dsn: str) -> None:
    """Insert, a cancel heard by a running handler, and an external completion, whose
    notifications use the longest channel names a schema can have."""
    name = _max_length_name()
    async with connect_once(migrated_dsn) as conn:
        await install_schema(conn, name)
    loop = asyncio.get_running_loop()
    running: asyncio.Future[Job[Any]] = loop.create_future()
    heard_cancel = asyncio.Event()

    async with await Client.connect(migrated_dsn, name) as client:

        @client.task(kind="long_wait", queue="cancels")
        async def long_wait(job: Job[dict[str, int]]) -> None:
            running.set_result(job)
            await job.wait_cancelled()  # set only by the cancel notification
            heard_cancel.set()

        @client.task(kind="park")
        async def park(job: Job[dict[str, int]]) -> WaitForCallback:
            return WaitForCallback(await job.register_callback(timeout_seconds=3600))

        waiting = await client.insert({"n": 1}, kind="long_wait")
        await client.start(queues=["cancels"], maintenance_interval=None)
        try:
            await asyncio.wait_for(running, 10)
            await client.cancel_job(waiting.id)
            await asyncio.wait_for(heard_cancel.wait(), 10)
        finally:
            await client.shutdown(abandon=not heard_cancel.is_set())
        cancelled = await client.get_job(waiting.id)
        assert cancelled is not None
        assert cancelled.state is JobState.CANCELLED

        parked = await client.insert({"n": 2}, kind="park")
        result = await work_one(client)
        assert result is not None
        assert result.row is not None
        assert result.row.state is JobState.WAITING_EXTERNAL
        assert result.row.callback is not None
        completed = await client.complete_external(
            result.row.callback.callback_id, output={"ok": True}
        )
        assert completed.id == parked.id
        assert completed.state is JobState.COMPLETED
        assert completed.output == {"ok": True}


BAD_TEXT = {"NUL": "a\x00b", "lone surrogate": "a\ud800b"}


@pytest.mark.parametrize("bad", BAD_TEXT.values(), ids=BAD_TEXT.keys())
async def test_kind_and_queue_names_postgres_cannot_store_are_refused(
    client: Client, conn: asyncpg.Connection, bad: str
) -> None:
    @client.task(kind="fine")
    async def fine(job: Job[dict[str, int]]) -> None:
        return None

    with pytest.raises(InvalidName, match=r"Kind name .* cannot be stored"):
        await client.insert({"n": 1}, kind=bad)
    with pytest.raises(InvalidName, match=r"Queue name .* cannot be stored"):
        await client.insert({"n": 1}, kind="fine", queue=bad)
    with pytest.raises(InvalidName, match="Kind name"):
        client.task(kind=bad)
    with pytest.raises(InvalidName, match="Queue name"):
        client.task(kind="other", queue=bad)
    with pytest.raises(InvalidFilter, match="kind filter"):
        await client.list_jobs(kind=bad)
    with pytest.raises(InvalidFilter, match="queue filter"):
        await client.list_jobs(queue=bad)
    with pytest.raises(InvalidFilter, match="queue filter"):
        await client.bulk_action("cancel", dry_run=True, queue=bad)
    with pytest.raises(InvalidName, match="Queue name"):
        await client.configure_queue(bad, dlq=True)
    with pytest.raises(InvalidName, match="Queue name"):
        await client.start(queues=[bad])
    assert "other" not in client.tasks
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0
    assert await conn.fetchval("SELECT count(*) FROM queue_settings") == 0
    # The refused start left the client as it was: a valid start still works.
    await client.run_until_idle(queues=["default"], maintenance_interval=None)
