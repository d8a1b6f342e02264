"""The compact completion flush: many completions in one transaction, one
``receipt_completion_batches`` row per (claim batch, part) and no per-job row.

A flush takes its claim batches' advisory locks exclusively, in ascending order, then writes
only the attempts still open (see ``attempt_writes`` for the guard). The batcher calls it.
"""

from __future__ import annotations

from collections.abc import Iterable

from storage.attempt import AttemptKey, CompactCompletion, Outcome
from storage.db import Conn
from storage.sql_shared import LOCK_CLAIM_BATCHES_FOR_FLUSH

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

DROP_ATTEMPT_STATES = """
DELETE FROM attempt_state s USING unnest($1::bigint[], $2::bigint[]) AS u(job_id, run_lease)
 WHERE s.job_id = u.job_id AND s.run_lease = u.run_lease
"""


async def lock_claims(conn: Conn, claim_ids: Iterable[int]) -> None:
    """A compact flush's locks: its claim batches, exclusively, in ascending order (and a
    generic plan for the flush statement, see ``LOCK_CLAIM_BATCHES_FOR_FLUSH``)."""
    await conn.execute(LOCK_CLAIM_BATCHES_FOR_FLUSH, sorted(set(claim_ids)))


def utf8_size(text: str) -> int:
    """Bytes of ``text`` in UTF-8, without encoding it when it is ASCII (the common case)."""
    return len(text) if text.isascii() else len(text.encode())


def split_parts(items: list[CompactCompletion], joined: str | None) -> list[int]:
    """Part number per item: a new batch row once a claim's outputs pass 64 KiB of text.

    ``joined`` is every output in one text (separators included, so never shorter): when it
    fits, no claim can need a second row, and no size is taken per item."""
    parts = [0] * len(items)
    if joined is None or utf8_size(joined) <= MAX_BATCH_OUTPUT_BYTES:
        return parts
    sizes = [0 if i.output_text is None else utf8_size(i.output_text) for i in items]
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
) -> dict[AttemptKey, Outcome]:
    """Complete many attempts on the compact path in one transaction (one flush)."""
    claim_ids = sorted({item.ref.claim_id for item in items})
    texts = [i.output_text for i in items]
    outputs = (
        OUTPUT_SEPARATOR.join([t or "" for t in texts])
        if outputs_supported and texts.count(None) < len(texts)
        else None
    )
    parts = split_parts(items, outputs)
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
