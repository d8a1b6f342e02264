"""``benchmarks._engine.CLAIM_STATEMENTS``: the benchmarks that count claims (``idle_fleet``,
``wakeup``) or a claim's lane waits (``processes``) know a claim by its first statement. Since
the claim became one call of a session function they matched only the statement path's
``LOCK_LANE`` and read zero claims; a claim must count once on either path."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from pydantic import BaseModel

from benchmarks._engine import CLAIM_STATEMENTS
from storage import Client, Job
from storage.runtime import claim
from tests.storage.roles import no_temp_dsn


class Item(BaseModel):
    n: int


@asynccontextmanager
async def as_is(dsn: str, _schema: str) -> AsyncIterator[str]:
    yield dsn


@pytest.mark.parametrize("role", [as_is, no_temp_dsn], ids=["function", "statements"])
async def test_one_claim_is_one_claim_statement(migrated_dsn: str, schema: str, role: Any) -> None:
    sent: list[str] = []
    async with role(migrated_dsn, schema) as dsn, await Client.connect(dsn, schema) as c:

        @c.task(Item)
        async def item(job: Job[Item]) -> None:
            return None

        await c.insert_many([Item(n=i) for i in range(3)])
        async with c.pool.acquire() as conn:
            conn.add_query_logger(lambda record: sent.append(record.query))
            jobs = await claim.claim_batch(conn, ["default"], 10, 60.0)
            await conn.fetchval("SELECT 1")  # loggers are told soon after: this lets it arrive
    assert len(jobs) == 3
    assert sum(query in CLAIM_STATEMENTS for query in sent) == 1
