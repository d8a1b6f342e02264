"""``insert_many`` in chunks: order, lanes, notices, iterators, ids, and all-or-nothing; and
the two server-side changes beside it (the cached dataclass fields, the flush's generic plan)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest
from pydantic import BaseModel

from storage import (
    ArgsValidationError,
    AwaError,
    Client,
    InvalidOption,
    Job,
    JobState,
    UnknownKind,
)
from storage.db.pool import connect_once
from storage.finalize.compact_writes import complete_compact
from storage.finalize.types import CompactCompletion, Outcome
from storage.insert.copy import CHUNK
from storage.runtime.claim import claim_batch
from storage.values.codec import JsonConversionError, to_json_text
from tests.storage.observe import until_true

BIG = 2 * CHUNK + 500  # three chunks, the last one short


class Item(BaseModel):
    n: float


class Other(BaseModel):
    n: int


@pytest.fixture
def handlers(client: Client) -> None:
    @client.task(Item)
    async def item(job: Job[Item]) -> None:
        del job

    @client.task(Other, queue="other")
    async def other(job: Job[Other]) -> None:
        del job


async def _stored(conn: asyncpg.Connection, ids: list[int]) -> list[asyncpg.Record]:
    """The ready rows of ``ids``, in the order of ``ids``."""
    return list(
        await conn.fetch(
            "SELECT r.job_id, r.queue, r.lane_seq, (r.args->>'n')::float8 AS n"
            "  FROM unnest($1::bigint[]) WITH ORDINALITY AS i(job_id, ord)"
            "  JOIN ready_entries r USING (job_id) ORDER BY i.ord",
            ids,
        )
    )


@pytest.mark.usefixtures("handlers")
async def test_a_batch_over_several_chunks_keeps_its_order_in_one_lane_range(
    client: Client, conn: asyncpg.Connection
) -> None:
    await client.insert(Item(n=-1))  # the lane exists and has moved on
    ids = await client.insert_many([Item(n=i) for i in range(BIG)], returning="ids")

    rows = await _stored(conn, ids)
    assert [r["n"] for r in rows] == list(range(BIG))
    seqs = [r["lane_seq"] for r in rows]
    assert seqs == list(range(seqs[0], seqs[0] + BIG))
    assert seqs[0] == 1
    assert await conn.fetchval("SELECT next_seq FROM queue_lanes WHERE queue = 'default'") == (
        BIG + 1
    )


@pytest.mark.usefixtures("handlers")
async def test_rows_come_back_as_a_read_gives_them(client: Client) -> None:
    rows = await client.insert_many(
        (Item(n=i) for i in range(CHUNK + 3)), tags=["t"], metadata={"m": 1}, max_attempts=3
    )

    assert [r.args for r in rows] == [{"n": i} for i in range(CHUNK + 3)]
    for row in (rows[0], rows[-1]):
        read = await client.get_job(row.id)
        assert read is not None
        assert (read.state, read.queue, read.tags, read.metadata) == (
            JobState.AVAILABLE,
            "default",
            ["t"],
            {"m": 1},
        )
        assert (row.state, row.run_at, row.created_at) == (
            read.state,
            read.run_at,
            read.created_at,
        )
        assert (row.max_attempts, row.tags, row.metadata) == (3, ["t"], {"m": 1})


async def test_text_copy_keeps_every_character_of_names_args_and_payload(
    client: Client,
) -> None:
    """Ready rows go in by COPY's text format: backslashes, tabs, newlines and returns in a
    kind, a queue, args or the payload come back as they went in."""
    odd = "a\\b\tc\nd\re \\N ü"
    kind, queue = f"kind {odd}", f"queue {odd}"

    @client.task(kind=kind, queue=queue)
    async def handler(job: Job[dict[str, str]]) -> None:
        del job

    args = [{"text": odd, "n": str(i), odd: "\\u0041"} for i in range(3)]
    rows = await client.insert_many(args, kind=kind, tags=[odd], metadata={odd: odd})
    for row, given in zip(rows, args, strict=True):
        read = await client.get_job(row.id)
        assert read is not None
        assert (read.kind, read.queue, read.args) == (kind, queue, given)
        assert (read.tags, read.metadata) == ([odd], {odd: odd})
        assert (read.run_at, read.created_at) == (row.run_at, row.created_at)


@pytest.mark.usefixtures("handlers")
async def test_an_iterator_is_read_once_and_written_whole(
    client: Client, conn: asyncpg.Connection
) -> None:
    taken: list[int] = []

    def items() -> Iterator[Item]:
        for i in range(BIG):
            taken.append(i)
            yield Item(n=i)

    ids = await client.insert_many(items(), returning="ids")

    assert taken == list(range(BIG))
    assert [r["n"] for r in await _stored(conn, ids)] == list(range(BIG))


@pytest.mark.usefixtures("handlers")
@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (Item(n=float("nan")), ArgsValidationError, r"not finite .*\(job 4100 of the 4500 given"),
        ({"n": 1}, UnknownKind, r"needs kind=.*\(job 4100 of the 4500 given"),
    ],
)
async def test_bad_input_after_chunks_were_sent_writes_nothing(
    client: Client, conn: asyncpg.Connection, bad: object, error: type[Exception], message: str
) -> None:
    await client.insert(Item(n=-1))
    args: list[object] = [Item(n=i) for i in range(BIG)]
    args[2 * CHUNK + 100] = bad

    with pytest.raises(error, match=message):
        await client.insert_many(args, returning="ids")

    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 1
    assert await conn.fetchval("SELECT next_seq FROM queue_lanes") == 1


@pytest.mark.usefixtures("handlers")
async def test_an_unknown_kind_in_a_later_chunk_writes_nothing(
    client: Client, conn: asyncpg.Connection
) -> None:
    class Stranger(BaseModel):
        n: int

    args: list[object] = [Item(n=i) for i in range(CHUNK + 10)] + [Stranger(n=1)]

    with pytest.raises(UnknownKind, match="'stranger'; nothing was inserted"):
        await client.insert_many(args, queue="default")

    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0


@pytest.mark.usefixtures("handlers")
async def test_a_batch_over_two_lanes_returns_results_in_the_order_given(
    client: Client, conn: asyncpg.Connection
) -> None:
    args: list[Item | Other] = [Other(n=i) if i % 3 == 0 else Item(n=i) for i in range(BIG)]

    rows = await client.insert_many(args)

    assert [r.queue for r in rows] == ["other" if i % 3 == 0 else "default" for i in range(BIG)]
    stored = await _stored(conn, [r.id for r in rows])
    assert [r["n"] for r in stored] == list(range(BIG))
    for queue in ("default", "other"):
        seqs = [r["lane_seq"] for r in stored if r["queue"] == queue]
        assert seqs == list(range(len(seqs)))


@pytest.mark.usefixtures("handlers")
async def test_scheduled_jobs_go_to_the_deferred_table_in_order(
    client: Client, conn: asyncpg.Connection
) -> None:
    later = datetime.now(UTC) + timedelta(hours=1)

    rows = await client.insert_many([Item(n=i) for i in range(CHUNK + 7)], run_at=later)

    assert {(r.state, r.run_at) for r in rows} == {(JobState.SCHEDULED, later)}
    stored = await conn.fetch(
        "SELECT (args->>'n')::float8 AS n FROM deferred_jobs WHERE job_id = ANY($1::bigint[])"
        " ORDER BY job_id",
        [r.id for r in rows],
    )
    assert [r["n"] for r in stored] == list(range(CHUNK + 7))
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 0


@pytest.mark.usefixtures("handlers")
async def test_unique_keys_in_a_big_batch_return_their_holders_ids(
    client: Client, conn: asyncpg.Connection
) -> None:
    key: Callable[[Item], str] = lambda item: f"k{int(item.n) % 1000}"  # noqa: E731

    ids = await client.insert_many([Item(n=i) for i in range(BIG)], unique_key=key, returning="ids")

    assert len(set(ids)) == 1000
    assert ids[1000:2000] == ids[:1000]
    assert await conn.fetchval("SELECT count(*) FROM ready_entries") == 1000
    assert await conn.fetchval("SELECT count(*) FROM unique_keys WHERE holding") == 1000


async def test_a_chunked_insert_wakes_its_queue_once(
    client: Client, migrated_dsn: str, schema: str
) -> None:
    heard: list[str] = []

    @client.task(kind="a")
    async def a(job: Job[dict[str, int]]) -> None:
        del job

    async with connect_once(migrated_dsn) as listener:
        await listener.add_listener(
            f"awa_ready_{schema}", lambda _c, _pid, _ch, payload: heard.append(str(payload))
        )
        await client.insert_many(
            [{"n": i} for i in range(BIG)], kind="a", queue="alpha", returning="ids"
        )
        await until_true(lambda: bool(heard))
        await listener.fetchval("SELECT 1")  # anything else sent by now has been read
    assert heard == ["alpha"]


async def test_returning_must_be_rows_or_ids(client: Client) -> None:
    with pytest.raises(InvalidOption, match='returning must be "rows" or "ids"'):
        await client.insert_many([{"n": 1}], kind="a", returning="count")  # type: ignore[call-overload]


async def test_bad_options_are_refused_before_any_job_is_read(client: Client) -> None:
    read: list[int] = []

    def items() -> Iterator[dict[str, int]]:
        read.append(1)
        yield {"n": 1}

    with pytest.raises(AwaError, match="Priority must be between 1"):
        await client.insert_many(items(), kind="a", priority=9)
    assert read == []


@dataclass
class Point:
    x: float
    label: str


def test_a_dataclass_converts_the_same_once_its_fields_are_cached() -> None:
    first = to_json_text(Point(1.5, "a"))
    assert to_json_text(Point(1.5, "a")) == first == b'{"x":1.5,"label":"a"}'
    with pytest.raises(JsonConversionError, match=r"\$\.x .*not finite"):
        to_json_text(Point(float("inf"), "b"))


@pytest.mark.usefixtures("handlers")
async def test_a_compact_flush_plans_generically_inside_its_transaction_only(
    client: Client,
) -> None:
    job = await client.insert(Item(n=1))
    async with client.pool.acquire() as c:
        (claimed,) = await claim_batch(c, ["default"], 1, 60)
        item = CompactCompletion(
            claimed.job_id, claimed.run_lease, claimed.claim_id, claimed.lane_seq, None, False
        )
        before = await c.fetchval("SHOW plan_cache_mode")
        outcome = await complete_compact(c, [item], outputs_supported=True)
        assert await c.fetchval("SHOW plan_cache_mode") == before == "auto"
        plans = await c.fetchrow(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE $1",  # a parameter: this statement's text must not match
            "%INSERT INTO receipt_completion_batches%",
        )
    assert plans is not None
    assert (plans["generic_plans"], plans["custom_plans"]) == (1, 0)
    assert outcome == [Outcome.WRITTEN]
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
