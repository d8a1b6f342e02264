"""For migration tests: a fresh database, one at an older migration (as a deployment is before
an upgrade), and the locks a re-run of a migration's tail took (it must take none)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from storage.db.migrator import migrate
from storage.db.pool import connect_once

LOCKS_ON_SCHEMA = """
SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
  JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = $1 AND l.pid = pg_backend_pid()
"""


@asynccontextmanager
async def fresh_database(pg_dsn: str, prefix: str) -> AsyncIterator[str]:
    """A new empty database on the test server (``prefix`` and this process's id); its DSN,
    and the database dropped afterwards."""
    name = f"{prefix}_{os.getpid()}"
    async with connect_once(pg_dsn) as admin:
        await admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        await admin.execute(f"CREATE DATABASE {name}")
    try:
        yield urlunsplit(urlsplit(pg_dsn)._replace(path=f"/{name}"))
    finally:
        async with connect_once(pg_dsn) as admin:
            await admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@asynccontextmanager
async def database_at(pg_dsn: str, prefix: str, version: int) -> AsyncIterator[str]:
    """A fresh database migrated only to ``version`` (``fresh_database``)."""
    async with fresh_database(pg_dsn, prefix) as dsn:
        await migrate(dsn, target=version)
        yield dsn


async def locks_on_schema(conn: asyncpg.Connection, schema: str) -> int:
    """Relation locks this session holds in ``schema`` (inside the caller's transaction)."""
    return int(await conn.fetchval(LOCKS_ON_SCHEMA, schema))


HAS_INDEX = "SELECT to_regclass(quote_ident(current_schema()) || '.' || $1) IS NOT NULL"
"""Whether the index named ``$1`` exists in the connection's current schema."""
