"""General-path completions in one statement: the attempts' guard, their closure rows, their
done rows with outputs, their attempt state and their unique keys, for one attempt or many.

The rule is ``attempt_writes``'s: the caller holds the attempts' advisory locks (``lock``:
their claim batches shared, then their jobs exclusively, each ascending), and the statement
writes only for attempts still open (claimed, no closure row, in no compact completion
batch). An attempt that is not open gets nothing: its outcome is ``ALREADY`` when its own
executor closed it (a flush retried after a lost acknowledgement), else ``STALE``.

One transaction of four statements for any number of attempts: BEGIN, the locks, ``COMPLETE``
and COMMIT. The batcher flushes the runtime's general completions through
``lock_and_write_many`` (in its flush's transaction); a completion with staged follow-ups
(``attempt_writes.complete_general``) and an external completion (``callbacks``, which adds
its callback guard and the notice) run the same statement for one attempt.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg

from storage.db.pool import Conn
from storage.db.sql import LOCK_ATTEMPTS, with_or_without
from storage.finalize.rules import outcome_of_rewrite
from storage.finalize.types import AttemptKey, AttemptRef, GeneralCompletion, Outcome
from storage.values.names import CHANNEL_PREFIXES

# $1..$5: the attempts and what they publish; $6: the closure outcome; $7: a callback id the
# attempt must still be waiting for (external completion), else NULL; $8: the attempts' claim
# batches. The claim batches and their compact completions are read once, by claim_id, and
# materialized (as in ``compact_writes``): probed per attempt, a plan can read a partition of
# batches per attempt. The done row carries the ready row's payload only when completion
# changed it (progress is cleared).
COMPLETE = """
WITH req AS (
    SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::int[], $5::json[])
        AS q(job_id, run_lease, claim_id, attempt, output)
), claimed AS MATERIALIZED (
    SELECT cb.claim_id, u.job_id, u.run_lease
      FROM claim_batches cb, unnest(cb.job_ids, cb.run_leases) AS u(job_id, run_lease)
     WHERE cb.claim_id = ANY($8::bigint[])
), done_before AS MATERIALIZED (
    SELECT b.claim_id, u.job_id
      FROM receipt_completion_batches b, unnest(b.job_ids) AS u(job_id)
     WHERE b.claim_id = ANY($8::bigint[])
), open AS MATERIALIZED (
    SELECT q.claim_id, q.attempt AS done_attempt, q.output, r.*
      FROM req q
      JOIN claimed c USING (claim_id, job_id, run_lease)
      JOIN ready_entries r ON r.job_id = q.job_id AND r.run_lease = q.run_lease
     WHERE (q.claim_id, q.job_id) NOT IN (SELECT claim_id, job_id FROM done_before)
       AND NOT EXISTS (SELECT 1 FROM attempt_closures c
                        WHERE c.job_id = q.job_id AND c.run_lease = q.run_lease)
       AND ($7::text IS NULL
            OR EXISTS (SELECT 1 FROM attempt_state s
                        WHERE s.job_id = q.job_id AND s.run_lease = q.run_lease
                          AND s.callback_id = $7 AND NOT s.callback_resolved))
), closure AS (
    INSERT INTO attempt_closures (slot, job_id, run_lease, claim_id, outcome, closed_at)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'claim'), job_id, run_lease,
           claim_id, $6, now()
      FROM open
), dropped AS (
    DELETE FROM attempt_state s USING open o
     WHERE s.job_id = o.job_id AND s.run_lease = o.run_lease
), done AS (
    INSERT INTO done_entries (slot, job_id, run_lease, state, attempt, finalized_at,
                              payload %(output_column)s)
    SELECT (SELECT current_slot FROM ring_state WHERE ring = 'queue'), job_id, run_lease,
           'completed', done_attempt, now(),
           CASE WHEN payload ? 'progress' THEN NULLIF(payload - 'progress', '{}'::jsonb) END
           %(output_value)s
      FROM open
)%(release)s
%(answer)s
"""

# A keyed job stops holding its key unless it holds it when completed too (``unique``).
RELEASE_KEYS = """, released AS (
    UPDATE unique_keys k SET holding = false
      FROM open o
     WHERE o.unique_key IS NOT NULL AND k.job_id = o.job_id AND k.holding
       AND NOT ('completed' = ANY(k.states))
)"""

# Many attempts: which were written, and how the others were closed before (if they were),
# probed per attempt not written (none, usually) so no plan reads every closure.
ANSWER_OUTCOMES = """
SELECT job_id, run_lease, NULL::text AS closed_with FROM open
UNION ALL
SELECT q.job_id, q.run_lease, c.outcome
  FROM req q
  JOIN LATERAL (SELECT c.outcome FROM attempt_closures c
                 WHERE c.job_id = q.job_id AND c.run_lease = q.run_lease
                   AND c.claim_id = q.claim_id
                 LIMIT 1) c ON true
 WHERE NOT EXISTS (SELECT 1 FROM open o WHERE o.job_id = q.job_id)
"""

# One external completion: the completed row as ``reads`` would build it (no re-read), and
# the notice that tells a handler still waiting on the callback that its attempt ended.
ANSWER_ROW = f"""
SELECT o.job_id, o.kind, o.queue, o.args, o.priority, o.done_attempt AS attempt,
       o.max_attempts, o.run_lease, o.run_at, o.created_at, o.unique_key,
       COALESCE(CASE WHEN o.payload ? 'progress'
                     THEN NULLIF(o.payload - 'progress', '{{}}'::jsonb) END,
                o.payload) AS payload,
       now() AS finalized_at,
       pg_notify('{CHANNEL_PREFIXES["callback"]}' || current_schema(), $7) IS NULL AS notified
  FROM open o
"""


def _spelled(answer: str) -> dict[tuple[bool, bool], str]:
    """``COMPLETE`` ending in ``answer``, by (output columns present, the jobs are keyed)."""
    return {
        (outputs, keyed): with_or_without(
            COMPLETE,
            output_column=(", output", ""),
            output_value=(", output", ""),
            release=RELEASE_KEYS if keyed else "",
            answer=answer,
        )[outputs]
        for outputs in (True, False)
        for keyed in (True, False)
    }


COMPLETE_MANY_SQL = _spelled(ANSWER_OUTCOMES)
COMPLETE_EXTERNAL_SQL = _spelled(ANSWER_ROW)


async def lock(conn: Conn, refs: Sequence[AttemptRef]) -> None:
    """The attempts' locks, in the order every taker uses: claim batches shared, then jobs
    exclusively, each ascending (``sql_shared``)."""
    claims = sorted({r.claim_id for r in refs})
    jobs = sorted({r.job_id for r in refs})
    await conn.execute(LOCK_ATTEMPTS, claims + [-j for j in jobs])


def _arguments(
    items: Sequence[GeneralCompletion], outputs_supported: bool, closure: str, callback: str | None
) -> list[Any]:
    return [
        [i.ref.job_id for i in items],
        [i.ref.run_lease for i in items],
        [i.ref.claim_id for i in items],
        [i.attempt for i in items],
        [i.output_text if outputs_supported else None for i in items],
        closure,
        callback,
        sorted({i.ref.claim_id for i in items}),
    ]


async def write_many(
    conn: Conn, items: Sequence[GeneralCompletion], *, outputs_supported: bool
) -> dict[AttemptKey, Outcome]:
    """Inside a transaction holding the attempts' locks: complete those still open. Answers
    are keyed by attempt, not job: a rescued attempt's late completion can share a flush
    with its job's next attempt."""
    keyed = any(i.keyed for i in items)
    rows = await conn.fetch(
        COMPLETE_MANY_SQL[outputs_supported, keyed],
        *_arguments(items, outputs_supported, "completed", None),
    )
    answers = {AttemptKey(r["job_id"], r["run_lease"]): r["closed_with"] for r in rows}
    return {
        i.ref.key: (
            Outcome.WRITTEN
            if i.ref.key in answers and answers[i.ref.key] is None
            else outcome_of_rewrite(answers.get(i.ref.key))
        )
        for i in items
    }


async def lock_and_write_many(
    conn: Conn, items: Sequence[GeneralCompletion], *, outputs_supported: bool
) -> dict[AttemptKey, Outcome]:
    """Inside a transaction (the batcher's flush): lock many attempts on the general path and
    complete those still open."""
    await lock(conn, [i.ref for i in items])
    return await write_many(conn, items, outputs_supported=outputs_supported)


async def write_external(
    conn: Conn, item: GeneralCompletion, callback_id: str, *, outputs_supported: bool
) -> asyncpg.Record | None:
    """Inside a transaction holding the attempt's lock: complete it if it is still open and
    still waiting for ``callback_id``, and notify the callback's channel. Returns the
    completed row's columns, or None when nothing was written."""
    row: asyncpg.Record | None = await conn.fetchrow(
        COMPLETE_EXTERNAL_SQL[outputs_supported, item.keyed],
        *_arguments([item], outputs_supported, "completed_external", callback_id),
    )
    return row
