"""The tab counts: jobs per state, exact up to a cap and a lower bound above it.

The console reads these with every page and every refresh interval, so their cost must not
grow with history. Each state is counted by reading at most ``cap + 1`` of its rows (or index
entries): a state with at most ``cap`` jobs gets its exact number; a state with more is
reported as ``cap`` and listed in ``StateCounts.capped``, meaning "at least ``cap``" (the
console shows ``10,000+``).

The terminal states (completed, failed, cancelled) have a lower cap, ``TERMINAL_COUNT_CAP``
(the console shows ``1,000+``): they are the ones that grow with history, and reading 10,001
index entries for each of completed and failed was most of the cost at a million jobs
(EXPLAIN ANALYZE: 2.9 ms each of 8 ms; ``counts()`` 6.0 ms against 1.8 ms at 10,000 jobs,
x2.7). At 1,000 it is 2.3 ms against 1.4 ms (x1.6, ``benchmarks/README.md``). The live
states keep the higher cap: they are bounded by the work in flight, and their exact size
matters most during an incident.

Compact completions are counted from the newest completion batches (``max_job_id`` order, an
index walk) by summing their ``completed_count``: at most ``batches + 1`` batch rows (by
default the terminal cap plus one), each holding at least one job, so reading them all either
counts every batch or proves more than the cap. This read is what still grows (1,001 batch
rows at a million jobs, 157 at 10,000: about 0.8 ms); reading fewer would make a completed
count below the cap a lower bound (``101+`` where there are 5,000), so it stays. Deleted
compact completions (tombstones) are subtracted only when they belong to a batch that was
counted: a tombstone can outlive its batch (it is written into the slot that was current at
delete time, and the batch's older slot may be pruned first), and subtracting such a
tombstone made the completed count too low.

The running and waiting counts start from the open attempts above the rescue horizon
(``sql_shared.OPEN_ATTEMPTS``), which is bounded by the work in flight, not by history.

``Client.count_matching`` does not use any of this: it counts the ids a bulk action would
touch, exactly, because it lists them.
"""

from __future__ import annotations

from datetime import datetime

import asyncpg

from storage.db.pool import Conn
from storage.db.sql import OPEN_ATTEMPTS
from storage.values.models import TERMINAL_STATES, JobState, StateCounts

COUNT_CAP = 10_000
"""Above this many jobs in a state the tab counts say "at least ``COUNT_CAP``"."""
TERMINAL_COUNT_CAP = 1_000
"""The cap for completed, failed and cancelled (history, not work in flight)."""
COMPACT_BATCHES_READ = TERMINAL_COUNT_CAP
"""Compact completion batches summed for the completed count (newest first)."""


# $1: rows to read per live state (cap + 1), $3 per terminal state (terminal cap + 1), $2
# compact batches. Each count reads at most its limit of rows, so a result equal to the limit
# means "more than the cap". $4 since and $5 before bound each state's time column (NULL: no
# bound), the columns ``storage.read.listing_filter`` names; each is indexed or bounded by the work
# in flight, so a count under a time range reads at most its limit of entries too.
def _window(column: str) -> str:
    return (
        f"($4::timestamptz IS NULL OR {column} >= $4)"
        f" AND ($5::timestamptz IS NULL OR {column} < $5)"
    )


COUNTS = f"""
WITH {OPEN_ATTEMPTS},
newest_batches AS MATERIALIZED (
    SELECT b.batch_id, b.max_job_id, b.min_job_id, b.completed_count
      FROM receipt_completion_batches b
     WHERE {_window("b.finalized_at")}
     ORDER BY b.max_job_id DESC, b.batch_id DESC
     LIMIT $2
), recent_tombstones AS MATERIALIZED (
    -- A tombstone below the oldest counted batch's min_job_id cannot belong to it.
    SELECT t.job_id, t.run_lease FROM receipt_completion_tombstones t
     WHERE t.job_id >= (SELECT min(min_job_id) FROM newest_batches)
     LIMIT $3
)
SELECT
  (SELECT count(*) FROM (SELECT 1 FROM deferred_jobs
                          WHERE state = 'scheduled' AND {_window("run_at")}
                          LIMIT $1) x) AS scheduled,
  (SELECT count(*) FROM (SELECT 1 FROM deferred_jobs
                          WHERE state = 'retryable' AND {_window("run_at")}
                          LIMIT $1) x) AS retryable,
  (SELECT count(*) FROM (SELECT 1 FROM queue_lanes l
                          CROSS JOIN LATERAL (
                              SELECT 1 FROM ready_entries r
                               WHERE r.queue = l.queue AND r.priority = l.priority
                                 AND r.lane_seq >= l.claim_seq
                                 AND {_window("r.run_at")}
                                 AND NOT EXISTS (SELECT 1 FROM ready_tombstones t
                                                  WHERE t.job_id = r.job_id
                                                    AND t.run_lease = r.run_lease)
                               ORDER BY r.lane_seq LIMIT $1) r
                          LIMIT $1) x) AS available,
  (SELECT count(*) FROM (SELECT 1 FROM open o
                          WHERE {_window("o.claimed_at")}
                            AND NOT EXISTS (SELECT 1 FROM attempt_state s
                                             WHERE s.job_id = o.job_id
                                               AND s.run_lease = o.run_lease
                                               AND s.state = 'waiting_external')
                          LIMIT $1) x) AS running,
  (SELECT count(*) FROM (SELECT 1 FROM open o JOIN attempt_state s USING (job_id, run_lease)
                          WHERE s.state = 'waiting_external' AND {_window("o.claimed_at")}
                          LIMIT $1) x) AS waiting_external,
  (SELECT count(*) FROM (SELECT 1 FROM done_entries
                          WHERE state = 'completed' AND {_window("finalized_at")}
                          LIMIT $3) x) AS completed,
  (SELECT count(*) FROM (SELECT 1 FROM done_entries
                          WHERE state = 'failed' AND {_window("finalized_at")}
                          LIMIT $3) x) AS failed,
  (SELECT count(*) FROM (SELECT 1 FROM done_entries
                          WHERE state = 'cancelled' AND {_window("finalized_at")}
                          LIMIT $3) x) AS cancelled,
  (SELECT count(*) FROM (SELECT 1 FROM dlq_entries
                          WHERE {_window("dlq_at")} LIMIT $1) x) AS dlq,
  (SELECT count(*) FROM newest_batches) AS batches_read,
  (SELECT COALESCE(sum(completed_count), 0) FROM newest_batches) AS compact_completed,
  (SELECT count(*) FROM recent_tombstones) AS tombstones_read,
  (SELECT count(*) FROM recent_tombstones t
    WHERE EXISTS (SELECT 1 FROM newest_batches n
                    JOIN receipt_completion_batches b
                      ON b.max_job_id = n.max_job_id AND b.batch_id = n.batch_id
                   WHERE t.job_id BETWEEN n.min_job_id AND n.max_job_id
                     AND b.job_ids @> ARRAY[t.job_id]
                     AND b.run_leases[array_position(b.job_ids, t.job_id)] = t.run_lease)
  ) AS compact_deleted
"""


async def counts(
    conn: Conn,
    *,
    cap: int = COUNT_CAP,
    terminal_cap: int = TERMINAL_COUNT_CAP,
    batches: int = COMPACT_BATCHES_READ,
    since: datetime | None = None,
    before: datetime | None = None,
) -> StateCounts:
    """Jobs per state: exact up to the cap, "at least the cap" above it (``capped``).

    The cap is ``cap`` for the live states and the DLQ, ``min(cap, terminal_cap)`` for
    completed, failed and cancelled. Compact completions are summed over the ``batches + 1``
    newest completion batches (one more, to learn whether there are more); with more than
    ``batches`` batches, the completed count is a lower bound. ``since``/``before`` count
    only the jobs whose time column falls in that range (``storage.read.listing_filter``).
    """
    if cap < 1 or terminal_cap < 1 or batches < 1:
        raise ValueError("the count caps and the batches read must be at least 1")
    ended_cap = min(cap, terminal_cap)
    row = await conn.fetchrow(COUNTS, cap + 1, batches + 1, ended_cap + 1, since, before)
    assert row is not None
    by_state: dict[JobState, int] = {}
    capped: set[JobState] = set()
    for state in JobState:
        state_cap = ended_cap if state in TERMINAL_STATES else cap
        n = int(row[state.value])
        exact = n <= state_cap
        if state is JobState.COMPLETED:
            n, exact = _completed(n, row, state_cap, batches)
            exact = exact and n <= state_cap  # as for every state: above the cap, "cap+"
        by_state[state] = min(n, state_cap)
        if not exact:
            capped.add(state)
    dlq = int(row["dlq"])
    return StateCounts(
        by_state=by_state,
        dlq=min(dlq, cap),
        capped=frozenset(capped),
        dlq_capped=dlq > cap,
    )


def _completed(general: int, row: asyncpg.Record, cap: int, batches: int) -> tuple[int, bool]:
    """General-path rows (at most ``cap + 1`` read) plus the compact completions of the batches
    read, minus those of them deleted. Exact only when every batch and tombstone was read."""
    every_batch = int(row["batches_read"]) <= batches
    every_tombstone = int(row["tombstones_read"]) <= cap
    compact = int(row["compact_completed"]) - int(row["compact_deleted"])
    if not every_tombstone:
        # More tombstones than were read could belong to the counted batches: count none of
        # their jobs rather than risk a number that is too high.
        compact = 0
    exact = general <= cap and every_batch and every_tombstone
    return general + compact, exact
