"""The queue-storage schemas installed in this database, each with its tab counts.

A console pointed at several schemas (``--schema a,b`` or ``*``) lists them in its picker.
The names come from the control schema's registry (``awa.queue_storage_registry``, which
``install_queue_storage`` fills and v008 keeps true to what exists); each schema's counts are
the browser's own (``storage.read.counting``), read with the search path set to that schema
for its snapshot, so no count is a second spelling of the browser's.
"""

from __future__ import annotations

from storage.db.pool import Conn
from storage.read import counting
from storage.values.models import SchemaSummary

INSTALLED = "SELECT schema_name FROM awa.queue_storage_registry ORDER BY schema_name"
# Local to the caller's transaction: the connection's own search path comes back after it.
LOOK_IN = "SELECT set_config('search_path', quote_ident($1) || ', public', true)"


async def installed(conn: Conn) -> list[str]:
    """Every installed queue-storage schema, by name."""
    return [row["schema_name"] for row in await conn.fetch(INSTALLED)]


async def summaries(conn: Conn, names: list[str], *, cap: int) -> list[SchemaSummary]:
    """``names`` with their counts; call inside a transaction (the search path is set
    locally to it)."""
    found: list[SchemaSummary] = []
    for name in names:
        await conn.execute(LOOK_IN, name)
        found.append(SchemaSummary(name=name, counts=await counting.counts(conn, cap=cap)))
    return found
