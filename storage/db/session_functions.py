"""Functions a session makes for itself (in ``pg_temp``), so a transaction of several statements
is one round trip: the claim (``storage.runtime.claim``) and the handlers' completion flush
(``storage.finalize.compact_writes``).

A transaction of statements sent one by one stays open while the client's one thread is away
between them (running handlers, another transaction): the server waits, *idle in
transaction*, about a third of a backend through the run phase (benchmarks/README.md). A
PL/pgSQL function runs the same statements in one call and, being volatile, gives each its own
snapshot, as separate statements have.

Each function is made the first time a connection needs it, outside any transaction, and lives
as long as that session (the pool's reset keeps temporary objects). Nothing goes into the
queue-storage schema, so no migration and no schema version is involved. A role that may not
make temporary objects (``TEMP`` revoked from it and from PUBLIC), or a read-only session,
gets ``False`` and runs the statements one by one, as before; that is said once per process.
"""

from __future__ import annotations

import logging
import weakref

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from storage.db.pool import Conn, connection_of

log = logging.getLogger("storage")

_made: weakref.WeakKeyDictionary[asyncpg.Connection[asyncpg.Record], dict[str, bool]] = (
    weakref.WeakKeyDictionary()
)
_refusal_told = False


async def ready(conn: Conn, name: str, create: str) -> bool:
    """Whether the session's function ``name`` can be called, made with ``create`` (a
    ``CREATE OR REPLACE FUNCTION pg_temp.<name>``) on the connection's first call; False where
    the session may not make it, or inside a transaction (where a rollback would take it)."""
    if conn.is_in_transaction():
        return False
    raw = connection_of(conn) if isinstance(conn, PoolConnectionProxy) else conn
    if raw is None:  # given back already: the call that follows raises as it would have
        return False
    made = _made.get(raw)
    if made is None:
        made = _made[raw] = {}
    if name not in made:
        try:
            await conn.execute(create)
        except (asyncpg.InsufficientPrivilegeError, asyncpg.ReadOnlySQLTransactionError) as e:
            _tell_refusal(type(e).__name__)
            made[name] = False
        else:
            made[name] = True
    return made[name]


def _tell_refusal(why: str) -> None:
    global _refusal_told
    if not _refusal_told:
        _refusal_told = True
        log.info(
            "this session may not make temporary functions (%s): claims and completion "
            "flushes run as separate statements, a round trip each",
            why,
        )
