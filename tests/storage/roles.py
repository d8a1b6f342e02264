"""A login role without CREATE on the test database, for "not privileged" paths."""

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
