"""The migration runner: the whole pending range in one transaction, under an advisory lock.

Concurrent runners serialize on the lock; a timeout or deadlock rolls every pending migration
back, so the range can simply be run again.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from importlib.resources import files

from storage.db import schema_check
from storage.db.pool import Conn, connect_once, translate_errors
from storage.db.sql import LOCK_MIGRATIONS
from storage.values.errors import SchemaNotMigrated
from storage.values.names import check_schema_name

_FILE = re.compile(r"^v(\d{3})_([a-z0-9_]+)\.sql$")

_CREATE_LEDGER = """
CREATE SCHEMA IF NOT EXISTS awa;
CREATE TABLE IF NOT EXISTS awa.schema_migrations (
    version int PRIMARY KEY,
    name text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
_APPLIED = "SELECT version FROM awa.schema_migrations"
_RECORD = "INSERT INTO awa.schema_migrations (version, name) VALUES ($1, $2)"
_LEDGER_EXISTS = "SELECT to_regclass('awa.schema_migrations') IS NOT NULL"
_INSTALL = "SELECT awa.install_queue_storage($1)"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def available_migrations() -> list[Migration]:
    """Every migration shipped in the ``migrations`` package, in version order."""
    found = []
    for entry in files("migrations").iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    return sorted(found, key=lambda m: m.version)


LATEST_VERSION = available_migrations()[-1].version
SHIPPED = {m.version: m.name for m in available_migrations()}
"""This release's migrations, version -> name: what ``check_schema`` expects the ledger to hold."""


async def check_schema(conn: Conn, schema: str) -> None:
    """Refuse a database awa-tui did not migrate, or one at a version this release does not
    read, or without ``schema`` installed (``storage.db.schema_check``)."""
    await schema_check.check_schema(conn, schema, SHIPPED)


async def applied_versions(conn: Conn) -> set[int]:
    if not await conn.fetchval(_LEDGER_EXISTS):
        return set()
    return {row["version"] for row in await conn.fetch(_APPLIED)}


async def migrate_connection(conn: Conn, *, target: int | None = None) -> list[int]:
    """Apply pending migrations up to ``target`` (default: all) on one connection.

    A database another tool made (Awa's own schema, or other tables in ``awa`` and no ledger)
    raises ``ForeignSchema`` and nothing is written (``storage.db.schema_check``)."""
    applied: list[int] = []
    async with conn.transaction():
        await conn.execute(LOCK_MIGRATIONS)
        with contextlib.suppress(SchemaNotMigrated):  # an empty database: what migrate is for
            await schema_check.refuse_foreign(conn, "awa", SHIPPED)
        await conn.execute(_CREATE_LEDGER)
        done = await applied_versions(conn)
        for migration in available_migrations():
            if migration.version in done or (target is not None and migration.version > target):
                continue
            await conn.execute(migration.sql)
            await conn.execute(_RECORD, migration.version, migration.name)
            applied.append(migration.version)
    return applied


async def migrate(dsn: str | None, *, target: int | None = None) -> list[int]:
    """Bring the database at ``dsn`` up to date. Returns the versions applied now.

    Every failure is an ``AwaError``: ``ConnectionFailed``, ``PermissionDenied`` (the role may
    not create the control schema or its objects), ``OperationTimeout`` (a lock wait),
    ``ForeignSchema`` (another tool made this database: it is left as it is), or
    ``DatabaseError``; nothing is applied then, and the run can simply be repeated.
    """
    async with connect_once(dsn) as conn:
        with translate_errors(dsn, "migrate"):
            return await migrate_connection(conn, target=target)


async def install_schema(conn: Conn, schema: str) -> None:
    """Create a queue-storage schema with the installer of the current migration level."""
    check_schema_name(schema)
    await conn.execute(_INSTALL, schema)
