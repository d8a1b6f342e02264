"""A job's attempts as a timeline, from what storage already keeps (no extra writes).

Each readiness of a job is one ready row (``run_lease``). Its attempt, if it was claimed, is
found in the claim batch whose lane range holds the row's lane sequence (index-bounded, as in
``storage.read.one_job``); how it ended comes from its closure row (the specific outcome: rescued,
callback_timeout, completed_external, ...), its compact completion batch, or its done row.
A running attempt's last heartbeat, progress and callback are in ``attempt_state``. Only the
latest heartbeat is kept, and history older than the rings' retention is gone (its claim
batches pruned): such an attempt shows as ready with no claim. The runtime that claimed an
attempt is its claim batch's ``runtime_id`` in the registry (``runtimes``, migration v010;
``TIMELINE_SQL[False]`` reads a schema before it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import asyncpg

from storage.db.pool import Conn
from storage.db.sql import with_or_without
from storage.values.models import AttemptSpan, RuntimeInfo

TIMELINE = """
SELECT r.run_lease, r.run_at AS ready_at, cb.claimed_at, cb.deadline_at,
       cb.attempts[array_position(cb.job_ids, r.job_id)] AS attempt,
       c.outcome AS closure, c.closed_at, b.finalized_at AS compact_at,
       d.state AS done_state, d.finalized_at AS done_at,
       s.state AS attempt_state, s.heartbeat_at, s.progress, s.callback_id,
       s.callback_timeout_at, %(runtime)s
  FROM ready_entries r
  LEFT JOIN LATERAL (
        SELECT cb.claim_id, cb.claimed_at, cb.deadline_at, cb.job_ids, cb.attempts %(runtime_id)s
          FROM claim_batches cb
         WHERE cb.queue = r.queue AND cb.priority = r.priority
           AND cb.lane_hi >= r.lane_seq AND cb.lane_lo <= r.lane_seq
           AND cb.job_ids @> ARRAY[r.job_id]
         ORDER BY cb.lane_hi LIMIT 1) cb ON true
  LEFT JOIN LATERAL (
        SELECT c.outcome, c.closed_at FROM attempt_closures c
         WHERE c.job_id = r.job_id AND c.run_lease = r.run_lease LIMIT 1) c ON true
  LEFT JOIN LATERAL (
        SELECT b.finalized_at FROM receipt_completion_batches b
         WHERE b.claim_id = cb.claim_id AND b.job_ids @> ARRAY[r.job_id] LIMIT 1) b ON true
  LEFT JOIN LATERAL (
        SELECT d.state, d.finalized_at FROM done_entries d
         WHERE d.job_id = r.job_id AND d.run_lease = r.run_lease LIMIT 1) d ON true
  LEFT JOIN attempt_state s ON s.job_id = r.job_id AND s.run_lease = r.run_lease
  %(registry)s
 WHERE r.job_id = $1
 ORDER BY r.run_lease
"""
TIMELINE_SQL = with_or_without(
    TIMELINE,
    runtime=(
        "cb.runtime_id, rt.host AS runtime_host, rt.pid AS runtime_pid, "
        "rt.started_at AS runtime_started_at, rt.name AS runtime_name, "
        "rt.version AS runtime_version",
        "NULL::bigint AS runtime_id",
    ),
    runtime_id=(", cb.runtime_id", ""),
    registry=("LEFT JOIN runtimes rt ON rt.id = cb.runtime_id", ""),
)


async def attempt_timeline(conn: Conn, job_id: int, *, registry: bool) -> list[AttemptSpan]:
    """Every readiness of the job, oldest first, with its attempt if one was claimed and the
    runtime that claimed it (``registry``: the schema has the runtime registry, v010)."""
    spans = []
    for r in await conn.fetch(TIMELINE_SQL[registry], job_id):
        outcome = r["closure"] or ("completed" if r["compact_at"] else r["done_state"])
        spans.append(
            AttemptSpan(
                run_lease=r["run_lease"],
                attempt=r["attempt"],
                ready_at=r["ready_at"],
                claimed_at=r["claimed_at"],
                deadline_at=r["deadline_at"],
                heartbeat_at=r["heartbeat_at"],
                progress=r["progress"],
                callback_id=r["callback_id"],
                callback_timeout_at=r["callback_timeout_at"],
                waiting=r["attempt_state"] == "waiting_external",
                ended_at=r["closed_at"] or r["compact_at"] or r["done_at"],
                outcome=outcome,
                runtime=runtime_of(r),
            )
        )
    return spans


def runtime_of(row: asyncpg.Record) -> RuntimeInfo | None:
    """The claiming runtime from a row's ``runtime_*`` columns (None: no id recorded)."""
    if row["runtime_id"] is None:
        return None
    return RuntimeInfo(
        id=row["runtime_id"],
        host=row["runtime_host"],
        pid=row["runtime_pid"],
        started_at=row["runtime_started_at"],
        name=row["runtime_name"],
        version=row["runtime_version"],
    )


def error_positions(
    spans: Sequence[AttemptSpan], errors: Sequence[Mapping[str, Any]]
) -> list[int | None]:
    """For each span, the position in ``errors`` of the entry its attempt wrote (None: none).

    By position, not by attempt number (ADR-048: attempt numbers restart after a DLQ retry, so
    two attempts can both be "attempt 1"): spans and entries are both in the order they
    happened, so they are merged in that order. An entry matches the next claimed span of its
    attempt number; an entry of an earlier attempt than the span's (one no span shows: an
    admin cancel, an attempt whose claim was pruned) is passed over; a span whose attempt wrote
    no entry (it completed, or was snoozed) gets None.
    """
    positions: list[int | None] = []
    next_entry = 0
    for span in spans:
        found = None
        while span.attempt is not None and next_entry < len(errors):
            attempt = errors[next_entry].get("attempt")
            if attempt == span.attempt:
                found = next_entry
                next_entry += 1
                break
            if isinstance(attempt, int) and attempt < span.attempt:
                next_entry += 1  # an entry no span shows
                continue
            break
        positions.append(found)
    return positions
