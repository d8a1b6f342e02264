"""Is this database ours, at a version this release reads? The one check, run by
``Client.connect`` before anything else and (its first half) by ``migrate``.

awa-tui reads only databases its own migrator made: the ledger ``awa.schema_migrations`` must
hold this release's migrations (by version and name) from v001 on, none newer, and the
queue-storage schema must be installed (registered in ``awa.queue_storage_registry``, with its
``ready_entries``). Anything else is refused with one line that says what was found:

- no ledger and nothing in ``awa``: ``SchemaNotMigrated`` ("not migrated");
- no ledger and Awa's ``awa.schema_version``: ``ForeignSchema("awa")``. Awa keeps tables of
  the same names (``awa.ready_entries``, ``awa.job_kind_descriptors``...) with other meanings,
  so reading them would show an incident as "no failed jobs";
- no ledger and other tables in ``awa``: ``ForeignSchema("other")``;
- a ledger with a version above this release's: ``ForeignSchema("newer")``;
- a ledger naming migrations this release does not ship: ``ForeignSchema("unknown")``;
- a ledger without v001 or with a gap, or a queue-storage schema that is not installed:
  ``SchemaNotMigrated``.

A ledger below this release's last version is accepted: a runtime may run ahead of its
migration (the output columns, the pause: each feature probes for itself).

The first look is at the catalogs (``pg_class``), which any role may read, so a role without
``USAGE`` on ``awa`` is told what the database is rather than only "permission denied".
"""

from __future__ import annotations

import asyncpg

from storage.db.pool import Conn
from storage.values.errors import ForeignSchema, SchemaNotMigrated

# What is there, from the catalogs only: no privilege on ``awa`` or the schema is needed.
LOOK = """
SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'awa' AND c.relname = 'schema_migrations') AS ledger,
       EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'awa' AND c.relname = 'schema_version') AS awa_version,
       (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = 'awa' AND c.relkind IN ('r', 'p', 'v', 'm', 'f')) AS awa_tables,
       EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND c.relname = 'ready_entries') AS ready_entries
"""
AWA_VERSION = "SELECT max(version) FROM awa.schema_version"
LEDGER = "SELECT version, name FROM awa.schema_migrations ORDER BY version"
INSTALLED = "SELECT EXISTS (SELECT 1 FROM awa.queue_storage_registry WHERE schema_name = $1)"

NOT_OURS = "awa-tui reads only databases it migrated"


def _latest(shipped: dict[int, str]) -> str:
    return f"v{max(shipped):03d}"


async def refuse_foreign(conn: Conn, schema: str, shipped: dict[int, str]) -> asyncpg.Record:
    """Raise ``ForeignSchema`` when the control schema ``awa`` was not made by awa-tui, or
    ``SchemaNotMigrated`` when there is nothing at all; returns the catalog look otherwise
    (a ledger is there). ``migrate`` runs this part only: a database awa-tui did not make is
    never migrated over."""
    look = await conn.fetchrow(LOOK, schema)
    assert look is not None
    if look["ledger"]:
        return look
    if look["awa_version"]:
        version = await _awa_version(conn)
        shown = f"schema version {version}" if version is not None else "schema version unknown"
        raise ForeignSchema(
            "awa",
            f"this database was made by Awa ({shown}), not by awa-tui; {NOT_OURS}",
            version=version,
        )
    if look["awa_tables"]:
        raise ForeignSchema(
            "other",
            f"this database has a schema awa with {look['awa_tables']} tables but no awa-tui "
            f"migration ledger (awa.schema_migrations), so awa-tui did not make it; {NOT_OURS}",
        )
    raise SchemaNotMigrated(
        "this database is not migrated: it has no awa-tui migration ledger "
        f"(awa.schema_migrations); run `awa-tui migrate --dsn ...` (migrations up to "
        f"{_latest(shipped)})."
    )


async def check_schema(conn: Conn, schema: str, shipped: dict[int, str]) -> None:
    """Refuse anything but an awa-tui database at a version this release reads (``shipped``:
    this release's migrations, version -> name), with ``schema`` installed."""
    look = await refuse_foreign(conn, schema, shipped)
    ledger = {row["version"]: row["name"] for row in await conn.fetch(LEDGER)}
    latest = max(shipped)
    if ledger and max(ledger) > latest:
        raise ForeignSchema(
            "newer",
            f"this database was migrated by a newer awa-tui (schema v{max(ledger):03d}); this "
            f"awa-tui reads migrations up to v{latest:03d}: upgrade awa-tui to read it",
            version=max(ledger),
        )
    for version, name in ledger.items():
        if shipped.get(version) != name:
            raise ForeignSchema(
                "unknown",
                f"the migration ledger awa.schema_migrations records v{version:03d} {name!r}, "
                f"which this awa-tui does not ship (its v{version:03d} is "
                f"{shipped.get(version)!r}); {NOT_OURS}",
                version=version,
            )
    # From v001 up without a gap, as the migrator applies them (empty: nothing applied yet).
    gaps = sorted(set(range(1, max(ledger) + 1)) - ledger.keys()) if ledger else [1]
    if gaps:
        raise SchemaNotMigrated(
            f"this database is not fully migrated (v{gaps[0]:03d} is missing from "
            f"awa.schema_migrations); run `awa-tui migrate --dsn ...` (migrations up to "
            f"v{latest:03d})."
        )
    if not look["ready_entries"] or not await conn.fetchval(INSTALLED, schema):
        how = (
            "run `awa-tui migrate`"
            if schema == "awa"
            else f"install it with SELECT awa.install_queue_storage('{schema}') after "
            "`awa-tui migrate`"
        )
        raise SchemaNotMigrated(
            f"Schema {schema!r} has no queue storage; {how} (migrations up to v{latest:03d})."
        )


async def _awa_version(conn: Conn) -> int | None:
    """Awa's own schema version, or None when this role may not read it (in a savepoint, so a
    refusal leaves a caller's transaction usable)."""
    try:
        async with conn.transaction():
            value = await conn.fetchval(AWA_VERSION)
    except asyncpg.PostgresError:
        return None
    return int(value) if value is not None else None
