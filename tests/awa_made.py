"""A database made by the real Awa (the ``awa-pg`` package, 0.6.9): its own ``awa.migrate``,
one job inserted with its own client and failed by its own worker. awa-tui must refuse it.

It is a database of its own on the test server (``CREATE DATABASE``, ``fresh_database``),
dropped afterwards, so nothing of awa-tui's is in it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import BaseModel

from tests.storage.migration_db import fresh_database

AWA_VERSION = "0.6.9"
AWA_SCHEMA_VERSION = 40  # awa-pg 0.6.9's awa.current_migration_version()


class Sync(BaseModel):
    warehouse: str


def for_awa(dsn: str) -> str:
    """``dsn`` as Awa's driver (sqlx) takes it: a socket directory in ``?host=`` still needs a
    host in the authority (sqlx refuses an empty one), which the query then overrides."""
    parts = urlsplit(dsn)
    userinfo, _, hostport = parts.netloc.rpartition("@")
    if hostport or "host" not in dict(parse_qsl(parts.query)):
        return dsn
    netloc = f"{userinfo}@localhost" if userinfo else "localhost"
    return urlunsplit(parts._replace(netloc=netloc))


async def fail_one_job(awa_dsn: str) -> int:
    """Insert one job with Awa's client and let Awa's worker fail it for good; its id."""
    import awa

    client = awa.AsyncClient(awa_dsn)
    try:

        @client.task(Sync, kind="sync_inventory")
        async def sync(job: awa.Job[Sync]) -> None:
            raise awa.TerminalError(f"warehouse {job.args.warehouse} refused the sync")

        job = await client.insert(Sync(warehouse="eu-3"), kind="sync_inventory", max_attempts=1)
        await client.start([("default", 1)], poll_interval_ms=50)
        try:
            deadline = time.monotonic() + 60
            while (await client.get_job(job.id)).state != awa.JobState.Failed:
                assert time.monotonic() < deadline, "Awa's worker did not fail the job"
                await asyncio.sleep(0.05)
        finally:
            await client.shutdown()
    finally:
        await client.close()
    return job.id


@asynccontextmanager
async def awa_made_database(pg_dsn: str) -> AsyncIterator[str]:
    """A fresh database Awa migrated, holding one job its worker failed; its DSN (ours)."""
    import awa

    async with fresh_database(pg_dsn, "awa_made") as dsn:
        await awa.migrate(for_awa(dsn))
        await fail_one_job(for_awa(dsn))
        yield dsn
