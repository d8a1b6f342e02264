"""Reading the audit trail (written by ``storage.ops.audit``): newest first, one statement (so
one snapshot), at most ``MAX_LIMIT`` entries a call."""

from __future__ import annotations

from datetime import datetime

import asyncpg

from storage.db.pool import Conn
from storage.values.audit import AuditEntry
from storage.values.errors import InvalidFilter, SchemaNotMigrated

MAX_LIMIT = 1000

LIST = """
SELECT id, at, actor, action, job_ids, filter, count, queue, reason, output_size,
       output_sha256, original_args
  FROM audit_log
 WHERE ($1::timestamptz IS NULL OR at >= $1)
   AND ($2::text IS NULL OR actor = $2)
   AND ($3::text IS NULL OR action = $3)
   AND ($4::bigint IS NULL OR job_ids @> ARRAY[$4::bigint])
 ORDER BY id DESC
 LIMIT $5
"""
STATEMENTS = (LIST,)
NOT_THERE = "This schema has no audit trail yet: run `awa-tui migrate` (v009 adds it)."


async def list_audit(
    conn: Conn,
    *,
    since: datetime | None,
    actor: str | None,
    action: str | None,
    job_id: int | None,
    limit: int,
) -> list[AuditEntry]:
    """The entries that match every given filter, newest first."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidFilter(f"limit must be a whole number from 1 to {MAX_LIMIT}.")
    try:
        rows = await conn.fetch(LIST, since, actor, action, job_id, limit)
    except asyncpg.UndefinedTableError as exc:
        raise SchemaNotMigrated(NOT_THERE) from exc
    return [AuditEntry.from_stored(dict(row)) for row in rows]
