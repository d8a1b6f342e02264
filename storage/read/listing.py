"""List reads. Rows come newest first by default, in any order ``storage.read.listing_filter``
allows, with keyset paging (the last row's (value, id), or ``before_id`` by id), and never
carry an output: list reads do not load outputs (ADR-048), only whether one exists. The
counts shown beside a page are in ``storage.read.counting``; what filters and orders mean, and the
SQL fragment every statement shares, in ``storage.read.listing_filter``.

Each state has its own index-bounded query, so a page costs about the same on a million
jobs as on ten thousand. Compact completions are walked batch by batch in ``max_job_id``
order (by time: ``finalized_at``); the walk stops as soon as no further batch can hold a row
of the page.

Every read here runs inside ``storage.db.pool.snapshot``: one read-only REPEATABLE READ
transaction, so the per-state statements of one page (and the counts read with it) see one
moment, and a job that moves between two states while the page is read is listed once, in one
state.

Search text matches the text a person sees: the kind, the queue, and every string, number or
boolean value anywhere in the args or the payload (tags, metadata values, error messages),
case-insensitively as a substring. It never matches JSON syntax (quotes, escapes).

An output search (``ListFilter.output``) reads a completed job's output on either path (the
done entry's ``output``; on the compact path the array of each batch the walk reaches, read
once per batch, and the row's own element of it) and any other job's kept failed output from
its payload. Its cost grows with the jobs in the time range, which it requires.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import asyncpg

from storage.db.pool import Conn, snapshot
from storage.db.sql import OPEN_ATTEMPTS, UNCLAIMED_READY, with_or_without
from storage.read import counting
from storage.read.listing_filter import (
    COMMON_PARAMS,
    DEFAULT_SORT,
    FILTER,
    KEPT_OUTPUT,
    ListFilter,
    SortColumn,
    SortKey,
    SortOrder,
)
from storage.values.errors import InvalidFilter
from storage.values.models import CallbackInfo, DlqInfo, JobPage, JobRow, JobState
from storage.values.payload import errors_of

_COLUMNS = """r.job_id, r.kind, r.queue, r.args, r.priority, r.run_lease, r.max_attempts,
       r.run_at, r.created_at"""

# Each statement splices ``listing_filter.FILTER`` (the cursor, kind, queue, time range and
# search conditions) as %(filter)s and its ORDER BY as %(order)s; ``Statement.sql`` fills them.
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
%(filter)s
 ORDER BY %(order)s LIMIT $5
"""

LIST_DEFERRED = f"""
SELECT {_COLUMNS}, r.attempt, r.attempted_at, NULL::timestamptz AS finalized_at, r.payload,
       false AS has_output
  FROM deferred_jobs r
 WHERE r.state = $11
%(filter)s
 ORDER BY %(order)s LIMIT $5
"""

LIST_OPEN = f"""
WITH {OPEN_ATTEMPTS}
SELECT {_COLUMNS}, o.attempt, o.claimed_at AS attempted_at, NULL::timestamptz AS finalized_at,
       CASE WHEN s.progress IS NULL THEN r.payload
            ELSE COALESCE(r.payload, '{{}}') || jsonb_build_object('progress', s.progress) END
       AS payload,
       false AS has_output, s.callback_id, s.callback_timeout_at,
       COALESCE(s.state, 'running') AS attempt_state,
       COALESCE(s.heartbeat_at, o.claimed_at) AS heartbeat_at
  FROM open o
  JOIN ready_entries r ON r.job_id = o.job_id AND r.run_lease = o.run_lease
  LEFT JOIN attempt_state s ON s.job_id = o.job_id AND s.run_lease = o.run_lease
 WHERE (COALESCE(s.state, 'running') = 'waiting_external') = $11
%(filter)s
 ORDER BY %(order)s LIMIT $5
"""

# By finish time: one range of the (state, finalized_at, job_id) index (migration v006).
LIST_DONE = f"""
SELECT {_COLUMNS}, d.attempt, NULL::timestamptz AS attempted_at, d.finalized_at,
       COALESCE(d.payload, r.payload) AS payload, %(has_output)s AS has_output
  FROM done_entries d
  JOIN ready_entries r ON r.job_id = d.job_id AND r.run_lease = d.run_lease
 WHERE d.state = $11
%(filter)s
 ORDER BY %(order)s LIMIT $5
"""

LIST_DLQ = """
SELECT r.job_id, r.kind, r.queue, r.args, r.priority, r.original_run_lease AS run_lease,
       r.max_attempts, r.run_at, r.created_at, r.attempt, r.attempted_at, r.finalized_at,
       r.payload, false AS has_output, r.dlq_reason, r.dlq_at
  FROM dlq_entries r
 WHERE true
%(filter)s
 ORDER BY %(order)s LIMIT $5
"""

# The next few compact batches that may hold rows of the page, with the (at, tie) pair the walk
# continues after: by id, those with ids below the cursor id ($1) in (max_job_id, batch_id)
# order; by time, those that can hold a row past the cursor (time $1, id $7) in
# (finalized_at, max_job_id) order, newest first (min_job_id oldest first), so that among
# batches of one finish time (one flush) the walk also stops as soon as no further batch can
# hold a row of the page. A batch's rows share its finalized_at, so the time range ($5, $6)
# drops whole batches here.
_BATCH_WINDOW = """($5::timestamptz IS NULL OR finalized_at >= $5)
   AND ($6::timestamptz IS NULL OR finalized_at < $6)"""
COMPACT_BATCHES = {
    (SortColumn.ID, True): f"""
SELECT batch_id, max_job_id AS at, batch_id AS tie FROM receipt_completion_batches
 WHERE min_job_id < $1 AND (max_job_id, batch_id) < ($2, $3) AND {_BATCH_WINDOW}
 ORDER BY max_job_id DESC, batch_id DESC LIMIT $4
""",
    (SortColumn.WHEN, True): f"""
SELECT batch_id, finalized_at AS at, max_job_id AS tie FROM receipt_completion_batches
 WHERE finalized_at <= $1 AND (finalized_at, min_job_id) < ($1, $7)
   AND finalized_at <= $2 AND (finalized_at, max_job_id) < ($2, $3) AND {_BATCH_WINDOW}
 ORDER BY finalized_at DESC, max_job_id DESC LIMIT $4
""",
    (SortColumn.WHEN, False): f"""
SELECT batch_id, finalized_at AS at, min_job_id AS tie FROM receipt_completion_batches
 WHERE finalized_at >= $1 AND (finalized_at, max_job_id) > ($1, $7)
   AND finalized_at >= $2 AND (finalized_at, min_job_id) > ($2, $3) AND {_BATCH_WINDOW}
 ORDER BY finalized_at ASC, min_job_id ASC LIMIT $4
""",
}

# Rows of those batches. The output mask is computed once per batch (one detoast of the
# array), and no output value leaves the server.
COMPACT_ROWS = f"""
SELECT {_COLUMNS}, b.attempts[item.ord]::int AS attempt, NULL::timestamptz AS attempted_at,
       b.finalized_at, NULL::jsonb AS payload,
       COALESCE(m.mask[item.ord], false) AS has_output
  FROM (SELECT b.*, %(outputs)s AS searched FROM receipt_completion_batches b
         WHERE b.batch_id = ANY($11::bigint[]) OFFSET 0) b
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS item(job_id, run_lease, ord)
 CROSS JOIN LATERAL (SELECT %(mask)s AS mask) m
  JOIN ready_entries r ON r.job_id = item.job_id AND r.run_lease = item.run_lease
 WHERE b.batch_id = ANY($11::bigint[])
   AND NOT EXISTS (SELECT 1 FROM receipt_completion_tombstones t
                    WHERE t.job_id = item.job_id AND t.run_lease = item.run_lease)
%(filter)s
 ORDER BY %(order)s LIMIT $5
"""
# An output search's values, read once per batch (OFFSET 0 keeps the subquery per batch row):
# subscripting the stored array per row detoasted it for each row (1.2 s for a search that
# matched nothing over 10k jobs). Only when an output term is given ($8 text, $9 path).
_OUTPUTS = (
    "CASE WHEN $8::text IS NULL AND $9::text[] IS NULL THEN NULL::jsonb[] ELSE"
    " (SELECT array_agg(o::jsonb ORDER BY n) FROM unnest(b.outputs) WITH ORDINALITY AS x(o, n))"
    " END",
    "NULL::jsonb[]",
)
_MASK = (
    "(SELECT array_agg(o IS NOT NULL ORDER BY n)"
    " FROM unnest(b.outputs) WITH ORDINALITY AS x(o, n))",
    "NULL::boolean[]",
)

# A time range picks the index: a narrow one is read through the time index, a wide one by
# walking ids. Only a plan made with the values can tell; a cached generic plan cannot use
# ``($6 IS NULL OR t >= $6)`` for an index and walked every batch for a range that matched
# nothing (browser_pages: 21 ms at 10k, 48 ms at 200k). Local to the read's transaction.
PLAN_WITH_VALUES = "SET LOCAL plan_cache_mode = force_custom_plan"

NO_OUTPUTS = (
    "This schema has no output columns (it is at migration v001), so it keeps no outputs to "
    "search or read; migrate it first (awa-tui migrate)."
)

COMPACT_CHUNK = 4
MAX_COMPACT_CHUNK = 256


@dataclass(frozen=True)
class Statement:
    """A per-state list statement and what ``FILTER`` needs to know about it: the payload the
    search reads, the id column its index orders, its time column, its sort value per
    ``SortColumn`` (None: by id), how many parameters of its own follow ``FILTER``'s, and
    the completed output an output search reads (None: only the output a failed attempt kept,
    ``KEPT_OUTPUT``; with ``{kept}`` where that one applies)."""

    template: Mapping[bool, str]  # with and without the output columns (``with_or_without``)
    payload: str
    time: str
    own_params: int = 0
    id_col: str = "r.job_id"
    attempts: str | None = None
    output: str | None = None

    def sql(self, order: SortOrder, *, outputs: bool = False) -> str:
        key = {SortColumn.ID: None, SortColumn.WHEN: self.time, SortColumn.ATTEMPTS: self.attempts}
        cursor, order_by = order.sql(
            self.id_col, key[order.column], COMMON_PARAMS + self.own_params + 1
        )
        kept = KEPT_OUTPUT % self.payload
        output = self.output.format(kept=kept) if outputs and self.output else kept
        where = FILTER % {
            "cursor": cursor,
            "time": self.time,
            "payload": self.payload,
            "output": output,
        }
        return self.template[outputs] % {"filter": where, "order": order_by}


AVAILABLE = Statement(
    with_or_without(LIST_AVAILABLE), "r.payload", "r.run_at", attempts="r.attempt"
)
DEFERRED = Statement(
    with_or_without(LIST_DEFERRED), "r.payload", "r.run_at", 1, attempts="r.attempt"
)
OPEN = Statement(with_or_without(LIST_OPEN), "r.payload", "o.claimed_at", 1, attempts="o.attempt")
DONE = Statement(
    with_or_without(LIST_DONE, has_output=("d.output IS NOT NULL", "false")),
    "COALESCE(d.payload, r.payload)",
    "d.finalized_at",
    1,
    "d.job_id",
    output="CASE WHEN d.state = 'completed' THEN d.output::jsonb ELSE {kept} END",
)
DLQ = Statement(with_or_without(LIST_DLQ), "r.payload", "r.dlq_at")
COMPACT = Statement(
    with_or_without(COMPACT_ROWS, mask=_MASK, outputs=_OUTPUTS),
    "r.payload",
    "b.finalized_at",
    1,
    output="b.searched[item.ord]",  # this row's own output
)
STATEMENTS = (AVAILABLE, DEFERRED, OPEN, DONE, DLQ, COMPACT)


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
    order: SortOrder = DEFAULT_SORT,
    after: JobRow | SortKey | None = None,
) -> list[JobRow]:
    """One page of jobs in ``order`` (newest first by default), starting after the row
    ``after`` (or, by id, below ``before_id``); ``where.state`` None means every state.
    An order the state's indexes do not serve raises ``InvalidFilter``
    (``SortOrder.refusal``).

    Call inside ``snapshot`` (``Client.list_jobs`` does): the states are read by separate
    statements, which agree only when they share a snapshot.
    """
    refusal = order.refusal(where.state, where.dlq)
    if refusal is not None:
        raise InvalidFilter(refusal)
    if where.output is not None and not outputs:
        raise InvalidFilter(NO_OUTPUTS)
    if where.since is not None or where.before is not None:
        await conn.execute(PLAN_WITH_VALUES)
    value, cursor_id = order.cursor(after, before_id)
    page = _Page(where.params(cursor_id, limit), [] if order.column is SortColumn.ID else [value])
    if where.dlq:
        return [_dlq_row(r) for r in await page.fetch(conn, DLQ, order)]
    states = [where.state] if where.state is not None else list(JobState)
    rows: list[JobRow] = []
    for state in states:
        rows.extend(await _list_state(conn, state, page, order, outputs))
    rows.sort(key=order.key, reverse=order.descending)
    return rows[:limit]


@dataclass(frozen=True)
class _Page:
    """The parameters of one page: ``FILTER``'s, then a statement's own, then the cursor value
    of a non-id order."""

    common: list[Any]
    cursor: list[Any]

    async def fetch(
        self, conn: Conn, statement: Statement, order: SortOrder, *own: Any, outputs: bool = False
    ) -> list[asyncpg.Record]:
        sql = statement.sql(order, outputs=outputs)
        return await conn.fetch(sql, *self.common, *own, *self.cursor)


def _dlq_row(r: asyncpg.Record) -> JobRow:
    info = DlqInfo(reason=r["dlq_reason"], dlq_at=r["dlq_at"], original_run_lease=r["run_lease"])
    return _row(r, JobState.FAILED, dlq=info)


async def _list_state(
    conn: Conn, state: JobState, page: _Page, order: SortOrder, outputs: bool
) -> list[JobRow]:
    match state:
        case JobState.AVAILABLE:
            return [_row(r, state) for r in await page.fetch(conn, AVAILABLE, order)]
        case JobState.SCHEDULED | JobState.RETRYABLE:
            rows = await page.fetch(conn, DEFERRED, order, state.value)
            return [_row(r, state) for r in rows]
        case JobState.RUNNING | JobState.WAITING_EXTERNAL:
            waiting = state is JobState.WAITING_EXTERNAL
            return [_open_row(r, state) for r in await page.fetch(conn, OPEN, order, waiting)]
        case JobState.FAILED | JobState.CANCELLED:  # their outputs are in their error entries
            rows = await page.fetch(conn, DONE, order, state.value)
            return [_row(r, state, storage_path="general") for r in rows]
        case JobState.COMPLETED:
            rows = await page.fetch(conn, DONE, order, state.value, outputs=outputs)
            general = [_row(r, state, storage_path="general") for r in rows]
            return general + await _compact_page(conn, page, order, outputs)


def _open_row(r: asyncpg.Record, state: JobState) -> JobRow:
    callback = None
    if r["callback_id"]:
        callback = CallbackInfo(
            callback_id=r["callback_id"],
            timeout_at=r["callback_timeout_at"],
            state=r["attempt_state"],
        )
    heartbeat_at = r["heartbeat_at"] if state is JobState.RUNNING else None
    return _row(r, state, callback=callback, heartbeat_at=heartbeat_at)


async def _compact_page(conn: Conn, page: _Page, order: SortOrder, outputs: bool) -> list[JobRow]:
    """Walk compact batches in ``order`` until no further batch can hold a row of the page:
    by id, a batch holds no id above its max_job_id; by time, its rows share its finalized_at
    and lie between its min_job_id and max_job_id (``COMPACT_BATCHES``)."""
    cursor_id, limit, since, before = page.common[0], page.common[4], *page.common[5:7]
    by_time = [cursor_id] if page.cursor else []  # $7 of the walks by time
    start = page.cursor[0] if page.cursor else cursor_id
    batches_sql = COMPACT_BATCHES[order.column, order.descending]
    walk = order.cursor(None, None)
    found: list[JobRow] = []
    chunk = COMPACT_CHUNK
    while True:
        batches = await conn.fetch(batches_sql, start, *walk, chunk, since, before, *by_time)
        if not batches:
            break
        ids = [b["batch_id"] for b in batches]
        rows = await page.fetch(conn, COMPACT, order, ids, outputs=outputs)
        found.extend(_row(r, JobState.COMPLETED, storage_path="compact") for r in rows)
        found.sort(key=order.key, reverse=order.descending)
        del found[limit:]
        last = batches[-1]
        walk = (last["at"], last["tie"])
        if len(found) >= limit:  # no batch after ``walk`` can hold a row before the last found
            edge = order.key(found[-1])
            if (walk < edge) if order.descending else (walk > edge):
                break
        # Each chunk doubles, so round trips grow with the log of the batches read: a filtered
        # walk may pass many batches without a match.
        chunk = min(chunk * 2, MAX_COMPACT_CHUNK)
    return found


async def browse(
    conn: Conn,
    where: ListFilter,
    *,
    before_id: int | None,
    limit: int,
    outputs: bool,
    count_cap: int | None = None,
    order: SortOrder = DEFAULT_SORT,
    after: JobRow | SortKey | None = None,
) -> JobPage:
    """A page and the counts shown beside it (``storage.read.counting``), from one snapshot. The
    counts follow the filter's time range, not its kind, queue or text."""
    cap = counting.COUNT_CAP if count_cap is None else count_cap
    async with snapshot(conn):
        rows = await list_jobs(
            conn, where, before_id=before_id, limit=limit, outputs=outputs, order=order, after=after
        )
        page_counts = await counting.counts(conn, cap=cap, since=where.since, before=where.before)
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
