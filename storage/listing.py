"""List reads. Rows come newest first with keyset paging (``before_id``) and never carry an
output: list reads do not load outputs (ADR-048), only whether one exists. The counts shown
beside a page are in ``storage.counting``.

Each state has its own index-bounded query, so a page costs about the same on a million
jobs as on ten thousand. Compact completions are walked batch by batch in ``max_job_id``
order; the walk stops as soon as no older batch can hold a row of the page.

Every read here runs inside ``snapshot``: one read-only REPEATABLE READ transaction, so the
per-state statements of one page (and the counts read with it) see one moment, and a job that
moves between two states while the page is read is listed once, in one state.

Search text matches the text a person sees: the kind, the queue, and every string, number or
boolean value anywhere in the args or the payload (tags, metadata values, error messages),
case-insensitively as a substring. It never matches JSON syntax (quotes, escapes).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import asyncpg

from storage import counting
from storage.db import Conn
from storage.errors import InvalidFilter
from storage.models import CallbackInfo, DlqInfo, JobPage, JobRow, JobState
from storage.names import unstorable
from storage.payload import errors_of
from storage.sql_shared import OPEN_ATTEMPTS, UNCLAIMED_READY

# $1 before_id, $2 kind, $3 queue, $4 search pattern (ILIKE, % _ \\ escaped), $5 limit.
# The search looks at scalar values (``#>> '{}'`` is a value's text without JSON quoting).
_FILTER = """
   AND r.job_id < $1
   AND ($2::text IS NULL OR r.kind = $2)
   AND ($3::text IS NULL OR r.queue = $3)
   AND ($4::text IS NULL OR r.kind ILIKE $4 OR r.queue ILIKE $4
        OR EXISTS (SELECT 1 FROM jsonb_path_query(r.args, 'strict $.**') v
                    WHERE jsonb_typeof(v) IN ('string', 'number', 'boolean')
                      AND v #>> '{}' ILIKE $4)
        OR EXISTS (SELECT 1 FROM jsonb_path_query(%(payload)s, 'strict $.**') v
                    WHERE jsonb_typeof(v) IN ('string', 'number', 'boolean')
                      AND v #>> '{}' ILIKE $4))
"""


def _filter(payload: str) -> str:
    return _FILTER % {"payload": payload}


_COLUMNS = """r.job_id, r.kind, r.queue, r.args, r.priority, r.run_lease, r.max_attempts,
       r.run_at, r.created_at"""

# MATERIALIZED: the unclaimed rows are found through the lanes' cursors first (one index range
# per lane, ``UNCLAIMED_READY``); left to itself the planner walked every ready row newest
# first looking for available ones.
LIST_AVAILABLE = f"""
WITH unclaimed AS MATERIALIZED (SELECT r.* FROM {UNCLAIMED_READY})
SELECT {_COLUMNS}, r.attempt, r.attempted_at, NULL::timestamptz AS finalized_at, r.payload,
       false AS has_output
  FROM unclaimed r
 WHERE NOT EXISTS (SELECT 1 FROM ready_tombstones t
                    WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)
{_filter("r.payload")}
 ORDER BY r.job_id DESC LIMIT $5
"""

LIST_DEFERRED = f"""
SELECT {_COLUMNS}, r.attempt, r.attempted_at, NULL::timestamptz AS finalized_at, r.payload,
       false AS has_output
  FROM deferred_jobs r
 WHERE r.state = $6
{_filter("r.payload")}
 ORDER BY r.job_id DESC LIMIT $5
"""

LIST_OPEN = f"""
WITH {OPEN_ATTEMPTS}
SELECT {_COLUMNS}, o.attempt, o.claimed_at AS attempted_at, NULL::timestamptz AS finalized_at,
       CASE WHEN s.progress IS NULL THEN r.payload
            ELSE COALESCE(r.payload, '{{}}') || jsonb_build_object('progress', s.progress) END
       AS payload,
       false AS has_output, s.callback_id, s.callback_timeout_at,
       COALESCE(s.state, 'running') AS attempt_state
  FROM open o
  JOIN ready_entries r ON r.job_id = o.job_id AND r.run_lease = o.run_lease
  LEFT JOIN attempt_state s ON s.job_id = o.job_id AND s.run_lease = o.run_lease
 WHERE (COALESCE(s.state, 'running') = 'waiting_external') = $6
{_filter("r.payload")}
 ORDER BY r.job_id DESC LIMIT $5
"""

LIST_DONE = f"""
SELECT {_COLUMNS}, d.attempt, NULL::timestamptz AS attempted_at, d.finalized_at,
       COALESCE(d.payload, r.payload) AS payload, %(has_output)s AS has_output
  FROM done_entries d
  JOIN ready_entries r ON r.job_id = d.job_id AND r.run_lease = d.run_lease
 WHERE d.state = $6
{_filter("COALESCE(d.payload, r.payload)")}
 ORDER BY d.job_id DESC LIMIT $5
"""

LIST_DLQ = f"""
SELECT r.job_id, r.kind, r.queue, r.args, r.priority, r.original_run_lease AS run_lease,
       r.max_attempts, r.run_at, r.created_at, r.attempt, r.attempted_at, r.finalized_at,
       r.payload, false AS has_output, r.dlq_reason, r.dlq_at
  FROM dlq_entries r
 WHERE true
{_filter("r.payload")}
 ORDER BY r.job_id DESC LIMIT $5
"""

# The next few compact batches that may hold rows older than before_id.
COMPACT_BATCHES = """
SELECT batch_id, max_job_id FROM receipt_completion_batches
 WHERE min_job_id < $1 AND (max_job_id, batch_id) < ($2, $3)
 ORDER BY max_job_id DESC, batch_id DESC
 LIMIT $4
"""

# Rows of those batches. The output mask is computed once per batch (one detoast of the
# array), and no output value leaves the server.
COMPACT_ROWS = f"""
SELECT {_COLUMNS}, b.attempts[item.ord]::int AS attempt, NULL::timestamptz AS attempted_at,
       b.finalized_at, NULL::jsonb AS payload,
       COALESCE(m.mask[item.ord], false) AS has_output
  FROM receipt_completion_batches b
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS item(job_id, run_lease, ord)
 CROSS JOIN LATERAL (SELECT %(mask)s AS mask) m
  JOIN ready_entries r ON r.job_id = item.job_id AND r.run_lease = item.run_lease
 WHERE b.batch_id = ANY($6::bigint[])
   AND NOT EXISTS (SELECT 1 FROM receipt_completion_tombstones t
                    WHERE t.job_id = item.job_id AND t.run_lease = item.run_lease)
{_filter("r.payload")}
 ORDER BY r.job_id DESC LIMIT $5
"""
_MASK = {
    True: "(SELECT array_agg(o IS NOT NULL ORDER BY n)"
    " FROM unnest(b.outputs) WITH ORDINALITY AS x(o, n))",
    False: "NULL::boolean[]",
}

COMPACT_CHUNK = 4
NO_BEFORE = 2**63 - 1


STATE_NAMES = ", ".join(state.value for state in JobState)


def parse_state(state: JobState | str | None) -> JobState | None:
    """The state named by ``state`` (a ``JobState`` or its string); refuses any other value."""
    if state is None or isinstance(state, JobState):
        return state
    try:
        return JobState(state)
    except ValueError:
        raise InvalidFilter(
            f"Unknown job state {_printable(state)}; use one of {STATE_NAMES}."
        ) from None


def _printable(value: object) -> str:
    return ascii(value) if isinstance(value, str) and len(value) <= 40 else "(given value)"


def check_text(what: str, value: str | None) -> str | None:
    """Refuse text PostgreSQL cannot take (a NUL, a lone surrogate) before it reaches the driver.
    The message names the position, never the text: search text can be anything."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidFilter(f"The {what} filter must be text.")
    reason = unstorable(value)
    if reason is not None:
        raise InvalidFilter(f"The {what} filter contains {reason}, so it cannot match.")
    return value


@dataclass(frozen=True)
class ListFilter:
    """What the browser asks for. ``search`` matches kind, queue and the values in args and
    payload (see the module docstring)."""

    state: JobState | None = None
    dlq: bool = False
    kind: str | None = None
    queue: str | None = None
    search: str | None = None

    @classmethod
    def of(
        cls,
        *,
        state: JobState | str | None = None,
        dlq: bool = False,
        kind: str | None = None,
        queue: str | None = None,
        search: str | None = None,
    ) -> ListFilter:
        """A checked filter: unknown states and unusable text raise ``InvalidFilter``."""
        return cls(
            state=parse_state(state),
            dlq=dlq,
            kind=check_text("kind", kind),
            queue=check_text("queue", queue),
            search=check_text("search", search),
        )

    def params(self, before_id: int | None, limit: int) -> list[Any]:
        pattern = None
        if self.search:
            escaped = self.search.replace("\\", "\\\\").replace("%", r"\%").replace("_", r"\_")
            pattern = f"%{escaped}%"
        return [before_id or NO_BEFORE, self.kind, self.queue, pattern, limit]


@asynccontextmanager
async def snapshot(conn: Conn) -> AsyncIterator[None]:
    """One read-only REPEATABLE READ transaction: every statement inside sees one moment."""
    async with conn.transaction(isolation="repeatable_read", readonly=True):
        yield


def _row(r: asyncpg.Record, state: JobState, **extra: Any) -> JobRow:
    payload = r["payload"] or {}
    return JobRow(
        id=r["job_id"],
        kind=r["kind"],
        queue=r["queue"],
        state=state,
        args=r["args"],
        priority=r["priority"],
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        run_lease=r["run_lease"],
        run_at=r["run_at"],
        created_at=r["created_at"],
        attempted_at=r["attempted_at"],
        finalized_at=r["finalized_at"],
        tags=list(payload.get("tags") or []),
        metadata=dict(payload.get("metadata") or {}),
        errors=errors_of(payload),
        progress=payload.get("progress"),
        has_output=bool(r["has_output"]),
        **extra,
    )


async def list_jobs(
    conn: Conn,
    where: ListFilter,
    *,
    before_id: int | None,
    limit: int,
    outputs: bool,
) -> list[JobRow]:
    """One page of jobs, newest first; ``where.state`` None means every state.

    Call inside ``snapshot`` (``Client.list_jobs`` does): the states are read by separate
    statements, which agree only when they share a snapshot.
    """
    params = where.params(before_id, limit)
    if where.dlq:
        return [_dlq_row(r) for r in await conn.fetch(LIST_DLQ, *params)]
    states = [where.state] if where.state is not None else list(JobState)
    rows: list[JobRow] = []
    for state in states:
        rows.extend(await _list_state(conn, state, params, outputs))
    rows.sort(key=lambda row: row.id, reverse=True)
    return rows[:limit]


def _dlq_row(r: asyncpg.Record) -> JobRow:
    info = DlqInfo(reason=r["dlq_reason"], dlq_at=r["dlq_at"], original_run_lease=r["run_lease"])
    return _row(r, JobState.FAILED, dlq=info)


async def _list_state(
    conn: Conn, state: JobState, params: list[Any], outputs: bool
) -> list[JobRow]:
    match state:
        case JobState.AVAILABLE:
            return [_row(r, state) for r in await conn.fetch(LIST_AVAILABLE, *params)]
        case JobState.SCHEDULED | JobState.RETRYABLE:
            return [_row(r, state) for r in await conn.fetch(LIST_DEFERRED, *params, state.value)]
        case JobState.RUNNING | JobState.WAITING_EXTERNAL:
            waiting = state is JobState.WAITING_EXTERNAL
            return [_open_row(r, state) for r in await conn.fetch(LIST_OPEN, *params, waiting)]
        case JobState.FAILED | JobState.CANCELLED:
            sql = LIST_DONE % {"has_output": "false"}
            return [
                _row(r, state, storage_path="general")
                for r in await conn.fetch(sql, *params, state.value)
            ]
        case JobState.COMPLETED:
            sql = LIST_DONE % {"has_output": "d.output IS NOT NULL" if outputs else "false"}
            general = [
                _row(r, state, storage_path="general")
                for r in await conn.fetch(sql, *params, state.value)
            ]
            return general + await _compact_page(conn, params, outputs)


def _open_row(r: asyncpg.Record, state: JobState) -> JobRow:
    callback = None
    if r["callback_id"]:
        callback = CallbackInfo(
            callback_id=r["callback_id"],
            timeout_at=r["callback_timeout_at"],
            state=r["attempt_state"],
        )
    return _row(r, state, callback=callback)


async def _compact_page(conn: Conn, params: list[Any], outputs: bool) -> list[JobRow]:
    """Walk compact batches newest first until no older batch can hold a row of the page."""
    before, limit = params[0], params[4]
    sql = COMPACT_ROWS % {"mask": _MASK[outputs]}
    found: list[JobRow] = []
    cursor = (NO_BEFORE, NO_BEFORE)
    while True:
        batches = await conn.fetch(COMPACT_BATCHES, before, *cursor, COMPACT_CHUNK)
        if not batches:
            break
        rows = await conn.fetch(sql, *params, [b["batch_id"] for b in batches])
        found.extend(_row(r, JobState.COMPLETED, storage_path="compact") for r in rows)
        found.sort(key=lambda row: row.id, reverse=True)
        del found[limit:]
        last = batches[-1]
        cursor = (last["max_job_id"], last["batch_id"])
        if len(found) >= limit and last["max_job_id"] < found[-1].id:
            break
    return found


async def browse(
    conn: Conn,
    where: ListFilter,
    *,
    before_id: int | None,
    limit: int,
    outputs: bool,
    count_cap: int | None = None,
) -> JobPage:
    """A page and the counts shown beside it (``storage.counting``), from one snapshot."""
    cap = counting.COUNT_CAP if count_cap is None else count_cap
    async with snapshot(conn):
        rows = await list_jobs(conn, where, before_id=before_id, limit=limit, outputs=outputs)
        page_counts = await counting.counts(conn, cap=cap)
        return JobPage(rows=rows, counts=page_counts, has_more=len(rows) == limit)


async def matching_ids(conn: Conn, where: ListFilter, *, outputs: bool, chunk: int) -> list[int]:
    """Every job id the filter matches, newest first, read in one snapshot."""
    ids: list[int] = []
    before: int | None = None
    async with snapshot(conn):
        while True:
            page = await list_jobs(conn, where, before_id=before, limit=chunk, outputs=outputs)
            ids.extend(row.id for row in page)
            if len(page) < chunk:
                return ids
            before = page[-1].id
