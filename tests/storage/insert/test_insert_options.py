"""Insert options that cannot mean what they say are refused in one clear line, nothing
written: a naive ``run_at`` (it raised a raw ``TypeError``), an empty kind or queue name (it
was stored), and a NaN or infinity in metadata or tags (stored as ``null``, as orjson writes
it; outputs and args refuse it through the same codec)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from storage import Client, InvalidName, InvalidOption, Tasks


@pytest.fixture
async def known_kind(client: Client) -> None:
    @client.task(kind="k")
    async def k(job: object) -> None:
        del job


async def _nothing_written(conn: asyncpg.Connection) -> None:
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0
    assert await conn.fetchval("SELECT count(*) FROM deferred_jobs") == 0


@pytest.mark.usefixtures("known_kind")
async def test_a_naive_run_at_is_an_invalid_option(
    client: Client, conn: asyncpg.Connection
) -> None:
    naive = datetime.now(UTC).replace(tzinfo=None) + timedelta(minutes=5)
    with pytest.raises(InvalidOption, match="run_at must be a timezone-aware datetime"):
        await client.insert({"n": 1}, kind="k", run_at=naive)
    with pytest.raises(InvalidOption, match="not a str"):
        await client.insert({"n": 1}, kind="k", run_at="tomorrow")
    await _nothing_written(conn)
    aware = await client.insert({"n": 1}, kind="k", run_at=datetime.now(UTC) + timedelta(hours=1))
    assert aware.state == "scheduled"


@pytest.mark.usefixtures("known_kind")
@pytest.mark.parametrize("options", [{"kind": ""}, {"kind": "k", "queue": ""}])
async def test_an_empty_kind_or_queue_name_is_refused(
    client: Client, conn: asyncpg.Connection, options: dict[str, Any]
) -> None:
    with pytest.raises(InvalidName, match="name must not be empty"):
        await client.insert({"n": 1}, **options)
    await _nothing_written(conn)


async def test_tasks_queues_and_schedules_refuse_empty_names_too(client: Client) -> None:
    with pytest.raises(InvalidName, match="Kind name must not be empty"):
        Tasks().task(kind="")
    with pytest.raises(InvalidName, match="Queue name must not be empty"):
        Tasks().task(kind="k", queue="")
    with pytest.raises(InvalidName, match="Queue name must not be empty"):
        await client.start([""])
    with pytest.raises(InvalidName, match="Queue name must not be empty"):
        await client.configure_queue("", dlq=True)


@pytest.mark.usefixtures("known_kind")
@pytest.mark.parametrize(
    ("options", "where"),
    [
        ({"metadata": {"x": float("nan")}}, r"metadata= .* at \$\.x"),
        ({"metadata": {"deep": [1, float("inf")]}}, r"metadata= .* at \$\.deep\[1\]"),
        ({"tags": ["a", float("-inf")]}, r"tags= .* at \$\[1\]"),
    ],
)
async def test_non_finite_numbers_in_metadata_and_tags_are_refused(
    client: Client, conn: asyncpg.Connection, options: dict[str, Any], where: str
) -> None:
    with pytest.raises(InvalidOption, match=where) as refused:
        await client.insert({"n": 1}, kind="k", **options)
    assert "not finite" in str(refused.value)
    await _nothing_written(conn)
