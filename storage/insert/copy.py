"""``insert_many`` without unique keys: jobs validated, encoded and written a chunk at a time.

One call is one transaction, so bad input anywhere in it (a job whose args do not fit its
kind, an unknown kind) raises and nothing is written, though earlier chunks went to the
server. A chunk of ready jobs is two round trips: one statement reserves its lane range and
its job ids (and returns them as one array), then a ``COPY`` writes its rows as text, so
neither side builds a record per job. COPY writes a page of rows per WAL record (heap multi-
insert) where ``INSERT ... SELECT`` wrote one per row: 53 B less WAL per job, a sixth of an
enqueue's. Scheduled jobs go to ``deferred_jobs`` in one statement per chunk. Only the ids
(and, when asked, the rows) are kept.

Lane order is kept as ``storage.insert.enqueue`` keeps it: a lane's chunks draw consecutive
sequence ranges while the lane row stays locked until commit, and a call that spans lanes
(kinds with different default queues) takes them in sorted order, one lane after another.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from functools import partial
from typing import Any

import orjson

from storage.db.pool import Conn
from storage.insert import unique
from storage.insert.enqueue import copy_ready, insert_jobs, key_of
from storage.insert.plan import InsertPlan, Resolved
from storage.values.errors import ArgsValidationError, AwaError, InvalidName, UnknownKind
from storage.values.models import JobRow, JobState

CHUNK = 2_000
"""Jobs per chunk (one COPY, or one statement for scheduled jobs): large enough that the round
trips are a small share, small enough that a chunk's text stays a few hundred kilobytes."""

INSERT_DEFERRED_CHUNK = """
WITH written AS (
    INSERT INTO deferred_jobs (job_id, state, kind, queue, args, priority, attempt, run_lease,
                               max_attempts, run_at, created_at, payload)
    SELECT nextval('job_id_seq'), 'scheduled', j.kind, j.queue, j.args, $4, 0, 1, $5, $6,
           now(), $7
      FROM ROWS FROM (unnest($1::text[]), unnest($2::text[]), jsonb_array_elements($3::jsonb))
               WITH ORDINALITY AS j(kind, queue, args, ord)
     ORDER BY j.ord
    RETURNING job_id
)
SELECT array_agg(job_id ORDER BY job_id) AS ids, now() AS at FROM written
"""


class Chunk:
    """Up to ``CHUNK`` encoded jobs of one lane (or of the deferred table)."""

    __slots__ = ("args", "kinds", "queues")

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.queues: list[str] = []
        self.args: list[bytes] = []

    def add(self, kind: str, queue: str, args_json: bytes) -> None:
        self.kinds.append(kind)
        self.queues.append(queue)
        self.args.append(args_json)

    def args_array(self) -> bytes:
        return b"[" + b",".join(self.args) + b"]"


def chunks(plan: InsertPlan, args: Sequence[Any], indexes: Iterable[int]) -> Iterator[Chunk]:
    """Encode ``args[i]`` for each index, a chunk at a time (the per-job checks run here); a
    refused job is named by its index in the call."""
    chunk = Chunk()
    for index in indexes:
        try:
            chunk.add(*plan.encode(args[index]))
        except (ArgsValidationError, InvalidName, UnknownKind) as exc:
            raise _at(exc, index, len(args)) from exc.__cause__
        if len(chunk.args) >= CHUNK:
            yield chunk
            chunk = Chunk()
    if chunk.args:
        yield chunk


def _at(exc: AwaError, index: int, total: int) -> AwaError:
    """``exc`` naming the refused job's position, when the call had more than one."""
    if total == 1:
        return exc
    return type(exc)(
        f"{exc.message.rstrip('.')} (job {index} of the {total} given; nothing was inserted)"
    )


def _resolve(plan: InsertPlan, args: Sequence[Any], index: int) -> Resolved:
    try:
        return plan.resolve(args[index])
    except (InvalidName, UnknownKind) as exc:
        raise _at(exc, index, len(args)) from None


async def insert_chunked(
    conn: Conn,
    plan: InsertPlan,
    args: Sequence[Any],
    check_kinds: Callable[[set[str]], Awaitable[None]],
    *,
    rows: bool,
) -> list[Any]:
    """Write ``args`` in the caller's transaction; the ids (or rows) in the order given.

    ``check_kinds`` is awaited with the kinds of each chunk before it is written.
    """
    deferred = plan.run_at is not None and plan.run_at > datetime.now(UTC)
    # The lanes the call spans, known before any is taken, so they are taken in sorted order.
    types = list(map(type, args))
    lanes = sorted({_resolve(plan, args, types.index(t))[1] for t in dict.fromkeys(types)})
    del types
    groups: list[tuple[str | None, Sequence[int]]]
    if deferred or len(lanes) <= 1:
        groups = [(None if deferred or not lanes else lanes[0], range(len(args)))]
    else:
        groups = [(q, [i for i, v in enumerate(args) if plan.resolve(v)[1] == q]) for q in lanes]
    out: list[Any] = [None] * len(args)
    for queue, indexes in groups:
        position = iter(indexes)
        for chunk in chunks(plan, args, indexes):
            await check_kinds(set(chunk.kinds))
            if deferred:
                found = await conn.fetchrow(
                    INSERT_DEFERRED_CHUNK, chunk.kinds, chunk.queues, chunk.args_array(),
                    plan.priority, plan.max_attempts, plan.run_at, plan.payload,
                )  # fmt: skip
            else:
                assert queue is not None  # a group of ready jobs is one lane's
                lines = partial(_copy_lines, plan, chunk, queue)
                found = await copy_ready(conn, queue, plan.priority, len(chunk.args), lines)
            assert found is not None
            written = _rows(plan, chunk, found, deferred) if rows else found["ids"]
            for result, index in zip(written, position, strict=False):  # written first: zip
                # stops on it without taking an index from the next chunk
                out[index] = result
    return out


async def insert_keyed(
    conn: Conn,
    plan: InsertPlan,
    args: Sequence[Any],
    check_kinds: Callable[[set[str]], Awaitable[None]],
    outputs: Callable[[Conn], Awaitable[bool]],
    *,
    rows: bool,
) -> list[Any]:
    """Keyed jobs take all their keys before any lane (``storage.insert.unique``), so the whole
    call is built first."""
    jobs = [plan.job(value) for value in args]
    await check_kinds({job.kind for job in jobs})
    inserted = await insert_jobs(conn, jobs, now=datetime.now(UTC))
    if not rows:
        return [ins.job_id for ins in inserted]
    holders = await unique.read_holders(conn, inserted, outputs)
    return [
        holders[ins.job_id]
        if ins.duplicate
        else JobRow(
            id=ins.job_id,
            kind=job.kind,
            queue=job.queue,
            state=JobState.SCHEDULED if ins.scheduled else JobState.AVAILABLE,
            args=orjson.loads(job.args_json),
            priority=job.priority,
            attempt=0,
            max_attempts=job.max_attempts,
            run_lease=1,
            run_at=ins.run_at,
            created_at=ins.created_at,
            tags=list((job.payload or {}).get("tags") or []),
            metadata=dict((job.payload or {}).get("metadata") or {}),
            unique_key=key_of(job),
        )
        for job, ins in zip(jobs, inserted, strict=True)
    ]


def _copy_text(value: str) -> bytes:
    """``value`` as a field of COPY's text format."""
    for raw, escaped in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
        value = value.replace(raw, escaped)
    return value.encode()


def _copy_lines(plan: InsertPlan, chunk: Chunk, queue: str, found: Any) -> bytes:
    """A ready chunk as COPY text in ``enqueue.READY_COPY_COLUMNS`` order. JSON text never
    holds a raw tab, newline or carriage return (orjson escapes them), so its only escape is
    the backslash (``bytes.replace`` returns the same object when there is none)."""
    payload = b"\\N" if plan.payload is None else orjson.dumps(plan.payload).replace(b"\\", b"\\\\")
    at = _copy_text(found["at_text"])
    shared = (found["slot"], _copy_text(queue), plan.priority, plan.max_attempts, at, at, payload)
    tail = b"%d\t%b\t%d\t0\t1\t%d\t%b\t%b\t%b\n" % shared
    kinds = {kind: _copy_text(kind) for kind in set(chunk.kinds)}
    first = found["first_seq"]
    return b"".join(
        [
            b"%d\t%d\t%b\t%b\t%b" % (job_id, seq, kinds[kind], args.replace(b"\\", b"\\\\"), tail)
            for job_id, seq, kind, args in zip(
                found["ids"],
                range(first, first + len(chunk.args)),
                chunk.kinds,
                chunk.args,
                strict=True,
            )
        ]
    )


def _rows(plan: InsertPlan, chunk: Chunk, found: Any, deferred: bool) -> list[JobRow]:
    """The written jobs as ``insert`` returns them (what a read would give back)."""
    at: datetime = found["at"]
    payload = plan.payload or {}
    return [
        JobRow(
            id=job_id,
            kind=kind,
            queue=queue,
            state=JobState.SCHEDULED if deferred else JobState.AVAILABLE,
            args=orjson.loads(args_json),
            priority=plan.priority,
            attempt=0,
            max_attempts=plan.max_attempts,
            run_lease=1,
            run_at=plan.run_at if deferred and plan.run_at else at,
            created_at=at,
            tags=list(payload.get("tags") or []),
            metadata=dict(payload.get("metadata") or {}),
        )
        for job_id, kind, queue, args_json in zip(
            found["ids"], chunk.kinds, chunk.queues, chunk.args, strict=True
        )
    ]
