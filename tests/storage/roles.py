"""Login roles for "not privileged" paths: one that may create nothing on the test database,
one that may use a queue-storage schema but not make temporary objects."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from urllib.parse import quote, urlsplit, urlunsplit

from storage.db.pool import connect_once


@asynccontextmanager
async def unprivileged_dsn(dsn: str) -> AsyncIterator[tuple[str, str]]:
    """(DSN, password) of a fresh role that may connect but create nothing; dropped after."""
    role = f"awa_noperm_{os.getpid()}_{secrets.token_hex(3)}"
    password = secrets.token_hex(8)
    async with connect_once(dsn) as admin:
        # Identifiers cannot be parameters; role is built from digits and hex above.
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        database = await admin.fetchval("SELECT current_database()")
        await admin.execute(f'REVOKE CREATE ON DATABASE "{database}" FROM {role}')
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{quote(role)}:{quote(password)}@{host}"
    try:
        yield urlunsplit(parts._replace(netloc=netloc)), password
    finally:
        async with connect_once(dsn) as admin:
            await admin.execute(f"DROP ROLE {role}")


@asynccontextmanager
async def no_temp_dsn(dsn: str, schema: str) -> AsyncIterator[str]:
    """The DSN of a fresh role that may read and write ``schema`` (and the control schema) but
    not make temporary objects: TEMP is revoked from PUBLIC on the database meanwhile, which
    only roles like this one feel (superusers skip the check). Restored, and dropped, after."""
    role = f"awa_notemp_{os.getpid()}_{secrets.token_hex(3)}"
    password = secrets.token_hex(8)
    async with connect_once(dsn) as admin:
        database = await admin.fetchval("SELECT current_database()")
        # Identifiers cannot be parameters: role is digits and hex, schema a test schema name.
        await admin.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{password}'")
        for name in (schema, "awa"):
            await admin.execute(
                f"GRANT USAGE ON SCHEMA {name} TO {role};"
                f" GRANT ALL ON ALL TABLES IN SCHEMA {name} TO {role};"
                f" GRANT ALL ON ALL SEQUENCES IN SCHEMA {name} TO {role}"
            )
        await admin.execute(f'REVOKE TEMP ON DATABASE "{database}" FROM PUBLIC')
    parts = urlsplit(dsn)
    host = parts.netloc.rpartition("@")[2]
    try:
        yield urlunsplit(parts._replace(netloc=f"{quote(role)}:{quote(password)}@{host}"))
    finally:
        async with connect_once(dsn) as admin:
            await admin.execute(f'GRANT TEMP ON DATABASE "{database}" TO PUBLIC')
            await admin.execute(f"DROP OWNED BY {role}; DROP ROLE {role}")
