"""Reads of one job, in whatever state it is.

``get_job`` loads the completed output (the compact branch detoasts its batch's array, as the
ADR says). Its statements run in one snapshot (``storage.db.pool.snapshot``): a job that
completes, retries or is promoted while it is read is still read, in the state it had when the
read began. Timestamps that pass through ``to_jsonb`` come back as text; pydantic parses them
into aware datetimes.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from storage.db.pool import Conn, snapshot
from storage.db.sql import with_or_without
from storage.values.models import CallbackInfo, DlqInfo, JobRow, JobState
from storage.values.payload import errors_of

# Round trip 1: everything keyed directly by job_id.
JOB_HEAD = """
SELECT (SELECT to_jsonb(d) FROM deferred_jobs d WHERE d.job_id = $1) AS deferred,
       (SELECT to_jsonb(q) - 'args' - 'payload' FROM dlq_entries q WHERE q.job_id = $1) AS dlq,
       (SELECT args FROM dlq_entries q WHERE q.job_id = $1) AS dlq_args,
       (SELECT payload FROM dlq_entries q WHERE q.job_id = $1) AS dlq_payload,
       r.job_id, r.kind, r.queue, r.args, r.priority, r.attempt, r.run_lease, r.max_attempts,
       r.lane_seq, r.run_at, r.attempted_at, r.created_at, r.unique_key, r.payload,
       l.claim_seq,
       (SELECT cb.claimed_at FROM claim_batches cb
         WHERE cb.queue = r.queue AND cb.priority = r.priority
           AND cb.lane_hi >= r.lane_seq AND cb.lane_lo <= r.lane_seq
         ORDER BY cb.lane_hi LIMIT 1) AS claimed_at,
       EXISTS (SELECT 1 FROM ready_tombstones t
                WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease) AS tombstoned,
       done.state AS done_state, done.attempt AS done_attempt,
       done.finalized_at AS done_at, done.payload AS done_payload, done.has_output AS done_has
  FROM (SELECT 1) one
  LEFT JOIN LATERAL (SELECT * FROM ready_entries WHERE job_id = $1
                      ORDER BY run_lease DESC LIMIT 1) r ON true
  LEFT JOIN queue_lanes l ON l.queue = r.queue AND l.priority = r.priority
  LEFT JOIN LATERAL (SELECT d.state, d.attempt, d.finalized_at, d.payload,
                            %(done_has)s AS has_output
                       FROM done_entries d
                      WHERE d.job_id = r.job_id AND d.run_lease = r.run_lease
                      LIMIT 1) done ON true
"""

# Round trip 2, for a claimed attempt with no done row: compact completion, claim, closure,
# attempt state. Claim ranges of a lane are disjoint, so the first claim range ending at or
# after the job's lane_seq is the only one that can hold it.
JOB_CLAIMED = """
WITH hi AS (
    SELECT min(claim_lane_hi) AS lane_hi FROM receipt_completion_batches
     WHERE queue = $2 AND priority = $3 AND claim_lane_hi >= $4
), compact AS (
    SELECT b.finalized_at, b.attempts[array_position(b.job_ids, $1::bigint)] AS attempt,
           %(compact_output)s AS output
      FROM receipt_completion_batches b, hi
     WHERE b.queue = $2 AND b.priority = $3 AND b.claim_lane_hi = hi.lane_hi
       AND b.claim_lane_lo <= $4 AND b.job_ids @> ARRAY[$1::bigint]
       AND b.run_leases[array_position(b.job_ids, $1::bigint)] = $5
     LIMIT 1
), claim AS (
    SELECT cb.claim_id, cb.claimed_at,
           cb.attempts[array_position(cb.job_ids, $1::bigint)] AS attempt
      FROM claim_batches cb
     WHERE cb.queue = $2 AND cb.priority = $3 AND cb.lane_hi >= $4 AND cb.lane_lo <= $4
       AND cb.job_ids @> ARRAY[$1::bigint]
     ORDER BY cb.lane_hi LIMIT 1
)
SELECT (SELECT to_jsonb(compact) - 'output' FROM compact) AS compact,
       (SELECT output FROM compact) AS compact_output,
       EXISTS (SELECT 1 FROM receipt_completion_tombstones t
                WHERE t.job_id = $1 AND t.run_lease = $5) AS compact_deleted,
       (SELECT to_jsonb(claim) FROM claim) AS claim,
       EXISTS (SELECT 1 FROM attempt_closures c WHERE c.job_id = $1 AND c.run_lease = $5) AS closed,
       (SELECT to_jsonb(s) - 'callback_result' FROM attempt_state s
         WHERE s.job_id = $1 AND s.run_lease = $5) AS attempt_state
"""

DONE_OUTPUT = "SELECT output FROM done_entries WHERE job_id = $1 AND run_lease = $2"

JOB_HEAD_SQL = with_or_without(JOB_HEAD, done_has=("d.output IS NOT NULL", "false"))
JOB_CLAIMED_SQL = with_or_without(
    JOB_CLAIMED, compact_output=("b.outputs[array_position(b.job_ids, $1::bigint)]", "NULL::json")
)


def _job_row(base: dict[str, Any], **fields: Any) -> JobRow:
    payload = fields.pop("payload", None) or {}
    return JobRow(
        id=base["job_id"],
        kind=base["kind"],
        queue=base["queue"],
        args=base["args"],
        priority=base["priority"],
        attempt=base["attempt"],
        max_attempts=base["max_attempts"],
        run_lease=base["run_lease"],
        run_at=base["run_at"],
        created_at=base["created_at"],
        attempted_at=base.get("attempted_at"),
        unique_key=base.get("unique_key"),
        tags=list(payload.get("tags") or []),
        metadata=dict(payload.get("metadata") or {}),
        errors=errors_of(payload),
        progress=payload.get("progress"),
        **fields,
    )


async def get_job(conn: Conn, job_id: int, *, outputs: bool) -> JobRow | None:
    """The job in whatever state it is, with its stored output; None if deleted or unknown.
    Read in its own snapshot: call it outside any transaction."""
    async with snapshot(conn):
        return await read_job(conn, job_id, outputs=outputs)


async def read_job(conn: Conn, job_id: int, *, outputs: bool) -> JobRow | None:
    """``get_job`` for a caller that holds a ``snapshot`` already and reads more in it."""
    head = await conn.fetchrow(JOB_HEAD_SQL[outputs], job_id)
    if head is None:
        return None
    if head["deferred"] is not None:
        return _from_deferred(head["deferred"])
    if head["dlq"] is not None:
        return _from_dlq(head["dlq"], head["dlq_args"], head["dlq_payload"])
    if head["job_id"] is None:
        return None
    base = dict(head)
    if head["done_state"] is not None:
        output = None
        if head["done_has"]:
            output = await conn.fetchval(DONE_OUTPUT, job_id, head["run_lease"])
        return _job_row(
            base | {"attempt": head["done_attempt"], "attempted_at": head["claimed_at"]},
            state=JobState(head["done_state"]),
            finalized_at=head["done_at"],
            payload=head["done_payload"] if head["done_payload"] is not None else head["payload"],
            output_text=output,
            has_output=output is not None,
            storage_path="general",
        )
    if head["tombstoned"]:
        return None
    if head["lane_seq"] is None or head["lane_seq"] >= head["claim_seq"]:
        return _job_row(base, state=JobState.AVAILABLE, payload=head["payload"])
    return await _claimed(conn, base, outputs)


async def _claimed(conn: Conn, base: dict[str, Any], outputs: bool) -> JobRow | None:
    row = await conn.fetchrow(
        JOB_CLAIMED_SQL[outputs],
        base["job_id"],
        base["queue"],
        base["priority"],
        base["lane_seq"],
        base["run_lease"],
    )
    assert row is not None
    if row["compact"] is not None:
        if row["compact_deleted"]:
            return None
        compact = row["compact"]
        return _job_row(
            base | {"attempt": compact["attempt"], "attempted_at": base["claimed_at"]},
            state=JobState.COMPLETED,
            finalized_at=compact["finalized_at"],
            payload=None,
            output_text=row["compact_output"],
            has_output=row["compact_output"] is not None,
            storage_path="compact",
        )
    claim = row["claim"]
    if claim is None or row["closed"]:
        return None  # resolved and since pruned or deleted
    state = row["attempt_state"] or {}
    progress = state.get("progress")
    payload = dict(base["payload"] or {})
    if progress is not None:
        payload["progress"] = progress
    callback = None
    if state.get("callback_id"):
        callback = CallbackInfo(
            callback_id=state["callback_id"],
            timeout_at=state.get("callback_timeout_at"),
            state=state["state"],
        )
    waiting = state.get("state") == "waiting_external"
    return _job_row(
        base | {"attempt": claim["attempt"], "attempted_at": claim["claimed_at"]},
        state=JobState.WAITING_EXTERNAL if waiting else JobState.RUNNING,
        payload=payload,
        callback=callback,
        heartbeat_at=None if waiting else state.get("heartbeat_at") or claim["claimed_at"],
    )


def completed_row(
    columns: asyncpg.Record, attempted_at: datetime | None, output_text: str | None
) -> JobRow:
    """The row ``get_job`` reads for a job its caller just completed on the general path,
    built from the columns the completion returned (``general_writes.ANSWER_ROW``)."""
    return _job_row(
        dict(columns) | {"attempted_at": attempted_at},
        state=JobState.COMPLETED,
        finalized_at=columns["finalized_at"],
        payload=columns["payload"],
        output_text=output_text,
        has_output=output_text is not None,
        storage_path="general",
    )


def _from_deferred(d: dict[str, Any]) -> JobRow:
    return _job_row(d, state=JobState(d["state"]), payload=d.get("payload"))


def _from_dlq(q: dict[str, Any], args: Any, payload: Any) -> JobRow:
    info = DlqInfo(
        reason=q["dlq_reason"], dlq_at=q["dlq_at"], original_run_lease=q["original_run_lease"]
    )
    return _job_row(
        q | {"args": args, "run_lease": q["original_run_lease"]},
        state=JobState.FAILED,
        finalized_at=q["finalized_at"],
        payload=payload,
        dlq=info,
    )
