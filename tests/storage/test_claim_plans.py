"""The claim's two statements run generic plans, set for the claim's transaction only (the
server planned LOCK_LANE afresh on every claim before)."""

from __future__ import annotations

import asyncpg
import pytest
from pydantic import BaseModel

from storage import Client, Job
from storage.claim import CLAIM_BATCH, LOCK_LANE, claim_batch

CLAIMS = 8  # more than the five custom plans plan_cache_mode=auto tries before a generic one


class Item(BaseModel):
    n: int


@pytest.fixture(autouse=True)
def handlers(client: Client) -> None:
    @client.task(Item)
    async def item(job: Job[Item]) -> None:
        del job


async def test_every_claim_runs_generic_plans_inside_its_transaction_only(
    client: Client,
) -> None:
    await client.insert_many([Item(n=i) for i in range(2 * CLAIMS)])
    async with client.pool.acquire() as c:
        claimed = [job for _ in range(CLAIMS) for job in await claim_batch(c, ["default"], 2, 60)]
        assert await c.fetchval("SHOW plan_cache_mode") == "auto"
        assert not c.is_in_transaction()
        plans = {
            row["statement"]: (row["generic_plans"], row["custom_plans"])
            for row in await c.fetch(
                "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            )
        }
    assert plans[LOCK_LANE] == (CLAIMS, 0)
    assert plans[CLAIM_BATCH] == (CLAIMS, 0)
    assert [job.args for job in claimed] == [{"n": i} for i in range(2 * CLAIMS)]


async def test_a_claim_that_fails_rolls_back_and_leaves_the_connection_usable(
    client: Client,
) -> None:
    await client.insert_many([Item(n=1)])
    async with client.pool.acquire() as c:
        with pytest.raises(asyncpg.DatetimeFieldOverflowError):  # the batch's deadline_at
            await claim_batch(c, ["default"], 1, float("inf"))
        assert not c.is_in_transaction()
        assert await c.fetchval("SHOW plan_cache_mode") == "auto"
        (job,) = await claim_batch(c, ["default"], 1, 60)  # nothing was claimed
    assert job.args == {"n": 1}
