"""What the cases that drive the real engine share: a fresh queue-storage schema per run,
batched inserts, a read-back of what a run stored, and ADR-048's output shapes."""

from __future__ import annotations

import contextlib
import itertools
import random
import sys
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from benchmarks._harness import (
    Connection,
    embedded_or_dsn,
    ensure_max_connections,
    ident,
    machine_info,
)
from storage import MAX_OUTPUT_BYTES, Client, Job, migrate
from storage.runtime.claim import CLAIM_FUNCTIONS, LOCK_LANE

INSERT_BATCH = 2_000
"""Jobs per ``insert_many`` call (one transaction each)."""
_schema_ids = itertools.count(1)
CLAIM_STATEMENTS = (LOCK_LANE, *(call for _, _, call in CLAIM_FUNCTIONS.values()))
"""The statement a claim begins with, whichever way it runs: the session function's call (the
default) or, where the session may not make one, ``LOCK_LANE``. A query log sees it once per
claim, and pg_stat_activity shows it while the claim waits for its lane."""


def log(message: str) -> None:
    """Progress goes to stderr so stdout holds only the tables."""
    print(message, file=sys.stderr, flush=True)


@dataclass(slots=True)
class Noop:
    """The benchmark job's args, ``{"i": n}``: n picks the job's output from a pool."""

    i: int


def _small(rng: random.Random) -> Any:
    """A 100 B summary object: fixed keys, random values, a random hex cursor."""
    value = {
        "updated": rng.randrange(10_000),
        "skipped": rng.randrange(100),
        "warehouse": f"eu-west-{rng.randrange(1, 4)}",
        "took_ms": rng.randrange(1, 5_000),
        "cursor": "",
    }
    value["cursor"] = "".join(rng.choices("0123456789abcdef", k=100 - len(orjson.dumps(value))))
    return value


def _numeric(rng: random.Random) -> Any:
    """2,047 one-digit integers (4,095 B): jsonb's worst expansion."""
    return rng.choices(range(10), k=2_047)


def _many_keys(rng: random.Random) -> Any:
    """As many short keys (~310) with integer values as fit in 4 KiB."""
    value: dict[str, int] = {}
    for i in itertools.count():
        value[f"m{i:03d}"] = rng.randrange(100_000)
        if len(orjson.dumps(value)) > MAX_OUTPUT_BYTES:
            del value[f"m{i:03d}"]
            return value
    raise AssertionError("unreachable")


@dataclass(frozen=True, slots=True)
class Shape:
    key: str
    description: str
    build: Callable[[random.Random], Any]


SMALL = Shape("small100", "100 B object: 4 short fields and a random hex cursor", _small)
NUMERIC = Shape("num4k", "4,095 B array of 2,047 random one-digit integers", _numeric)
MANY_KEYS = Shape("obj4k", "~4 KiB object, ~310 keys with random integers", _many_keys)


def output_values(shape: Shape, size: int, seed: int) -> list[Any]:
    """``size`` distinct outputs of ``shape`` (what a handler records)."""
    rng = random.Random(f"{seed}:{shape.key}")
    values = [shape.build(rng) for _ in range(size)]
    if any(len(orjson.dumps(v)) > MAX_OUTPUT_BYTES for v in values[:4]):
        raise AssertionError(f"{shape.key} output over the 4 KiB cap")
    return values


@contextlib.asynccontextmanager
async def session(
    dsn: str | None, max_connections: int = 0
) -> AsyncIterator[tuple[str, Connection, dict[str, object]]]:
    """The server (embedded unless ``dsn``; allowing at least ``max_connections``) with the
    migrations applied, a connection to it, and the machine info every report carries."""
    async with embedded_or_dsn(dsn, log=log) as url:
        if max_connections:
            await ensure_max_connections(url, max_connections, log)
        await migrate(url)
        conn: Connection = await asyncpg.connect(url)
        try:
            yield url, conn, await machine_info(conn)
        finally:
            await conn.close()


async def new_queue_schema(conn: Connection, prefix: str) -> str:
    """Install a fresh queue-storage schema ``<prefix>_<n>`` and return its name."""
    name = f"{prefix}_{next(_schema_ids)}"
    while await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", name):
        name = f"{prefix}_{next(_schema_ids)}"
    await conn.execute("SELECT awa.install_queue_storage($1)", name)
    return name


async def drop_queue_schema(conn: Connection, schema: str) -> None:
    """Drop a queue-storage schema and its registry row."""
    await conn.execute(f"DROP SCHEMA IF EXISTS {ident(schema)} CASCADE")
    await conn.execute("DELETE FROM awa.queue_storage_registry WHERE schema_name = $1", schema)


@contextlib.asynccontextmanager
async def queue_schema(
    conn: Connection, dsn: str, prefix: str
) -> AsyncIterator[tuple[str, Client]]:
    """A fresh queue-storage schema and a client on it; both gone afterwards."""
    schema = await new_queue_schema(conn, prefix)
    try:
        async with await Client.connect(dsn, schema) as client:
            yield schema, client
    finally:
        await drop_queue_schema(conn, schema)


async def insert_all(client: Client, args: Sequence[Any], **options: Any) -> list[int]:
    """Insert ``args`` in ``INSERT_BATCH``-sized ``insert_many`` calls; return the ids."""
    ids: list[int] = []
    for start in range(0, len(args), INSERT_BATCH):
        batch = args[start : start + INSERT_BATCH]
        ids.extend(await client.insert_many(batch, returning="ids", **options))
    return ids


def register_handler(client: Client, outputs: Sequence[Any] | None) -> None:
    """A no-op handler, or one recording output ``i`` mod the pool's size: ``lifecycle``
    and ``instructions`` measure this same handler."""
    if outputs is None:

        @client.task(Noop)
        async def noop(job: Job[Noop]) -> None:
            return None

    else:

        @client.task(Noop)
        async def with_output(job: Job[Noop]) -> None:
            job.set_output(outputs[job.args.i % len(outputs)])


@dataclass(frozen=True, slots=True)
class CompletionTotals:
    """What a run left in its schema's terminal tables."""

    compact_jobs: int
    compact_outputs: int
    done_completed: int
    done_failed: int
    done_outputs: int
    deferred: int

    @property
    def completed(self) -> int:
        return self.compact_jobs + self.done_completed


async def completion_totals(conn: Connection, schema: str) -> CompletionTotals:
    """Count what ``schema`` stores (compact batches, done rows, deferred jobs, outputs)."""
    s = ident(schema)
    row = await conn.fetchrow(
        f"""SELECT
          (SELECT coalesce(sum(completed_count), 0) FROM {s}.receipt_completion_batches),
          (SELECT count(*) FROM {s}.receipt_completion_batches b, unnest(b.outputs) o
            WHERE o IS NOT NULL),
          (SELECT count(*) FROM {s}.done_entries WHERE state = 'completed'),
          (SELECT count(*) FROM {s}.done_entries WHERE state = 'failed'),
          (SELECT count(*) FROM {s}.done_entries WHERE output IS NOT NULL),
          (SELECT count(*) FROM {s}.deferred_jobs)"""
    )
    assert row is not None
    return CompletionTotals(*(int(v) for v in row.values()))
