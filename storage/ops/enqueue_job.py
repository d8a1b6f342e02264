"""An operator's enqueue of one new job of a known kind (the console's form on Kinds,
``POST /api/jobs``).

The kind must be known here: a handler this process registered or a descriptor a runtime
published (``UnknownKind`` otherwise). The args go through the one check of typed args
(``storage.ops.job_args``); the queue defaults to the handler's, else the one its descriptor
names, else ``default``. The job is written by the path every insert takes
(``storage.insert.copy``, whose lane reservation sends the ready notice, so a worker serving
the queue wakes at commit) and audited as ``enqueue`` in the same transaction: the new job's
id, its queue, the actor, the reason and the args' size and sha256, never their text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from storage.db.pool import Conn
from storage.insert.copy import insert_chunked
from storage.insert.plan import InsertPlan, KindSpec
from storage.ops.audit import Recorder
from storage.ops.job_args import args_text
from storage.read import descriptors
from storage.values.audit import ENQUEUE
from storage.values.errors import UnknownKind
from storage.values.models import JobKindDescriptor, JobRow
from storage.values.names import check_stored_name

NOTHING = "nothing was enqueued"


def default_queue(
    kind: str, specs: Mapping[str, KindSpec], published: JobKindDescriptor | None
) -> str:
    """Where a job of ``kind`` goes when no queue is given: its handler's queue, else the one
    its descriptor names, else ``default`` (what a form shows before anything is typed)."""
    spec = specs.get(kind)
    if spec is not None:
        return spec.queue
    return (published.queue if published is not None else None) or "default"


async def enqueue(
    conn: Conn,
    specs: Mapping[str, KindSpec],
    kind: str,
    args: Any,
    *,
    queue: str | None,
    options: Mapping[str, Any],
    audit: Recorder,
) -> JobRow:
    """Insert one job of ``kind`` with ``args`` (``options``: priority, run_at, ...) and
    record it; the job as stored. Refused, nothing is written."""
    check_stored_name(kind, "Kind")
    published = (await descriptors.fetch(conn, kind)).get(kind)
    if kind not in specs and published is None:
        raise UnknownKind(
            f"No handler or descriptor is known for kind {kind!r}; {NOTHING}. Kinds lists "
            "the kinds a runtime published."
        )
    text = args_text(kind, args, specs, published, nothing=NOTHING)
    where = queue if queue is not None else default_queue(kind, specs, published)
    plan = InsertPlan(specs, {**options, "kind": kind, "queue": where})

    async def known(_kinds: set[str]) -> None:
        """The kind was checked above."""

    async with conn.transaction():
        (row,) = await insert_chunked(conn, plan, [args], known, rows=True)
        assert isinstance(row, JobRow)
        await audit.job(conn, ENQUEUE, row.id, row.queue, args_text=text)
    return row
