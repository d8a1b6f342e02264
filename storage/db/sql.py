"""SQL that more than one storage module runs: the shared CTE fragments, the notifications
and every advisory lock, with its key.

Naming: a CTE fragment is named after the rows it yields and is spliced in as
``WITH {NAME}``; a notification is ``NOTIFY_`` followed by its channel; a lock statement is
``LOCK_``, ``TRY_LOCK_`` or ``UNLOCK_`` followed by what it locks; the parts of a key are
``<WHAT>_LOCK_CLASS`` and ``<WHAT>_LOCK_OBJECT``. Only this module spells a key. The key
constants are spliced into the statements (they are ours, not values passed in), so a call
site cannot pair a statement with the wrong key.

Advisory-lock keys. PostgreSQL keeps its two advisory key spaces apart (one ``bigint``, or two
``int4``; ``pg_locks`` tells them apart by ``objsubid``), and storage uses each for one thing:

- Row locks, one ``bigint``, transaction-scoped: a claim batch is keyed by its ``claim_id``
  (positive: ``claim_id_seq`` starts at 1), a job by minus its ``job_id``, so the two never
  collide. A compact flush takes its claim batches exclusively (ascending); a single-attempt
  transition takes its claim batch shared and then its job exclusively; a general-path flush
  takes its claim batches shared (ascending) and then its jobs exclusively (ascending).
  Transitions of different jobs of one claim batch run in parallel, and any of them excludes
  a compact flush of that batch.
- Role locks, two ``int4`` (class, object): the class names the role, the object what it is
  held for. Migrations: ``MIGRATIONS_LOCK_CLASS`` (0x617761, ASCII "awa") with object 1, one
  runner per database, transaction-scoped. Maintenance leader: ``MAINTENANCE_LEADER_LOCK_CLASS``
  (0x617261, ASCII "ara") with object ``hashtext(current_schema())``, one leader per
  queue-storage schema, held by a session for one pass (``Client.run_maintenance``) or, by a
  runtime, across its passes (``storage.ops.leadership``). The leader's class differs from "awa"
  by a letter; it stays as it is, since a leader of an earlier release still running during an
  upgrade takes this key. The object is a hash, so it does not grow with the schema name
  (``storage.values.names`` and migration v003's header say so; no migration takes a lock itself).
"""

from __future__ import annotations

from collections.abc import Mapping

from storage.values.names import CHANNEL_PREFIXES


def with_or_without(template: str, /, **parts: str | tuple[str, str]) -> Mapping[bool, str]:
    """A statement with some columns (``[True]``) and without them (``[False]``), both spelled
    once, at import: the output columns of migration v002 (``[outputs]``, wherever a schema
    may not have them yet), or a keyed insert's ``unique_key``.

    Each ``%(name)s`` in ``template`` is replaced by its part: a pair is (with the columns,
    without them), a plain string is the same in both. Other ``%(...)s`` placeholders are left
    for the caller to fill (a list page's filter and order, for instance).
    """
    spelled = {}
    for present in (True, False):
        text = template
        for name, part in parts.items():
            placeholder = f"%({name})s"
            assert placeholder in template, f"{placeholder} is not in the statement"
            chosen = part if isinstance(part, str) else part[0 if present else 1]
            text = text.replace(placeholder, chosen)
        spelled[present] = text
    return spelled


MIGRATIONS_LOCK_CLASS = 0x617761
MIGRATIONS_LOCK_OBJECT = 1
MAINTENANCE_LEADER_LOCK_CLASS = 0x617261

LOCK_MIGRATIONS = f"SELECT pg_advisory_xact_lock({MIGRATIONS_LOCK_CLASS}, {MIGRATIONS_LOCK_OBJECT})"
TRY_LOCK_MAINTENANCE_LEADER = (
    f"SELECT pg_try_advisory_lock({MAINTENANCE_LEADER_LOCK_CLASS}, hashtext(current_schema()))"
)
UNLOCK_MAINTENANCE_LEADER = (
    f"SELECT pg_advisory_unlock({MAINTENANCE_LEADER_LOCK_CLASS}, hashtext(current_schema()))"
)
LOCK_CLAIM_BATCHES = "SELECT pg_advisory_xact_lock(c) FROM unnest($1::bigint[]) AS c ORDER BY c"
# A compact flush's locks, and a generic plan for the rest of its transaction: under the
# default plan_cache_mode the server planned the flush statement afresh on every flush (110
# custom plans of 110 in pg_prepared_statements), about 2 ms of a 256-job flush. Set here,
# transaction-local, it costs no extra round trip.
LOCK_CLAIM_BATCHES_FOR_FLUSH = (
    "SELECT pg_advisory_xact_lock(c), set_config('plan_cache_mode', 'force_generic_plan', true)"
    " FROM unnest($1::bigint[]) AS c ORDER BY c"
)
LOCK_ATTEMPT = "SELECT pg_advisory_xact_lock_shared($1::bigint), pg_advisory_xact_lock(-$2::bigint)"
# Many attempts' locks in one statement, in the order given: the caller passes their claim
# batches ascending (taken shared), then minus their job ids by ascending job id (taken
# exclusively), so it orders its locks as a single attempt does and as every other taker of
# several.
LOCK_ATTEMPTS = """
SELECT CASE WHEN u.k > 0 THEN pg_advisory_xact_lock_shared(u.k) ELSE pg_advisory_xact_lock(u.k) END
  FROM unnest($1::bigint[]) WITH ORDINALITY AS u(k, n) ORDER BY u.n
"""

# The attempt a callback belongs to, locked (as every transition of it is locked first) in the
# statement that finds it, with what its kind declares about outputs. The columns are fixed
# for the attempt's life; whether the callback is still waiting is checked again under the
# lock: by ``callbacks.LOOKUP``, or in the completion's own guard.
LOCK_CALLBACK_ATTEMPT = """
SELECT s.job_id, s.run_lease, s.claim_id, s.state, r.kind, r.queue,
       r.attempt + 1 AS attempt, r.max_attempts, r.unique_key IS NOT NULL AS keyed,
       cb.claimed_at AS attempted_at,
       (SELECT to_jsonb(d) -> 'output' FROM awa.job_kind_descriptors d WHERE d.kind = r.kind)
           AS declared_output,
       pg_advisory_xact_lock_shared(s.claim_id), pg_advisory_xact_lock(-s.job_id)
  FROM attempt_state s
  JOIN ready_entries r ON r.job_id = s.job_id AND r.run_lease = s.run_lease
  LEFT JOIN claim_batches cb ON cb.claim_id = s.claim_id
 WHERE s.callback_id = $1 AND NOT s.callback_resolved
"""
# Notifications on the schema's channels (``names.channel`` spells the same names for LISTEN).
# The callback channel carries a callback id: a handler waiting in wait_for_callback wakes,
# re-checks and may find its attempt ended. The cancel channel carries ``job_id:run_lease`` to
# the runtime running that attempt.
NOTIFY_CALLBACK = f"SELECT pg_notify('{CHANNEL_PREFIXES['callback']}' || current_schema(), $1)"
NOTIFY_CANCEL = f"SELECT pg_notify('{CHANNEL_PREFIXES['cancel']}' || current_schema(), $1)"

# Attempts that are claimed and not yet ended. Below the rescue horizon every attempt has ended
# or has an ``attempt_state`` row (see ``maintenance.advance_horizon`` for the invariant), so
# open attempts are read from the claim batches at or above the horizon, plus the state rows
# below it: an attempt that runs for hours (heartbeats) or waits for a callback does not hold
# the horizon, and the reads stay bounded by the work in flight. Of the batches at or above
# the horizon, one whose attempts all ended (its closures plus its compact completions'
# completed_count cover it) is dropped by two grouped index range scans over the same claim_id
# range, merged with the batches by claim_id: one pass, not one probe per batch into every
# partition (which cost ~0.3 ms per batch before a maintenance pass). Only batches that still
# hold an open attempt are unnested and checked job by job.
OPEN_ATTEMPTS = """
unresolved AS MATERIALIZED (
    SELECT cb.claim_id, cb.claimed_at, cb.job_ids, cb.run_leases, cb.attempts
      FROM claim_batches cb
      LEFT JOIN (SELECT c.claim_id, count(*) AS n FROM attempt_closures c
                  WHERE c.claim_id >= (SELECT rescue_horizon FROM maintenance_state)
                  GROUP BY c.claim_id) closed USING (claim_id)
      LEFT JOIN (SELECT b.claim_id, sum(b.completed_count) AS n
                   FROM receipt_completion_batches b
                  WHERE b.claim_id >= (SELECT rescue_horizon FROM maintenance_state)
                  GROUP BY b.claim_id) compact USING (claim_id)
     WHERE cb.claim_id >= (SELECT rescue_horizon FROM maintenance_state)
       AND cardinality(cb.job_ids) > COALESCE(closed.n, 0) + COALESCE(compact.n, 0)
), open AS (
    SELECT cb.claim_id, cb.claimed_at, u.job_id, u.run_lease, u.attempt
      FROM unresolved cb,
           unnest(cb.job_ids, cb.run_leases, cb.attempts) AS u(job_id, run_lease, attempt)
     WHERE NOT EXISTS (SELECT 1 FROM attempt_closures c
                        WHERE c.job_id = u.job_id AND c.run_lease = u.run_lease)
       AND NOT EXISTS (SELECT 1 FROM receipt_completion_batches b
                        WHERE b.claim_id = cb.claim_id AND b.job_ids @> ARRAY[u.job_id])
    UNION ALL
    SELECT cb.claim_id, cb.claimed_at, s.job_id, s.run_lease,
           cb.attempts[array_position(cb.job_ids, s.job_id)]
      FROM attempt_state s
      JOIN claim_batches cb ON cb.claim_id = s.claim_id
     WHERE s.claim_id < (SELECT rescue_horizon FROM maintenance_state)
       AND NOT EXISTS (SELECT 1 FROM attempt_closures c
                        WHERE c.job_id = s.job_id AND c.run_lease = s.run_lease)
       AND NOT EXISTS (SELECT 1 FROM receipt_completion_batches b
                        WHERE b.claim_id = s.claim_id AND b.job_ids @> ARRAY[s.job_id])
)"""

# Ready entries not yet claimed: for each lane, its rows from the claim cursor up to the next
# sequence number to be issued, [claim_seq, next_seq). The LATERAL subquery is fenced
# (OFFSET 0) so each lane is one index range scan on (queue, priority, lane_seq), and the range
# is written with both ends, so the planner guesses a narrow range (not a third of the
# table). Unfenced and one-sided, the planner turned it into a hash join over every ready
# entry in the schema whenever queue_lanes had no statistics yet (straight after a load,
# before autovacuum analyzed it): 35-90 ms at 100,000 jobs instead of well under 1.
UNCLAIMED_READY = """
queue_lanes l
 CROSS JOIN LATERAL (SELECT r.* FROM ready_entries r
                      WHERE r.queue = l.queue AND r.priority = l.priority
                        AND r.lane_seq >= l.claim_seq AND r.lane_seq < l.next_seq
                     OFFSET 0) r"""

# Wakes the runtimes LISTENing for work in the queue named by the expression ``{queue}``
# (storage.wakeup). PostgreSQL delivers identical notices of one transaction once, so a bulk
# insert wakes each queue once. A queue name too long for a notice payload sends '' instead,
# which wakes every runtime of the schema.
READY_NOTICE = (
    "pg_notify('awa_ready_' || current_schema(), "
    "CASE WHEN octet_length({queue}) < 7900 THEN {queue} ELSE '' END)"
)

# The CTEs every insert of ready jobs begins with: queue $1's lane at priority $2 hands out its
# next $3 sequence numbers (``lane.first_seq`` is the first; the lane row stays locked until
# commit, so job ids taken meanwhile rise with the sequence), and the queue's idle runtimes
# are woken when this commits.
RESERVE_LANE_RANGE = f"""lane AS (
    INSERT INTO queue_lanes AS l (queue, priority, next_seq) VALUES ($1, $2, $3)
    ON CONFLICT (queue, priority) DO UPDATE SET next_seq = l.next_seq + $3
    RETURNING l.next_seq - $3 AS first_seq
), woken AS (
    SELECT {READY_NOTICE.format(queue="$1::text")}
)"""
