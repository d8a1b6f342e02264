"""Reading the audit trail (written by ``storage.ops.audit``): newest first, one statement (so
one snapshot), at most ``MAX_LIMIT`` entries a call; and one job's entries read inside the
snapshot that reads the job (``job_actions``, for ``Client.explain_job``)."""

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
HAS_TRAIL = "SELECT to_regclass('audit_log') IS NOT NULL"
STATEMENTS = (LIST, HAS_TRAIL)
NOT_THERE = "This schema has no audit trail yet: run `awa-tui migrate` (v009 adds it)."


def _checked_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidFilter(f"limit must be a whole number from 1 to {MAX_LIMIT}.")


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
    _checked_limit(limit)
    try:
        rows = await conn.fetch(LIST, since, actor, action, job_id, limit)
    except asyncpg.UndefinedTableError as exc:
        raise SchemaNotMigrated(NOT_THERE) from exc
    return [AuditEntry.from_stored(dict(row)) for row in rows]


async def job_actions(conn: Conn, job_id: int, limit: int) -> tuple[AuditEntry, ...] | None:
    """The newest ``limit`` entries that acted on ``job_id``; None when the schema has no
    audit trail. Call it inside the ``snapshot`` that read the job: the trail is looked for
    first, so a schema without it leaves that transaction usable (a failed statement would
    abort it)."""
    _checked_limit(limit)
    if not await conn.fetchval(HAS_TRAIL):
        return None
    rows = await conn.fetch(LIST, None, None, None, job_id, limit)
    return tuple(AuditEntry.from_stored(dict(row)) for row in rows)
