"""The compact completion flush: many completions in one transaction, one
``receipt_completion_batches`` row per (claim batch, part) and no per-job row.

A flush takes its claim batches' advisory locks exclusively, in ascending order, then writes
only the attempts still open (see ``attempt_writes`` for the guard). The batcher calls it.
"""

from __future__ import annotations

from collections.abc import Iterable

import asyncpg

from storage.db import session_functions
from storage.db.pool import Conn
from storage.db.sql import LOCK_CLAIM_BATCHES_FOR_FLUSH, with_or_without
from storage.finalize.types import CompactCompletion, Outcome
from storage.values.codec import utf8_size

MAX_BATCH_OUTPUT_BYTES = 64 * 1024
OUTPUT_SEPARATOR = "\x1e"  # ASCII record separator; see COMPLETE_COMPACT

# Compact completion: one receipt_completion_batches row per (claim batch, part) and no
# per-job row. Outputs are aggregated in the same order as job_ids, so a job that drops out
# as stale shifts nothing.
# The request's columns come as array literals in text ('{1,2,3}'): asyncpg checks every
# element of an array parameter against three abstract base classes, a Python call each. Each
# attempt's lane_seq and attempt are read from its claim batch, which recorded them.
# $4 (parts) is NULL when the flush needs one row per claim batch: every part is then 0.
# $5 carries the outputs as one text, OUTPUT_SEPARATOR between them and '' for "none" (NULL
# when the flush has none): a json[] parameter cost the client 0.5 µs more per job to encode.
# The separator, an ASCII control character, cannot appear raw in JSON text, and JSON text is
# never empty.
# The answer is one row: the attempts written and those this flush finds already completed
# (a retry after a lost acknowledgement), each as job ids with their run leases; any other
# request is stale. A flush can hold two attempts of one job (a rescued attempt's late
# completion and the next attempt's), so an outcome belongs to an attempt, not to a job id.
COMPLETE_COMPACT = """
WITH req AS (
    SELECT * FROM unnest($1::text::bigint[], $2::text::bigint[], $3::text::bigint[],
                         $4::text::int[], string_to_array($5::text, E'\\x1e', '')::json[])
        AS r(job_id, run_lease, claim_id, part, output)
-- MATERIALIZED: inlined, the planner re-ran these unnests once per request row, which made
-- a flush quadratic in its claim batch (120 ms for 512 jobs instead of 18 ms).
), claimed AS MATERIALIZED (
    SELECT cb.claim_id, u.job_id, u.run_lease, u.lane_seq, u.attempt, cb.queue, cb.priority,
           cb.lane_lo, cb.lane_hi
      FROM claim_batches cb,
           unnest(cb.job_ids, cb.run_leases, cb.lane_seqs, cb.attempts)
           AS u(job_id, run_lease, lane_seq, attempt)
     WHERE cb.claim_id = ANY($6::bigint[])
), done_before AS MATERIALIZED (
    SELECT b.claim_id, u.job_id
      FROM receipt_completion_batches b, unnest(b.job_ids) AS u(job_id)
     WHERE b.claim_id = ANY($6::bigint[])
), closed AS (
    SELECT job_id, run_lease FROM attempt_closures WHERE claim_id = ANY($6::bigint[])
), open AS (
    SELECT req.*, c.lane_seq, c.attempt, c.queue, c.priority, c.lane_lo, c.lane_hi
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
     GROUP BY o.claim_id, COALESCE(o.part, 0), o.queue, o.priority, o.lane_lo, o.lane_hi
    RETURNING job_ids, run_leases
)
SELECT COALESCE(array_agg(u.job_id), '{}') AS written,
       COALESCE(array_agg(u.run_lease), '{}') AS written_leases,
       ARRAY(SELECT d.job_id FROM done_before d JOIN req USING (claim_id, job_id)) AS already,
       ARRAY(SELECT req.run_lease FROM done_before d JOIN req USING (claim_id, job_id))
       AS already_leases
  FROM ins, unnest(ins.job_ids, ins.run_leases) AS u(job_id, run_lease)
"""
COMPLETE_COMPACT_SQL = with_or_without(
    COMPLETE_COMPACT,
    outputs_column=(", outputs", ""),
    outputs_value=(
        ", CASE WHEN bool_or(o.output IS NOT NULL)"
        " THEN array_agg(o.output ORDER BY o.lane_seq, o.job_id) END",
        "",
    ),
)

DROP_ATTEMPT_STATES = """
DELETE FROM attempt_state s USING unnest($1::bigint[], $2::bigint[]) AS u(job_id, run_lease)
 WHERE s.job_id = u.job_id AND s.run_lease = u.run_lease
"""


# The batcher's flush in one round trip (``storage.db.session_functions``): the locks, then the
# flush, as statements of a session function, each with its own snapshot, so the flush still
# sees what the locks' earlier holders committed. Its arguments are COMPLETE_COMPACT's, in
# order; the call is its own transaction, so the batcher's asynchronous commit
# (``storage.runtime.batcher.BEGIN_FLUSH``) is a set_config local to it. A flush that also
# drops attempt_state rows takes the transaction of statements instead.
FLUSH_FUNCTION = """
CREATE OR REPLACE FUNCTION pg_temp.%(name)s(text, text, text, text, text, bigint[])
RETURNS TABLE (written bigint[], written_leases bigint[], already bigint[],
               already_leases bigint[])
LANGUAGE plpgsql AS $flush$
#variable_conflict use_column
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    PERFORM %(lock)s;
    RETURN QUERY %(flush)s;
END
$flush$
"""
FLUSH_FUNCTIONS = {
    outputs: (
        name,
        FLUSH_FUNCTION
        % {
            "name": name,
            "lock": LOCK_CLAIM_BATCHES_FOR_FLUSH.removeprefix("SELECT ").replace("$1::", "$6::"),
            "flush": COMPLETE_COMPACT_SQL[outputs],
        },
        f"SELECT * FROM pg_temp.{name}($1, $2, $3, $4, $5, $6)",
    )
    for outputs, name in ((True, "awa_flush_compact"), (False, "awa_flush_compact_no_outputs"))
}


async def lock_claims(conn: Conn, claim_ids: list[int]) -> None:
    """A compact flush's locks: its claim batches (distinct, ascending), exclusively, and a
    generic plan for the flush statement (see ``LOCK_CLAIM_BATCHES_FOR_FLUSH``)."""
    await conn.execute(LOCK_CLAIM_BATCHES_FOR_FLUSH, claim_ids)


def split_parts(items: list[CompactCompletion], joined: str | None) -> list[int] | None:
    """Part number per item: a new batch row once a claim's outputs pass 64 KiB of text; None
    when every part is 0.

    ``joined`` is every output in one text (separators included, so never shorter): when it
    fits, no claim can need a second row, and no size is taken per item."""
    if joined is None or utf8_size(joined) <= MAX_BATCH_OUTPUT_BYTES:
        return None
    parts = [0] * len(items)
    sizes = [0 if i.output_text is None else utf8_size(i.output_text) for i in items]
    order = sorted(range(len(items)), key=lambda i: (items[i].claim_id, items[i].lane_seq))
    claim, part, size = None, 0, 0
    for i in order:
        item = items[i]
        if item.claim_id != claim:
            claim, part, size = item.claim_id, 0, 0
        text_size = sizes[i]
        if size and size + text_size > MAX_BATCH_OUTPUT_BYTES:
            part, size = part + 1, 0
        size += text_size
        parts[i] = part
    return parts


def array_text(values: Iterable[int]) -> str:
    """An integer array literal, ``{1,2,3}``: sent as text, it costs no Python call per element."""
    return "{" + ",".join(map(str, values)) + "}"


async def complete_compact(
    conn: Conn, items: list[CompactCompletion], *, outputs_supported: bool
) -> list[Outcome]:
    """``write_compact`` in a transaction of its own, committed synchronously (the batcher
    begins its flushes' own, ``storage.runtime.batcher.BEGIN_FLUSH``)."""
    async with conn.transaction():
        return await write_compact(conn, items, outputs_supported=outputs_supported)


async def write_compact(
    conn: Conn, items: list[CompactCompletion], *, outputs_supported: bool
) -> list[Outcome]:
    """Inside a transaction: complete many attempts on the compact path (one flush); the
    outcomes come in the order of ``items``."""
    args, claims, stated = _request(items, outputs_supported)
    await lock_claims(conn, claims)
    row = await conn.fetchrow(COMPLETE_COMPACT_SQL[outputs_supported], *args)
    assert row is not None  # one row, always
    outcomes = _outcomes(items, row)
    if stated:
        done = [
            i for i, o in zip(items, outcomes, strict=True) if i.has_state and o is Outcome.WRITTEN
        ]
        if done:
            await conn.execute(
                DROP_ATTEMPT_STATES, [i.job_id for i in done], [i.run_lease for i in done]
            )
    return outcomes


async def flush_in_one_call(
    conn: Conn, items: list[CompactCompletion], *, outputs_supported: bool
) -> list[Outcome] | None:
    """The batcher's flush of ``items`` as one call of the session's flush function, committed
    asynchronously (``FLUSH_FUNCTION``); None, having sent nothing, where it cannot be: the
    session may not make the function, or some attempt has a state row to drop."""
    args, _, stated = _request(items, outputs_supported)
    name, create, call = FLUSH_FUNCTIONS[outputs_supported]
    if stated or not await session_functions.ready(conn, name, create):
        return None
    row = await conn.fetchrow(call, *args)
    assert row is not None  # one row, always
    return _outcomes(items, row)


def _request(
    items: list[CompactCompletion], outputs_supported: bool
) -> tuple[tuple[str, str, str, str | None, str | None, list[int]], list[int], bool]:
    """COMPLETE_COMPACT's arguments for ``items``, their claim batches (ascending), and
    whether some attempt has a state row to drop."""
    job_ids, run_leases, claim_ids, _, texts, stated = zip(*items, strict=True)
    claims = sorted(set(claim_ids))
    missing = texts.count(None)
    outputs = (
        None
        if not outputs_supported or missing == len(texts)
        else OUTPUT_SEPARATOR.join([t or "" for t in texts] if missing else texts)
    )
    parts = split_parts(items, outputs)
    args = (
        array_text(job_ids),
        array_text(run_leases),
        array_text(claim_ids),
        None if parts is None else array_text(parts),
        outputs,
        claims,
    )
    return args, claims, any(stated)


def _outcomes(items: list[CompactCompletion], row: asyncpg.Record) -> list[Outcome]:
    """Each item's outcome, matched by attempt (job id, run lease), from the flush's answer."""
    if len(row["written"]) == len(items):  # the common case: every request written
        return [Outcome.WRITTEN] * len(items)
    wrote = set(zip(row["written"], row["written_leases"], strict=True))
    found = set(zip(row["already"], row["already_leases"], strict=True))
    return [
        Outcome.WRITTEN
        if (i.job_id, i.run_lease) in wrote
        else Outcome.ALREADY
        if (i.job_id, i.run_lease) in found
        else Outcome.STALE
        for i in items
    ]
