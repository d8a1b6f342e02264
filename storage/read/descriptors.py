"""Job kind descriptors: what each kind is and which output type it declares.

Runtimes upsert their declared descriptors at start and every sync interval. ``updated_at``
moves only when the content hash changes; ``last_seen_at`` always does, so a reader can tell
a stale descriptor (no live runtime refreshed it within two intervals). The sync probes for
the ``output`` column, so a runtime ahead of the output migration still syncs the rest.
"""

from __future__ import annotations

import hashlib
from typing import Any

import asyncpg
import orjson

from storage.db.pool import Conn
from storage.db.sql import OPEN_ATTEMPTS, UNCLAIMED_READY, with_or_without
from storage.values.models import JobKindDescriptor, JobState, KindSummary

SYNC_INTERVAL_SECONDS = 60

HAS_OUTPUT_COLUMN = """
SELECT EXISTS (SELECT 1 FROM pg_attribute
                WHERE attrelid = 'awa.job_kind_descriptors'::regclass
                  AND attname = 'output' AND NOT attisdropped)
"""

UPSERT = """
INSERT INTO awa.job_kind_descriptors AS d
       (kind, display_name, description, owner, docs_url, tags, extra, descriptor_hash,
        sync_interval_seconds %(col)s)
SELECT u.kind, u.display_name, u.description, u.owner, u.docs_url,
       ARRAY(SELECT jsonb_array_elements_text(u.tags)), u.extra, u.hash, u.sync_interval %(sel)s
  FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::jsonb[],
              $7::jsonb[], $8::text[], $9::int[] %(arr)s)
       AS u(kind, display_name, description, owner, docs_url, tags, extra, hash,
            sync_interval %(col)s)
ON CONFLICT (kind) DO UPDATE SET
    display_name = excluded.display_name, description = excluded.description,
    owner = excluded.owner, docs_url = excluded.docs_url, tags = excluded.tags,
    extra = excluded.extra,
    descriptor_hash = excluded.descriptor_hash,
    sync_interval_seconds = excluded.sync_interval_seconds %(set)s,
    updated_at = CASE WHEN d.descriptor_hash IS DISTINCT FROM excluded.descriptor_hash
                      THEN now() ELSE d.updated_at END,
    last_seen_at = now()
"""
_UPSERT = with_or_without(
    UPSERT,
    col=(", output", ""),
    sel=(", u.output", ""),
    arr=(", $10::jsonb[]", ""),
    set=(", output = excluded.output", ""),
)

_SELECT = with_or_without(
    """
SELECT kind, display_name, description, owner, docs_url, tags, extra, descriptor_hash,
       created_at, updated_at, last_seen_at, %(output)s AS output,
       last_seen_at < now() - make_interval(secs => 2 * sync_interval_seconds) AS stale
  FROM awa.job_kind_descriptors
""",
    output=("output", "NULL::jsonb"),
)

# Live states per kind. Completed jobs are not counted per kind: that would mean scanning
# the whole compact history, and triage does not need it.
KIND_COUNTS = f"""
WITH {OPEN_ATTEMPTS}
SELECT kind, state, count(*) AS n FROM (
    SELECT kind, state FROM deferred_jobs
    UNION ALL
    SELECT r.kind, 'available' FROM {UNCLAIMED_READY}
     WHERE NOT EXISTS (SELECT 1 FROM ready_tombstones t
                        WHERE t.job_id = r.job_id AND t.run_lease = r.run_lease)
    UNION ALL
    SELECT r.kind, COALESCE(s.state, 'running') FROM open o
      JOIN ready_entries r USING (job_id, run_lease)
      LEFT JOIN attempt_state s USING (job_id, run_lease)
    UNION ALL
    SELECT r.kind, d.state FROM done_entries d JOIN ready_entries r USING (job_id, run_lease)
     WHERE d.state <> 'completed'
    UNION ALL
    SELECT kind, 'dlq' FROM dlq_entries
) x GROUP BY kind, state
"""


def descriptor_hash(descriptor: JobKindDescriptor) -> str:
    content = descriptor.model_dump(
        include={"display_name", "description", "owner", "docs_url", "tags", "extra", "output"}
    )
    return hashlib.sha256(orjson.dumps(content, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


async def has_output_column(conn: Conn) -> bool:
    return bool(await conn.fetchval(HAS_OUTPUT_COLUMN))


async def sync(conn: Conn, descriptors: list[JobKindDescriptor]) -> None:
    """Upsert ``descriptors``; on a schema without the output column the output is left out."""
    if not descriptors:
        return
    with_output = await has_output_column(conn)
    args: list[Any] = [
        [d.kind for d in descriptors],
        [d.display_name for d in descriptors],
        [d.description for d in descriptors],
        [d.owner for d in descriptors],
        [d.docs_url for d in descriptors],
        # text[] travels as one jsonb value per descriptor inside the unnest; pre-serialized,
        # because a list of lists would be sent as a two-dimensional array of scalars.
        [orjson.dumps(list(d.tags)) for d in descriptors],
        [d.extra for d in descriptors],
        [descriptor_hash(d) for d in descriptors],
        [SYNC_INTERVAL_SECONDS for _ in descriptors],
    ]
    if with_output:
        args.append([d.output for d in descriptors])
    await conn.execute(_UPSERT[with_output], *args)


async def fetch(conn: Conn, kind: str | None = None) -> dict[str, JobKindDescriptor]:
    with_output = await has_output_column(conn)
    sql = _SELECT[with_output]
    rows = await (conn.fetch(sql + " WHERE kind = $1", kind) if kind else conn.fetch(sql))
    return {r["kind"]: _descriptor(r) for r in rows}


def _descriptor(r: asyncpg.Record) -> JobKindDescriptor:
    return JobKindDescriptor(
        kind=r["kind"],
        display_name=r["display_name"],
        description=r["description"],
        owner=r["owner"],
        docs_url=r["docs_url"],
        tags=list(r["tags"] or []),
        extra=r["extra"] or {},
        output=r["output"],
        descriptor_hash=r["descriptor_hash"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        last_seen_at=r["last_seen_at"],
    )


async def list_kinds(conn: Conn) -> list[KindSummary]:
    """Every kind that has a descriptor or live jobs, with counts of its live jobs."""
    with_output = await has_output_column(conn)
    rows = await conn.fetch(_SELECT[with_output])
    described = {r["kind"]: _descriptor(r) for r in rows}
    stale = {r["kind"]: bool(r["stale"]) for r in rows}
    counts: dict[str, dict[JobState, int]] = {}
    dlq: dict[str, int] = {}
    for r in await conn.fetch(KIND_COUNTS):
        if r["state"] == "dlq":
            dlq[r["kind"]] = r["n"]
        else:
            counts.setdefault(r["kind"], {})[JobState(r["state"])] = r["n"]
    kinds = sorted(described.keys() | counts.keys() | dlq.keys())
    return [
        KindSummary(
            kind=kind,
            descriptor=described.get(kind),
            counts=counts.get(kind, {}),
            dlq=dlq.get(kind, 0),
            stale=stale.get(kind, False),
        )
        for kind in kinds
    ]
