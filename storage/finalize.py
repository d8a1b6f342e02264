"""Transitions of a claimed attempt, each guarded by ``(job_id, run_lease)``.

Every transition takes the attempt's claim-batch advisory lock (transaction-scoped, in a fixed
order), then writes only if the attempt is still open: its claim batch holds it, no closure row
ends it and no compact completion batch already holds it. A guard that matches nothing is
*stale*: nothing is written and the caller is told.

This module is the one place an attempt's record is written; the runtime, the test harness,
rescue, callbacks and admin actions all come through here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

import asyncpg

from storage.db import Conn
from storage.payload import Payload
from storage.sql_shared import LOCK_ATTEMPT, LOCK_CLAIM_BATCHES

MAX_BATCH_OUTPUT_BYTES = 64 * 1024
OUTPUT_SEPARATOR = "\x1e"  # ASCII record separator; see COMPLETE_COMPACT

# Compact completion: one receipt_completion_batches row per (claim batch, part) and no
# per-job row. Outputs are aggregated in the same order as job_ids, so a job that drops out
# as stale shifts nothing.
# $7 carries the outputs as one text, OUTPUT_SEPARATOR between them and '' for "none" (NULL
# when the flush has none): a json[] parameter cost the client 0.5 µs more per job to encode.
# The separator, an ASCII control character, cannot appear raw in JSON text, and JSON text is
# never empty.
COMPLETE_COMPACT = """
WITH req AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::bigint[], $5::int[],
                         $6::int[], string_to_array($7::text, E'\\x1e', '')::json[])
        AS r(job_id, run_lease, claim_id, lane_seq, attempt, part, output)
-- MATERIALIZED: inlined, the planner re-ran these unnests once per request row, which made
-- a flush quadratic in its claim batch (120 ms for 512 jobs instead of 18 ms).
), claimed AS MATERIALIZED (
    SELECT cb.claim_id, u.job_id, u.run_lease, cb.queue, cb.priority, cb.lane_lo, cb.lane_hi
      FROM claim_batches cb, unnest(cb.job_ids, cb.run_leases) AS u(job_id, run_lease)
     WHERE cb.claim_id = ANY($8::bigint[])
), done_before AS MATERIALIZED (
    SELECT b.claim_id, u.job_id
      FROM receipt_completion_batches b, unnest(b.job_ids) AS u(job_id)
     WHERE b.claim_id = ANY($8::bigint[])
), closed AS (
    SELECT job_id, run_lease FROM attempt_closures WHERE claim_id = ANY($8::bigint[])
), open AS (
    SELECT req.*, c.queue, c.priority, c.lane_lo, c.lane_hi
      FROM req
      JOIN claimed c USING (claim_id, job_id, run_lease)
     WHERE (req.claim_id, req.job_id) NOT IN (SELECT claim_id, job_id FROM done_before)
       AND (req.job_id, req.run_lease) NOT IN (SELECT job_id, run_lease FROM closed)
), ins AS (
    INSERT INTO receipt_completion_batches (
        slot, claim_id, queue, priority, claim_lane_lo, claim_lane_hi, min_job_id, max_job_id,
        job_ids, run_leases, lane_seqs, attempts, completed_count, finalized_at %(outputs_column)s)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), o.claim_id, o.queue,
           o.priority, o.lane_lo, o.lane_hi, min(o.job_id), max(o.job_id),
           array_agg(o.job_id ORDER BY o.lane_seq, o.job_id),
           array_agg(o.run_lease ORDER BY o.lane_seq, o.job_id),
           array_agg(o.lane_seq ORDER BY o.lane_seq, o.job_id),
           array_agg(o.attempt ORDER BY o.lane_seq, o.job_id),
           count(*), now() %(outputs_value)s
      FROM open o
     GROUP BY o.claim_id, o.part, o.queue, o.priority, o.lane_lo, o.lane_hi
    RETURNING job_ids
)
SELECT 'written' AS outcome, u.job_id FROM ins, unnest(ins.job_ids) AS u(job_id)
UNION ALL
SELECT 'already', d.job_id FROM done_before d JOIN req USING (claim_id, job_id)
"""
_OUTPUTS = {
    True: {
        "outputs_column": ", outputs",
        "outputs_value": (
            ", CASE WHEN bool_or(o.output IS NOT NULL)"
            " THEN array_agg(o.output ORDER BY o.lane_seq, o.job_id) END"
        ),
    },
    False: {"outputs_column": "", "outputs_value": ""},
}
COMPLETE_COMPACT_SQL = {flag: COMPLETE_COMPACT % parts for flag, parts in _OUTPUTS.items()}

# The general guard: close the attempt if it is still open, drop its attempt state, and hand
# back its ready row with the last flushed progress.
CLOSE_IF_OPEN = """
WITH open AS (
    SELECT r.* FROM ready_entries r
     WHERE r.job_id = $1 AND r.run_lease = $2
       AND EXISTS (SELECT 1 FROM claim_batches cb
                    WHERE cb.claim_id = $3 AND cb.job_ids @> ARRAY[$1::bigint]
                      AND cb.run_leases[array_position(cb.job_ids, $1::bigint)] = $2)
       AND NOT EXISTS (SELECT 1 FROM attempt_closures c WHERE c.job_id = $1 AND c.run_lease = $2)
       AND NOT EXISTS (SELECT 1 FROM receipt_completion_batches b
                        WHERE b.claim_id = $3 AND b.job_ids @> ARRAY[$1::bigint])
     LIMIT 1
), closure AS (
    INSERT INTO attempt_closures (slot, job_id, run_lease, claim_id, outcome, closed_at)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'claim'), job_id, run_lease, $3, $4,
           now()
      FROM open
), dropped AS (
    DELETE FROM attempt_state s
     WHERE s.job_id = $1 AND s.run_lease = $2 AND EXISTS (SELECT 1 FROM open)
    RETURNING s.progress
)
SELECT open.*, (SELECT progress FROM dropped) AS stored_progress,
       COALESCE((SELECT dlq_enabled FROM queue_settings q WHERE q.queue = open.queue), false)
       AS dlq_enabled
  FROM open
"""

# Was this attempt already closed with ``outcome`` (a finalize retry after a lost ack)?
CLOSED_WITH = """
SELECT outcome FROM attempt_closures WHERE job_id = $1 AND run_lease = $2 AND claim_id = $3
"""

DROP_ATTEMPT_STATES = """
DELETE FROM attempt_state s USING unnest($1::bigint[], $2::bigint[]) AS u(job_id, run_lease)
 WHERE s.job_id = u.job_id AND s.run_lease = u.run_lease
"""

WRITE_DONE = """
INSERT INTO done_entries (slot, job_id, run_lease, state, attempt, finalized_at, payload %s)
VALUES ((SELECT current_slot FROM ring_state WHERE ring = 'queue'), $1, $2, $3, $4, now(), $5 %s)
"""
WRITE_DONE_SQL = {True: WRITE_DONE % (", output", ", $6"), False: WRITE_DONE % ("", "")}

# A retry or snooze writes the job's next readiness into deferred_jobs with a new run lease.
WRITE_DEFERRED = """
INSERT INTO deferred_jobs (job_id, state, kind, queue, args, priority, attempt, run_lease,
                           max_attempts, run_at, attempted_at, created_at, unique_key, payload)
SELECT job_id, $3, kind, queue, args, priority, $4, run_lease + 1, max_attempts, $5, $6,
       created_at, unique_key, $7
  FROM ready_entries WHERE job_id = $1 AND run_lease = $2
"""

WRITE_DLQ = """
INSERT INTO dlq_entries (job_id, kind, queue, args, priority, attempt, max_attempts, run_at,
                         attempted_at, created_at, finalized_at, unique_key, payload, dlq_reason,
                         dlq_at, original_run_lease)
SELECT job_id, kind, queue, args, priority, $3, max_attempts, run_at, $4, created_at, now(),
       unique_key, $5, $6, now(), run_lease
  FROM ready_entries WHERE job_id = $1 AND run_lease = $2
"""


class Outcome(StrEnum):
    """What a guarded transition did."""

    WRITTEN = "written"
    ALREADY = "already"  # a finalize retry found its own earlier commit
    STALE = "stale"


@dataclass(frozen=True)
class AttemptRef:
    job_id: int
    run_lease: int
    claim_id: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.job_id, self.run_lease)


@dataclass(frozen=True)
class CompactCompletion:
    ref: AttemptRef
    lane_seq: int
    attempt: int
    output_text: str | None
    has_state: bool


async def lock_claims(conn: Conn, claim_ids: Iterable[int]) -> None:
    """A compact flush's locks: its claim batches, exclusively, in ascending order."""
    await conn.execute(LOCK_CLAIM_BATCHES, sorted(set(claim_ids)))


async def lock_attempt(conn: Conn, ref: AttemptRef) -> None:
    """A single attempt's lock: its claim batch shared, then its job exclusively."""
    await conn.execute(LOCK_ATTEMPT, ref.claim_id, ref.job_id)


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without encoding it when it is ASCII (the common case)."""
    return len(text) if text.isascii() else len(text.encode())


def split_parts(items: list[CompactCompletion]) -> list[int]:
    """Part number per item: a new batch row once a claim's outputs pass 64 KiB of text."""
    sizes = [0 if i.output_text is None else utf8_size(i.output_text) for i in items]
    parts = [0] * len(items)
    if sum(sizes) <= MAX_BATCH_OUTPUT_BYTES:  # no claim can need a second row
        return parts
    order = sorted(range(len(items)), key=lambda i: (items[i].ref.claim_id, items[i].lane_seq))
    claim, part, size = None, 0, 0
    for i in order:
        item = items[i]
        if item.ref.claim_id != claim:
            claim, part, size = item.ref.claim_id, 0, 0
        text_size = sizes[i]
        if size and size + text_size > MAX_BATCH_OUTPUT_BYTES:
            part, size = part + 1, 0
        size += text_size
        parts[i] = part
    return parts


async def complete_compact(
    conn: Conn, items: list[CompactCompletion], *, outputs_supported: bool
) -> dict[tuple[int, int], Outcome]:
    """Complete many attempts on the compact path in one transaction (one flush)."""
    parts = split_parts(items)
    claim_ids = sorted({item.ref.claim_id for item in items})
    texts = [i.output_text for i in items]
    outputs = (
        OUTPUT_SEPARATOR.join([t or "" for t in texts])
        if outputs_supported and texts.count(None) < len(texts)
        else None
    )
    async with conn.transaction():
        await lock_claims(conn, claim_ids)
        rows = await conn.fetch(
            COMPLETE_COMPACT_SQL[outputs_supported],
            [i.ref.job_id for i in items],
            [i.ref.run_lease for i in items],
            [i.ref.claim_id for i in items],
            [i.lane_seq for i in items],
            [i.attempt for i in items],
            parts,
            outputs,
            claim_ids,
        )
        written = {r["job_id"]: Outcome(r["outcome"]) for r in rows}
        stated = [i for i in items if i.has_state and written.get(i.ref.job_id) is Outcome.WRITTEN]
        if stated:
            await conn.execute(
                DROP_ATTEMPT_STATES,
                [i.ref.job_id for i in stated],
                [i.ref.run_lease for i in stated],
            )
    return {i.ref.key: written.get(i.ref.job_id, Outcome.STALE) for i in items}


@dataclass(frozen=True)
class OpenAttempt:
    """The ready row of an attempt this transaction just closed."""

    row: asyncpg.Record

    @property
    def payload(self) -> Payload | None:
        value: Payload | None = self.row["payload"]
        return value

    @property
    def dlq_enabled(self) -> bool:
        return bool(self.row["dlq_enabled"])

    @property
    def stored_progress(self) -> Any:
        return self.row["stored_progress"]


async def close_if_open(conn: Conn, ref: AttemptRef, outcome: str) -> OpenAttempt | None:
    """Within a transaction holding ``ref``'s lock: write the closure, or None when stale."""
    row = await conn.fetchrow(CLOSE_IF_OPEN, ref.job_id, ref.run_lease, ref.claim_id, outcome)
    return None if row is None else OpenAttempt(row)


async def closed_with(conn: Conn, ref: AttemptRef) -> str | None:
    value: str | None = await conn.fetchval(CLOSED_WITH, ref.job_id, ref.run_lease, ref.claim_id)
    return value


async def write_done(
    conn: Conn,
    ref: AttemptRef,
    *,
    state: str,
    attempt: int,
    payload: Payload | None,
    output_text: str | None,
    outputs_supported: bool,
) -> None:
    if outputs_supported:
        await conn.execute(
            WRITE_DONE_SQL[True], ref.job_id, ref.run_lease, state, attempt, payload, output_text
        )
    else:
        await conn.execute(
            WRITE_DONE_SQL[False], ref.job_id, ref.run_lease, state, attempt, payload
        )


async def write_deferred(
    conn: Conn,
    ref: AttemptRef,
    *,
    state: str,
    attempt: int,
    run_at: datetime,
    attempted_at: datetime | None,
    payload: Payload | None,
) -> None:
    await conn.execute(
        WRITE_DEFERRED, ref.job_id, ref.run_lease, state, attempt, run_at, attempted_at, payload
    )


async def write_dlq(
    conn: Conn,
    ref: AttemptRef,
    *,
    attempt: int,
    attempted_at: datetime | None,
    payload: Payload | None,
    reason: str,
) -> None:
    await conn.execute(WRITE_DLQ, ref.job_id, ref.run_lease, attempt, attempted_at, payload, reason)
