"""What storage keeps about how a job's attempts ended, for ``storage.values.provenance``.

One statement, run by ``Client.explain_job`` in the snapshot that read the job
(``storage.read.one_job.read_job``), so the facts and the row are of one moment. Nothing new is
written for it: the job's latest closure row (index ``(job_id, run_lease)``), its latest ready
row's slot, a compact tombstone, and the queue ring's position. The closure lives in the claim
ring, which turns faster than the queue ring: an old job's closure may be pruned already.
"""

from __future__ import annotations

from storage.db.pool import Conn
from storage.values.provenance import JobFacts, Retention

FACTS = """
SELECT c.outcome AS closure, c.run_lease AS closure_lease, c.closed_at,
       (SELECT r.slot FROM ready_entries r WHERE r.job_id = $1
         ORDER BY r.run_lease DESC LIMIT 1) AS ready_slot,
       (SELECT max(t.deleted_at) FROM receipt_completion_tombstones t
         WHERE t.job_id = $1) AS deleted_at,
       g.slot_count, g.current_slot, g.rotated_at, now() AS read_at
  FROM ring_state g
  LEFT JOIN LATERAL (SELECT outcome, run_lease, closed_at FROM attempt_closures
                      WHERE job_id = $1 ORDER BY run_lease DESC LIMIT 1) c ON true
 WHERE g.ring = 'queue'
"""


async def read_facts(
    conn: Conn, job_id: int, *, outputs_supported: bool, retention: Retention
) -> JobFacts:
    """The facts for ``job_id``; call it inside the ``snapshot`` that read the job."""
    r = await conn.fetchrow(FACTS, job_id)
    assert r is not None  # every installed schema has its queue ring
    return JobFacts(
        closure=r["closure"],
        closure_lease=r["closure_lease"],
        closed_at=r["closed_at"],
        ready_slot=r["ready_slot"],
        deleted_at=r["deleted_at"],
        ring_slots=r["slot_count"],
        ring_current=r["current_slot"],
        ring_rotated_at=r["rotated_at"],
        read_at=r["read_at"],
        outputs_supported=outputs_supported,
        retention=retention,
    )
