"""The one writer of the audit trail (``audit_log``, migration v009).

Every operator write takes a ``Recorder`` and calls ``Recorder.job`` or ``Recorder.queue``
inside its own transaction, after its guarded statement matched: the entry commits with the
write or rolls back with it, so a refused or failed write leaves none. A bulk action shares
one ``Recorder.bulk``: the first job it changes inserts one entry (the filter as text, or the
ids it was given), each later one adds one to that entry's count in its own transaction, so
the count is always the number of jobs that changed.

No output text, payload or args is stored, with one exception the issue asks for: an
edit-and-retry keeps the job's original args (``original_args``). A manual completion keeps
its output's size and sha256 (of the stored text); an enqueue (``ENQUEUE``) its args' size and
sha256, in the same two columns (v009 has no others; ``storage.read.audit`` hands them back as
``args_size`` and ``args_sha256`` for the actions in ``ARGS_DIGEST_ACTIONS``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import asyncpg

from storage.db.pool import Conn
from storage.read.audit import HAS_TRAIL
from storage.read.listing_filter import ListFilter
from storage.values.audit import ARGS_DIGEST_ACTIONS, Audit
from storage.values.errors import SchemaNotMigrated

INSERT = """
INSERT INTO audit_log (actor, action, job_ids, filter, count, queue, reason, output_size,
                       output_sha256, original_args)
VALUES ($1, $2, $3::bigint[], $4, $5, $6, $7, $8, $9, $10::text::jsonb)
RETURNING id
"""
ONE_MORE = "UPDATE audit_log SET count = count + 1 WHERE id = $1"
MISSING = (
    "This schema has no audit trail yet, so operator writes are refused: run `awa-tui migrate` "
    "(v009 adds it). Nothing was changed."
)


def describe_filter(where: ListFilter) -> str:
    """A bulk action's filter as one line of text (``state=failed kind=send_email``)."""
    parts = ["dlq"] if where.dlq else []
    if where.state is not None:
        parts.append(f"state={where.state.value}")
    for name in ("kind", "queue", "search"):
        value = getattr(where, name)
        if value is not None:
            parts.append(f"{name}={value}")
    for name in ("since", "before"):
        moment: datetime | None = getattr(where, name)
        if moment is not None:
            parts.append(f"{name}={moment.isoformat()}")
    return " ".join(parts) or "every job"


async def _insert(conn: Conn, values: Sequence[Any]) -> int:
    try:
        entry_id: int = await conn.fetchval(INSERT, *values)
    except asyncpg.UndefinedTableError as exc:  # rolls the caller's transaction back
        raise SchemaNotMigrated(MISSING) from exc
    return entry_id


class Recorder:
    """Writes the entries of one operator call (``Recorder(audit)``) or of one bulk action
    (``Recorder.bulk``). Call it inside the write's transaction only.

    On a schema v009 has not reached, the write is refused (``SchemaNotMigrated``), except
    with ``optional``: the external callback calls, whose webhook senders cannot recover from
    a refused completion (the promise a schema without the output columns keeps too), go
    ahead unrecorded there; ``list_audit`` refuses such a schema, so no one is told "nothing
    was done"."""

    def __init__(self, audit: Audit, *, optional: bool = False) -> None:
        self.audit = audit
        self.optional = optional
        self._bulk: tuple[str, str | None, list[int], str | None] | None = None
        self._entry: int | None = None  # a bulk's entry, once a transaction that wrote it committed
        self._pending: int | None = None  # the entry the current job's transaction wrote to

    @classmethod
    def bulk(cls, audit: Audit, action: str, where: ListFilter, ids: list[int] | None) -> Recorder:
        """One entry for a whole bulk action: ``ids`` when given, else ``where`` as text."""
        recorder = cls(audit)
        text = None if ids is not None else describe_filter(where)
        recorder._bulk = (f"bulk_{action}", text, list(ids or []), where.queue)
        return recorder

    async def job(
        self,
        conn: Conn,
        action: str,
        job_id: int,
        queue: str | None,
        *,
        output_text: str | None = None,
        original_args: str | None = None,
        args_text: str | None = None,
    ) -> None:
        """Record ``action`` on one job (a bulk's recorder counts it in its one entry): the
        size and sha256 of ``output_text`` (a completion's) or ``args_text`` (an enqueue's)."""
        if self._bulk is not None:
            await self._count(conn)
            return
        assert args_text is None or action in ARGS_DIGEST_ACTIONS, action
        size = digest = None
        carried = output_text if output_text is not None else args_text
        if carried is not None:
            data = carried.encode("utf-8")
            size, digest = len(data), hashlib.sha256(data).hexdigest()
        who = self.audit
        if self.optional and not await conn.fetchval(HAS_TRAIL):
            return
        await _insert(
            conn,
            (who.actor, action, [job_id], None, 1, queue, who.reason, size, digest, original_args),
        )

    async def queue(self, conn: Conn, action: str, queue: str) -> None:
        """Record ``action`` on a queue (pause, resume)."""
        who = self.audit
        await _insert(conn, (who.actor, action, [], None, 1, queue, who.reason, None, None, None))

    async def _count(self, conn: Conn) -> None:
        assert self._bulk is not None
        if self._entry is not None:
            await conn.execute(ONE_MORE, self._entry)
            self._pending = self._entry
            return
        action, text, ids, queue = self._bulk
        who = self.audit
        values = (who.actor, action, ids, text, 1, queue, who.reason, None, None, None)
        self._pending = await _insert(conn, values)

    def settled(self, committed: bool) -> None:
        """After each job of a bulk action: whether its transaction committed."""
        if committed and self._pending is not None:
            self._entry = self._pending
        self._pending = None


# Maintenance's prune: entries past the retention, oldest first, a batch a pass. A schema that
# v009 has not reached has no trail to prune (to_regclass reads the search path's schema).
PRUNE = """
DELETE FROM audit_log
 WHERE id IN (SELECT id FROM audit_log WHERE at < now() - $1::interval ORDER BY at LIMIT $2)
"""


async def prune(conn: Conn, retention: timedelta, batch: int) -> int:
    """Delete up to ``batch`` entries older than ``retention``; how many went."""
    if not await conn.fetchval(HAS_TRAIL):
        return 0
    status: str = await conn.execute(PRUNE, retention, batch)
    return int(status.rsplit(" ", 1)[-1])
