"""The last good output of a kind: the most recent completed output of the same kind (and,
when given, queue), what a failed attempt's kept output is compared with ("is this normal for
this kind?").

Bounded like the queues summary (``storage.read.queues``): it reads the newest compact
completion batches by finish time holding up to ``COMPACT_SCAN_CAP`` jobs (at most
``BATCH_SCAN_CAP`` batches) and the newest ``DONE_SCAN_CAP`` completed done entries, through
the ``finalized_at`` indexes, newest first, and stops at the first batch or entry with an
output of the kind. A kind not seen there reads as None, and a caller says within what
(``LAST_GOOD_BOUND``: "none among the latest ... completions"), never as a scan of the whole
history. What costs is the kind: neither path stores it, so each candidate is one
ready_entries probe; only jobs that kept an output are candidates, a batch's the last first
(its output array read once, beside its job ids). Deleted (tombstoned) jobs are skipped. Both
paths are read in one statement (one snapshot, one round trip).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from storage.db.pool import Conn
from storage.read.listing import NO_OUTPUTS
from storage.values.errors import InvalidFilter
from storage.values.names import check_stored_name

BATCH_SCAN_CAP = 200
"""Compact completion batches read at most (newest first)."""
COMPACT_SCAN_CAP = 1_000
"""Compact completions read at most: the newest batches holding up to this many jobs."""
DONE_SCAN_CAP = 1_000
"""General-path completed done entries read at most (newest first)."""

# The newest batches (of every queue: the bound counts what is read, so a quiet queue among busy
# ones finds none rather than walking the whole index) up to $4 jobs, those of the queue ($2;
# NULL: any). A nested loop over them keeps their order: LIMIT 1 stops at the first batch with
# a match.
NEWEST_BATCHES = """
(SELECT w.*, sum(w.completed_count) OVER newest - w.completed_count AS jobs_before
   FROM (SELECT batch_id, queue, finalized_at, max_job_id, completed_count, job_ids,
                run_leases, outputs
           FROM receipt_completion_batches
          ORDER BY finalized_at DESC, max_job_id DESC LIMIT $3) w
 WINDOW newest AS (ORDER BY w.finalized_at DESC, w.max_job_id DESC)) b"""
"""The newest $3 batches as ``b``, each with ``jobs_before`` (jobs in newer ones): a read keeps
``b.jobs_before < $4``, the batches holding the newest $4 compact completions."""

KIND_OF = """(
        SELECT r.kind, r.queue FROM ready_entries r
         WHERE r.job_id = %(job)s.job_id AND r.run_lease = %(job)s.run_lease LIMIT 1) r"""
"""A terminal job's kind and queue as ``r``: one index probe (a LIMITed lateral; a join would
read every ready row)."""

NOT_TOMBSTONED = """NOT EXISTS (SELECT 1 FROM receipt_completion_tombstones t
                    WHERE t.job_id = %(job)s.job_id AND t.run_lease = %(job)s.run_lease)"""
"""A compact completion not deleted."""

# Per batch, newest first: its jobs with an output, the last first (the output array is read
# once, beside the job ids), each looked up for its kind (one index probe) until one is of the
# kind and not deleted. Only jobs that kept an output are probed, and a batch whose last such
# job is of the kind costs one probe: the read stops there.
LAST_COMPACT = f"""
SELECT 'compact' AS path, x.job_id, b.queue, b.finalized_at, x.output
  FROM {NEWEST_BATCHES}
 CROSS JOIN LATERAL (
        SELECT o.job_id, o.output, o.n
          FROM (SELECT u.n, u.output, u.job_id, u.run_lease
                  FROM unnest(b.outputs, b.job_ids, b.run_leases) WITH ORDINALITY
                       AS u(output, job_id, run_lease, n)
                 WHERE u.output IS NOT NULL
                 ORDER BY u.n DESC) o
         CROSS JOIN LATERAL {KIND_OF % {"job": "o"}}
         WHERE r.kind = $1 AND {NOT_TOMBSTONED % {"job": "o"}}
         ORDER BY o.n DESC
         LIMIT 1) x
 WHERE b.jobs_before < $4 AND b.outputs IS NOT NULL AND ($2::text IS NULL OR b.queue = $2)
 ORDER BY b.finalized_at DESC, b.max_job_id DESC
 LIMIT 1"""

# The newest completed done entries (the (state, finalized_at, job_id) index, v006); those with
# an output are looked up in ready_entries (one index probe each, the kind and queue checked
# after it so that the probe stops at the row).
NEWEST_DONE = """
(SELECT job_id, run_lease, finalized_at, output FROM done_entries
  WHERE state = 'completed'
  ORDER BY finalized_at DESC, job_id DESC LIMIT %(cap)s) d"""
"""The newest ``cap`` completed done entries as ``d`` (``cap``: the statement's parameter)."""

LAST_DONE = f"""
SELECT 'general' AS path, d.job_id, r.queue, d.finalized_at, d.output
  FROM {NEWEST_DONE % {"cap": "$5"}}
 CROSS JOIN LATERAL {KIND_OF % {"job": "d"}}
 WHERE d.output IS NOT NULL AND r.kind = $1 AND ($2::text IS NULL OR r.queue = $2)
 ORDER BY d.finalized_at DESC, d.job_id DESC
 LIMIT 1"""

# Both paths in one statement (one snapshot, one round trip): $1 kind, $2 queue (NULL: any),
# $3 batches, $4 compact jobs and $5 done entries at most. The newest of the two wins, as the
# batches and the done entries are each ordered (finish time, then job id).
LAST_GOOD = f"""
SELECT path, job_id, queue, finalized_at, output
  FROM (({LAST_COMPACT}) UNION ALL ({LAST_DONE})) found
 ORDER BY finalized_at DESC, job_id DESC
 LIMIT 1
"""


LAST_GOOD_BOUND = (
    f"the latest {COMPACT_SCAN_CAP:,} compact and {DONE_SCAN_CAP:,} general-path completions"
)
"""What a read that found nothing looked at (a person is told, not shown "none")."""


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


async def last_good_output(
    conn: Conn,
    kind: str,
    queue: str | None = None,
    *,
    outputs: bool = True,
    caps: tuple[int, int] = (COMPACT_SCAN_CAP, DONE_SCAN_CAP),
) -> LastGoodOutput | None:
    """The newest completed output of ``kind`` (in ``queue`` when given) among
    ``LAST_GOOD_BOUND``, in one statement. A schema without output columns (v001) is refused:
    it keeps none to find. ``caps`` (compact jobs, done entries) is for tests of the bound."""
    check_stored_name(kind, "Kind")
    if queue is not None:
        check_stored_name(queue, "Queue")
    if not outputs:
        raise InvalidFilter(NO_OUTPUTS)
    r = await conn.fetchrow(LAST_GOOD, kind, queue, BATCH_SCAN_CAP, caps[0], caps[1])
    if r is None:
        return None
    return LastGoodOutput(kind, r["queue"], r["job_id"], r["finalized_at"], r["output"], r["path"])
