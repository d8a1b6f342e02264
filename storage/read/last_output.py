"""The last good output of a kind: the most recent completed output of the same kind (and,
when given, queue), what a failed attempt's kept output is compared with ("is this normal for
this kind?").

Bounded like the queues summary (``storage.read.queues``): it walks the newest
``BATCH_SCAN_CAP`` compact completion batches and the newest ``DONE_SCAN_CAP`` completed done
entries by finish time through the ``finalized_at`` indexes, newest first, and stops at the
first job of the kind with an output. A kind not seen there reads as None with the bound
(``LastGoodOutput`` is absent: "none among the latest completions read"), never as a scan of
the whole history. Inside a batch the items are walked from the last one down and only a row
of the kind reads its element of the output array (``outputs[i]``), so a batch's array is not
unnested. Deleted (tombstoned) jobs are skipped. Both paths are read in one snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from storage.db.pool import Conn, snapshot
from storage.read.listing import NO_OUTPUTS
from storage.values.errors import InvalidFilter
from storage.values.names import check_stored_name

BATCH_SCAN_CAP = 200
"""Compact completion batches read at most (newest first; each holds up to a claim's jobs)."""
DONE_SCAN_CAP = 2_000
"""General-path completed done entries read at most (newest first)."""

# The newest batches (of every queue: the bound counts what is read, so a quiet queue among busy
# ones finds none rather than walking the whole index), those of the queue ($2; NULL: any),
# then per batch its items from the last down; the kind is checked first (an index probe per
# item), so only a row of the kind reads its element of the array (the CASE keeps the planner
# from testing the array below the join). The nested loop keeps the batches' order: LIMIT 1
# stops at the first batch with a match.
LAST_COMPACT = """
SELECT x.job_id, b.queue, b.finalized_at, x.output
  FROM (SELECT * FROM receipt_completion_batches
         ORDER BY finalized_at DESC, max_job_id DESC LIMIT $3) b
 CROSS JOIN LATERAL (
        SELECT b.job_ids[i] AS job_id, b.outputs[i] AS output
          FROM generate_series(cardinality(b.job_ids), 1, -1) AS i
          JOIN ready_entries r ON r.job_id = b.job_ids[i] AND r.run_lease = b.run_leases[i]
         WHERE ($2::text IS NULL OR b.queue = $2)
           AND CASE WHEN r.kind = $1 THEN b.outputs[i] IS NOT NULL ELSE false END
           AND NOT EXISTS (SELECT 1 FROM receipt_completion_tombstones t
                            WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)
         LIMIT 1) x
 ORDER BY b.finalized_at DESC, b.max_job_id DESC
 LIMIT 1
"""

# The newest completed done entries (the (state, finalized_at, job_id) index, v006), one index
# probe of ready_entries each for the kind and queue.
LAST_DONE = """
SELECT d.job_id, r.queue, d.finalized_at, d.output
  FROM (SELECT * FROM done_entries WHERE state = 'completed'
         ORDER BY finalized_at DESC, job_id DESC LIMIT $3) d
 CROSS JOIN LATERAL (
        SELECT r.queue FROM ready_entries r
         WHERE r.job_id = d.job_id AND r.run_lease = d.run_lease AND r.kind = $1
           AND ($2::text IS NULL OR r.queue = $2)
         LIMIT 1) r
 WHERE d.output IS NOT NULL
 ORDER BY d.finalized_at DESC, d.job_id DESC
 LIMIT 1
"""


@dataclass(frozen=True)
class LastGoodOutput:
    """The most recent completed output of a kind: which job, where, when, and the output as
    stored (``output_text``, exact JSON text)."""

    kind: str
    queue: str
    job_id: int
    finalized_at: datetime
    output_text: str
    storage_path: str  # "compact" | "general"


LAST_GOOD_BOUND = (
    f"the latest {BATCH_SCAN_CAP:,} compact completion batches and "
    f"{DONE_SCAN_CAP:,} general-path completions"
)
"""What a read that found nothing looked at (a person is told, not shown "none")."""


async def last_good_output(
    conn: Conn,
    kind: str,
    queue: str | None = None,
    *,
    outputs: bool = True,
    caps: tuple[int, int] = (BATCH_SCAN_CAP, DONE_SCAN_CAP),
) -> LastGoodOutput | None:
    """The newest completed output of ``kind`` (in ``queue`` when given) among
    ``LAST_GOOD_BOUND``, in one snapshot. A schema without output columns (v001) is refused:
    it keeps none to find. ``caps`` (batches, done entries) is for tests of the bound."""
    check_stored_name(kind, "Kind")
    if queue is not None:
        check_stored_name(queue, "Queue")
    if not outputs:
        raise InvalidFilter(NO_OUTPUTS)
    async with snapshot(conn):
        compact = await conn.fetchrow(LAST_COMPACT, kind, queue, caps[0])
        general = await conn.fetchrow(LAST_DONE, kind, queue, caps[1])
    found = [
        LastGoodOutput(kind, r["queue"], r["job_id"], r["finalized_at"], r["output"], path)
        for r, path in ((compact, "compact"), (general, "general"))
        if r is not None
    ]
    return max(found, key=lambda o: (o.finalized_at, o.job_id), default=None)
