"""The runtime registry (``runtimes``, migration v010): who claimed a batch.

A runtime registers once per start, in one statement, before its first claim (``register``);
its claims write the id it got into ``claim_batches.runtime_id`` with the rest of the batch
row (``storage.runtime.claim``), so the registry costs one row per start and a few bytes per
claim batch, never a write per job. A client that is not a runtime (the console, the HTTP
server) registers nothing. On a schema v010 has not reached there is no registry: the runtime
gets no id and claims as before (``None``).

Maintenance deletes the rows no claim batch references any more once they are older than its
retention (``prune``), at most once per claim-ring rotation interval: the check reads every
claim batch, and references only go when a claim slot is pruned.
"""

from __future__ import annotations

import os
import socket
from datetime import timedelta
from importlib import metadata

import asyncpg

from storage.db.pool import Conn

REGISTER = "INSERT INTO runtimes (host, pid, name, version) VALUES ($1, $2, $3, $4) RETURNING id"

# Due when the last prune is older than $2 (its time kept in maintenance_state); the uncorrelated
# EXISTS is a one-time filter, so a pass that is not due reads no claim batch.
PRUNE = """
WITH due AS (
    UPDATE maintenance_state SET runtimes_pruned_at = now()
     WHERE runtimes_pruned_at IS NULL OR runtimes_pruned_at < now() - $2::interval
    RETURNING 1
)
DELETE FROM runtimes r
 WHERE EXISTS (SELECT 1 FROM due)
   AND r.started_at < now() - $1::interval
   AND NOT EXISTS (SELECT 1 FROM claim_batches cb WHERE cb.runtime_id = r.id)
"""


def _version() -> str | None:
    try:
        return metadata.version("awa-tui")
    except metadata.PackageNotFoundError:
        return None


VERSION = _version()


async def register(conn: Conn, name: str | None) -> int | None:
    """Record this process as a runtime of the schema; its id, or None on a schema without the
    registry (v010 not reached: the runtime then claims without an id)."""
    try:
        runtime_id: int = await conn.fetchval(
            REGISTER, socket.gethostname(), os.getpid(), name, VERSION
        )
    except asyncpg.UndefinedTableError:
        return None
    return runtime_id


async def prune(conn: Conn, retention: timedelta, every: timedelta) -> int:
    """Delete the registry rows older than ``retention`` that no claim batch references, when
    the last prune is more than ``every`` ago; how many went. Only on a schema with the registry."""
    status: str = await conn.execute(PRUNE, retention, every)
    return int(status.rsplit(" ", 1)[-1])
