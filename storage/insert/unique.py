"""Unique jobs: at most one job of a kind holds a unique key at a time.

A job inserted with ``unique_key`` gets a ``unique_keys`` row (migration v005) in its insert
transaction. The row *holds* the key while the job is in one of its ``states``; a partial
unique index on ``(kind, unique_key) WHERE holding`` lets only one job hold it, so concurrent
inserts of one key make one job: the others find the holder and return it as a duplicate.

``states`` always contains every unfinished state (scheduled, available, running,
waiting_external, retryable) and may add completed, failed and cancelled. A job moves between
unfinished states in batch statements (claim, promotion) that never look at keys; because the
key is held in all of them, those statements need not. The key is released (``holding``
false) in the transaction that ends the job in a state outside ``states``, taken back when an
operator retries the job (refused if another job holds it by then), and forgotten with the
job (delete, DLQ purge, ring prune). Jobs without a key never reach this module.

Lock order: keys are taken before lanes (and in (kind, key) order), so an insert never waits
for a key while holding a lane.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import asyncpg

from storage.db.pool import Conn, snapshot
from storage.read import one_job
from storage.values.errors import AwaError, InvalidOption, JobNotFound, UniqueConflict
from storage.values.models import JobRow, JobState

if TYPE_CHECKING:
    from storage.insert.enqueue import Inserted

UNFINISHED_STATES: tuple[JobState, ...] = (
    JobState.SCHEDULED,
    JobState.AVAILABLE,
    JobState.RUNNING,
    JobState.WAITING_EXTERNAL,
    JobState.RETRYABLE,
)
OPTIONAL_STATES: tuple[JobState, ...] = (JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED)
ALL_STATES: tuple[JobState, ...] = (*UNFINISHED_STATES, *OPTIONAL_STATES)
CLAIM_PASSES = 10  # a key can only be released between two passes a handful of times

# New holders, in (kind, key) order so concurrent inserts take keys in one order. The job id
# is drawn here: the job's row is written with it afterwards, in the same transaction.
CLAIM = """
INSERT INTO unique_keys (job_id, kind, unique_key, states)
SELECT nextval('job_id_seq'), k.kind, k.unique_key, string_to_array(k.states, ',')
  FROM unnest($1::text[], $2::text[], $3::text[]) AS k(kind, unique_key, states)
 ORDER BY k.kind, k.unique_key
ON CONFLICT (kind, unique_key) WHERE holding DO NOTHING
RETURNING job_id, kind, unique_key
"""
# A statement after CLAIM has a new snapshot, so it sees the holder CLAIM's conflict waited for.
HOLDERS = """
SELECT k.job_id, k.kind, k.unique_key
  FROM unique_keys k
  JOIN unnest($1::text[], $2::text[]) AS w(kind, unique_key) USING (kind, unique_key)
 WHERE k.holding
"""
RELEASE = """
UPDATE unique_keys SET holding = false
 WHERE job_id = $1 AND holding AND NOT ($2::text = ANY(states))
"""
OTHER_HOLDER = """
SELECT o.job_id FROM unique_keys k
  JOIN unique_keys o ON o.kind = k.kind AND o.unique_key = k.unique_key AND o.holding
 WHERE k.job_id = $1 AND o.job_id <> k.job_id
"""
REACQUIRE = "UPDATE unique_keys SET holding = true WHERE job_id = $1 AND NOT holding"
FORGET = "DELETE FROM unique_keys WHERE job_id = ANY($1::bigint[])"
STATES_OF = "SELECT states, holding FROM unique_keys WHERE job_id = $1"
SLOT_HAS_KEYS = (
    "SELECT EXISTS (SELECT 1 FROM ready_entries WHERE slot = $1 AND unique_key IS NOT NULL)"
)
# Jobs whose last row goes with the pruned slot: none of their ready rows elsewhere (a later
# attempt, or a failed job carried forward), none deferred, none dead-lettered.
FORGET_PRUNED = """
DELETE FROM unique_keys k
 WHERE k.job_id IN (SELECT r.job_id FROM ready_entries r
                     WHERE r.slot = $1 AND r.unique_key IS NOT NULL)
   AND NOT EXISTS (SELECT 1 FROM ready_entries o WHERE o.job_id = k.job_id AND o.slot <> $1)
   AND NOT EXISTS (SELECT 1 FROM deferred_jobs d WHERE d.job_id = k.job_id)
   AND NOT EXISTS (SELECT 1 FROM dlq_entries q WHERE q.job_id = k.job_id)
"""


def resolve_states(states: Iterable[JobState | str] | None) -> tuple[str, ...]:
    """The states in which a job holds its key: the unfinished ones plus any terminal ones
    asked for, in lifecycle order. Anything else is refused before the database is touched."""
    if states is None:
        return tuple(UNFINISHED_STATES)
    if isinstance(states, str):
        states = [states]
    chosen: set[JobState] = set()
    for state in states:
        try:
            chosen.add(JobState(state))
        except ValueError:
            known = ", ".join(ALL_STATES)
            raise InvalidOption(
                f"unique_states has {str(state)!r}, which is not a job state ({known})."
            ) from None
    missing = [s.value for s in UNFINISHED_STATES if s not in chosen]
    if missing:
        raise InvalidOption(
            f"unique_states must include every unfinished state; {', '.join(missing)} "
            "missing. A job moves between unfinished states without looking at keys, so a key "
            "is held through all of them; add completed, failed or cancelled to hold it longer."
        )
    return tuple(s.value for s in ALL_STATES if s in chosen)


@dataclass(frozen=True)
class KeyRequest:
    kind: str
    unique_key: str
    states: tuple[str, ...]


@dataclass(frozen=True)
class KeyOutcome:
    job_id: int
    duplicate: bool


async def claim(conn: Conn, requests: Sequence[KeyRequest]) -> list[KeyOutcome]:
    """Within the insert's transaction: take each key, or find the job that holds it.

    A request whose key another request of the same batch took is a duplicate of that job. A
    holder that released its key between the two statements is retried on the next pass.
    """
    outcomes: dict[tuple[str, str], KeyOutcome] = {}
    pending = {(r.kind, r.unique_key): r for r in requests}
    for _ in range(CLAIM_PASSES):
        if not pending:
            break
        wanted = list(pending.values())
        taken = await conn.fetch(
            CLAIM,
            [r.kind for r in wanted],
            [r.unique_key for r in wanted],
            [",".join(r.states) for r in wanted],
        )
        for row in taken:
            outcomes[(row["kind"], row["unique_key"])] = KeyOutcome(row["job_id"], False)
            del pending[(row["kind"], row["unique_key"])]
        if pending:
            rest = list(pending)
            held = await conn.fetch(HOLDERS, [k for k, _ in rest], [u for _, u in rest])
            for row in held:
                outcomes[(row["kind"], row["unique_key"])] = KeyOutcome(row["job_id"], True)
                del pending[(row["kind"], row["unique_key"])]
    if pending:
        raise AwaError("A unique key kept changing hands while inserting; insert again.")
    seen: set[tuple[str, str]] = set()
    results = []
    for r in requests:
        key = (r.kind, r.unique_key)
        outcome = outcomes[key]
        # The second request of one key in a batch is a duplicate of the first's new job.
        results.append(KeyOutcome(outcome.job_id, outcome.duplicate or key in seen))
        seen.add(key)
    return results


async def release(conn: Conn, job_id: int, state: str) -> None:
    """The job ended in ``state``: it stops holding its key unless ``state`` is one of its
    states. Run in the transaction that writes the ending."""
    await conn.execute(RELEASE, job_id, state)


async def reacquire(conn: Conn, job_id: int) -> None:
    """An operator retry: the job holds its key again, or the retry is refused
    (``UniqueConflict``) because another job holds it now. Run before the requeue."""
    other = await conn.fetchval(OTHER_HOLDER, job_id)
    if other is None:
        try:
            await conn.execute(REACQUIRE, job_id)
            return
        except asyncpg.UniqueViolationError:  # a concurrent insert took it first
            other = None
    holder = f"job {other}" if other is not None else "another job"
    raise UniqueConflict(
        f"Job {job_id} cannot run again: its unique key is held by {holder} of its kind now."
    )


async def forget(conn: Conn, job_ids: Sequence[int]) -> None:
    """The jobs are gone (deleted, purged): their keys with them."""
    if job_ids:
        await conn.execute(FORGET, list(job_ids))


async def forget_pruned(conn: Conn, slot: int) -> None:
    """Before ``slot`` of the queue ring is truncated: forget the keys of jobs that go with it.
    A slot without keyed rows (every slot of a schema that never saw a unique job) is passed
    over without reading ``unique_keys``, which schemas before v005 lack."""
    if await conn.fetchval(SLOT_HAS_KEYS, slot):
        await conn.execute(FORGET_PRUNED, slot)


async def read_holders(
    conn: Conn, inserted: Sequence[Inserted], outputs: Callable[[Conn], Awaitable[bool]]
) -> dict[int, JobRow]:
    """The jobs that held the keys of an insert's duplicates, marked ``duplicate``, read in one
    snapshot after the insert committed (a holder that ends meanwhile is read as it was)."""
    holders: dict[int, JobRow] = {}
    job_ids = list(dict.fromkeys(i.job_id for i in inserted if i.duplicate))
    if not job_ids:
        return holders
    present = await outputs(conn)
    async with snapshot(conn):
        for job_id in job_ids:
            row = await one_job.read_job(conn, job_id, outputs=present)
            if row is None:
                raise JobNotFound(
                    f"Job {job_id} held the unique key but was deleted before it could be "
                    "read; insert again."
                )
            row = await with_key_states(conn, row)
            holders[job_id] = row.model_copy(update={"duplicate": True})
    return holders


async def with_key_states(conn: Conn, row: JobRow) -> JobRow:
    """``row`` with the states its key is held in and whether it holds it now (keyed jobs)."""
    if row.unique_key is None:
        return row
    found = await conn.fetchrow(STATES_OF, row.id)
    if found is None:
        return row
    return row.model_copy(
        update={"unique_states": list(found["states"]), "holds_unique_key": found["holding"]}
    )
