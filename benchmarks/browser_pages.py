"""The console's browser reads on 10,000 vs 1,000,000 terminal jobs.

The job browser shows a state tab with counts and keyset pages of 50 jobs, newest first;
its reads must cost about the same on a large history as on a small one. Timed on 10,000 and
1,000,000 terminal jobs (200,000 with ``--quick``): ``list_jobs`` by COMPLETED, FAILED and
every state, and COMPLETED by finish time (first page, then 5 keyset pages), ``counts()``,
``browse()``, ``browse`` under a time range (``since`` the middle finish time; ``before`` the
first one, which nothing matches: the time indexes must answer, not a walk of every job),
``list_queues()`` and ``failure_groups()`` (the on-call screens Q and G; the whole history is
less than an hour old, so both read up to their caps), and, as extras, ``get_job`` of a random
compact job and the public SQL view ``terminal_jobs`` filtered by ``job_id``.

How the data is made: the small database is completed by the real runtime (10,000 jobs,
interleaved in chunks: 85% compact completions of which every other one records a 100 B
output, 10% general-path completions via tags with a 100 B output, 5% failures with
``max_attempts=1`` that record an output). The large one is that history replicated by
SQL: ``INSERT ... SELECT`` from the small schema into a fresh one, k = 0..K-1 copies with
job ids, claim ids and lane sequences shifted by k times their range (ready rows, claim
batches, compact completion batches with their outputs, done rows, attempt closures), the
lane cursors and sequences set past the copies. Then both get ``VACUUM ANALYZE``, their
claim timestamps are moved an hour back (a history older than the rescue horizon's
one-minute window, as it is in steady state) and one maintenance pass advances the rescue
horizon. ``counts()``, the all-states first page and ``browse()`` are also timed a few times
before that, straight after the load: no statistics, no maintenance pass, the rescue horizon
where the runtime left it when it ran out of work (carried to the copies).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import random
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from benchmarks import _engine as engine
from benchmarks import _harness as h
from storage import Client, Job, JobRow, JobState, SortOrder
from storage.read.counting import COUNT_CAP
from storage.read.failure_groups import SCAN_CAP

NAME = "browser_pages"
BASE_JOBS = 10_000
PAGE = 50
NEXT_PAGES = 5
MS = ("median", "p95")
MIX: tuple[tuple[str, int, dict[str, Any]], ...] = (
    ("compact", 85, {}),
    ("general", 10, {"tags": ["x"]}),
    ("failed", 5, {"max_attempts": 1}),
)
"""Of every 100 jobs inserted: 85 compact, 10 general (tags), 5 failing."""


@dataclass(frozen=True, slots=True)
class Plan:
    rounds: int
    large_jobs: int
    reps: int
    view_reps: int


FULL = Plan(rounds=5, large_jobs=1_000_000, reps=8, view_reps=3)
QUICK = Plan(rounds=3, large_jobs=200_000, reps=5, view_reps=2)


async def build_small(conn: h.Connection, dsn: str, seed: int) -> str:
    """10,000 terminal jobs completed by the real runtime."""
    schema = await engine.new_queue_schema(conn, "bench_br_small")
    outputs = engine.output_values(engine.SMALL, 256, seed)
    async with await Client.connect(dsn, schema) as client:

        @client.task(engine.Noop)
        async def handler(job: Job[engine.Noop]) -> None:
            i = job.args.i
            if i % 2 == 0 or job.tags or job.max_attempts == 1:
                job.set_output(outputs[i % len(outputs)])
            if job.max_attempts == 1:
                raise RuntimeError("failed on purpose")

        started = time.perf_counter()
        n = 0
        while n < BASE_JOBS:
            for _kind, count, options in MIX:
                await client.insert_many([engine.Noop(n + j) for j in range(count)], **options)
                n += count
        await client.run_until_idle(maintenance_interval=None)
        engine.log(f"small: {BASE_JOBS:,} jobs run in {time.perf_counter() - started:.1f} s")
    totals = await engine.completion_totals(conn, schema)
    expected = (BASE_JOBS * 95 // 100, BASE_JOBS * 5 // 100)
    if (totals.completed, totals.done_failed) != expected:
        raise AssertionError(f"small history is not as planned: {totals}")
    return schema


REPLICATE = """
WITH k AS (SELECT generate_series(0, $1::int - 1)::bigint AS k),
s AS (
    SELECT (SELECT max(job_id) FROM {src}.ready_entries) AS j,
           (SELECT max(claim_id) FROM {src}.claim_batches) AS c,
           (SELECT max(next_seq) FROM {src}.queue_lanes) AS l
)
INSERT INTO {dst}.{table} ({columns}) SELECT {values} FROM {src}.{table} t, k, s {order}
"""
COPY_COLUMNS = """
SELECT attname FROM pg_attribute WHERE attrelid = format('%I.%I', $1::text, $2::text)::regclass
   AND attnum > 0 AND NOT attisdropped AND attidentity = '' AND attgenerated = '' ORDER BY attnum
"""
SHIFTS: dict[str, tuple[str | None, dict[str, str]]] = {
    # table: (copy order, {column: the range it is shifted by, k times: job ids, claim ids or
    # lane sequences; "[]" shifts an array's elements}); other columns are copied as they are
    "ready_entries": ("job_id", {"job_id": "j", "lane_seq": "l"}),
    "claim_batches": (
        "claim_id",
        {"claim_id": "c", "lane_lo": "l", "lane_hi": "l", "job_ids": "j[]", "lane_seqs": "l[]"},
    ),
    "receipt_completion_batches": (
        "batch_id",
        {"claim_id": "c", "claim_lane_lo": "l", "claim_lane_hi": "l", "min_job_id": "j"}
        | {"max_job_id": "j", "job_ids": "j[]", "lane_seqs": "l[]"},
    ),
    "done_entries": ("job_id", {"job_id": "j"}),
    "attempt_closures": (None, {"job_id": "j", "claim_id": "c"}),
}


def shifted(column: str, shift: str | None) -> str:
    """``column`` of copy ``k.k``, shifted by k times the range ``shift`` names."""
    name = f"t.{h.ident(column)}"
    if shift is None:
        return name
    if shift.endswith("[]"):
        return (
            f"(SELECT array_agg(x + k.k * s.{shift[0]} ORDER BY o)"
            f" FROM unnest({name}) WITH ORDINALITY u(x, o))"
        )
    return f"{name} + k.k * s.{shift}"


FINISH_LARGE = """
WITH s AS (SELECT (SELECT max(job_id) FROM {src}.ready_entries) AS j,
                  (SELECT max(claim_id) FROM {src}.claim_batches) AS c)
SELECT setval('{dst}.job_id_seq', $1 * s.j), setval('{dst}.claim_id_seq', $1 * s.c) FROM s
"""
# The horizon the load left on the small history, carried to the last copy (the runtime that
# ran the load moved it when it ran out of work; no maintenance pass has run).
CARRY_HORIZON = """
UPDATE {dst}.maintenance_state SET rescue_horizon = GREATEST(0, (
    SELECT h.rescue_horizon + ($1 - 1) * (SELECT max(claim_id) FROM {src}.claim_batches)
      FROM {src}.maintenance_state h))
"""


async def build_large(conn: h.Connection, small: str, copies: int) -> str:
    """``copies`` shifted copies of the small history, by SQL."""
    schema = await engine.new_queue_schema(conn, "bench_br_large")
    src, dst = h.ident(small), h.ident(schema)
    started = time.perf_counter()
    async with conn.transaction():
        for table, (order, shifts) in SHIFTS.items():
            t0 = time.perf_counter()
            columns = [str(r[0]) for r in await conn.fetch(COPY_COLUMNS, small, table)]
            sql = REPLICATE.format(
                src=src,
                dst=dst,
                table=h.ident(table),
                columns=", ".join(h.ident(c) for c in columns),
                values=", ".join(shifted(c, shifts.get(c)) for c in columns),
                order=f"ORDER BY k.k, t.{order}" if order else "",
            )
            await conn.execute(sql, copies)
            engine.log(f"large: {table} x{copies} in {time.perf_counter() - t0:.1f} s")
        await conn.execute(
            f"""INSERT INTO {dst}.queue_lanes (queue, priority, next_seq, claim_seq)
                SELECT queue, priority, next_seq * $1, claim_seq * $1 FROM {src}.queue_lanes""",
            copies,
        )
        await conn.execute(f"INSERT INTO {dst}.queue_settings SELECT * FROM {src}.queue_settings")
        await conn.fetch(FINISH_LARGE.format(src=src, dst=schema), copies)
        await conn.execute(CARRY_HORIZON.format(src=src, dst=dst), copies)
    engine.log(
        f"large: {copies * BASE_JOBS:,} jobs replicated in {time.perf_counter() - started:.1f} s"
    )
    totals = await engine.completion_totals(conn, schema)
    if totals.completed + totals.done_failed != copies * BASE_JOBS:
        raise AssertionError(f"large history is not as planned: {totals}")
    return schema


@contextlib.asynccontextmanager
async def histories(
    conn: h.Connection, dsn: str, seed: int, large_jobs: int | None, *, keep: bool = False
) -> AsyncIterator[list[tuple[str, str, int]]]:
    """The small history and (unless ``large_jobs`` is None) the large one, as (label,
    schema, jobs); both schemas dropped afterwards unless ``keep``."""
    schemas: list[str] = []
    try:
        schemas.append(await build_small(conn, dsn, seed))
        if large_jobs is not None:
            schemas.append(await build_large(conn, schemas[0], large_jobs // BASE_JOBS))
        jobs = [BASE_JOBS, large_jobs or 0]
        label = {n: f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n // 1000}k" for n in jobs}
        yield [(label[n], schema, n) for schema, n in zip(schemas, jobs, strict=False)]
    finally:
        for schema in schemas if not keep else ():
            await engine.drop_queue_schema(conn, schema)


async def settle(conn: h.Connection, dsn: str, schema: str) -> None:
    """VACUUM ANALYZE, age the claims past the horizon window, one maintenance pass."""
    s = h.ident(schema)
    for table in await h.schema_tables(conn, schema):
        await conn.execute(f"VACUUM ANALYZE {s}.{h.ident(table)}")
    await conn.execute(
        f"UPDATE {s}.claim_batches SET claimed_at = claimed_at - interval '1 hour',"
        " deadline_at = deadline_at - interval '1 hour'"
    )
    await conn.execute(f"VACUUM ANALYZE {s}.claim_batches")
    async with await Client.connect(dsn, schema) as client:
        await client.run_maintenance()
    horizon = await conn.fetchval(f"SELECT rescue_horizon FROM {s}.maintenance_state")
    top = await conn.fetchval(f"SELECT max(claim_id) FROM {s}.claim_batches")
    if horizon <= top:
        raise AssertionError(f"{schema}: rescue horizon {horizon} did not pass claim {top}")


@dataclass(slots=True)
class Db:
    label: str
    schema: str
    jobs: int
    client: Client
    compact_ids: list[int]
    bytes: int
    times: tuple[datetime, datetime]  # the first finish time, and the middle of them all


@dataclass(slots=True)
class Samples:
    by_round: dict[int, list[float]] = field(default_factory=dict)

    def add(self, round_no: int, ms: float) -> None:
        if round_no >= 0:  # round -1 warms up
            self.by_round.setdefault(round_no, []).append(ms)

    async def time(self, round_no: int, call: Awaitable[h.R]) -> h.R:
        ms, result = await h.timed(call)
        self.add(round_no, ms)
        return result

    def all(self) -> list[float]:
        return [v for values in self.by_round.values() for v in values]

    def round_medians(self) -> list[float]:
        return [statistics.median(self.by_round[r]) for r in sorted(self.by_round)]


READS: tuple[tuple[str, str], ...] = (
    ("completed_first", "list_jobs(COMPLETED): first page"),
    ("completed_next", "list_jobs(COMPLETED): next pages 2-6"),
    ("all_first", "list_jobs(all states): first page"),
    ("all_next", "list_jobs(all states): next pages 2-6"),
    ("failed_first", "list_jobs(FAILED): first page"),
    ("failed_next", "list_jobs(FAILED): next pages 2-6"),
    ("by_time_first", "list_jobs(COMPLETED, sort=-when): first page"),
    ("by_time_next", "list_jobs(COMPLETED, sort=-when): next pages 2-6"),
    ("since_half", "browse(COMPLETED, since=middle finish time): page + counts"),
    ("before_all", "browse(all states, before=first finish time): nothing matches"),
    ("counts", "counts()"),
    ("browse", "browse(all states): page + counts, one snapshot"),
    ("get_job", "(extra) get_job, random compact job"),
    ("queues", "list_queues(): the Queues screen"),
    ("groups", "failure_groups(): the Failure groups screen"),
)


WALKS = (
    (JobState.COMPLETED, "completed", "-id"),
    (None, "all", "-id"),
    (JobState.FAILED, "failed", "-id"),
    (JobState.COMPLETED, "by_time", "-when"),
)


async def page_walk(
    db: Db, state: JobState | None, sort: str, samples: list[Samples], round_no: int
) -> None:
    """First page, then ``NEXT_PAGES`` keyset pages (after the last row); checks order, size."""
    after: JobRow | None = None
    order = SortOrder.parse(sort)
    for page in range(NEXT_PAGES + 1):
        call = db.client.list_jobs(state=state, limit=PAGE, sort=sort, after=after)
        ms, rows = await h.timed(call)
        if len(rows) != PAGE:
            raise AssertionError(f"{db.label} {state}: page {page} has {len(rows)} rows")
        keys = [order.key(r) for r in ([after] if after else []) + rows]
        if keys != sorted(keys, reverse=True) or len(set(keys)) != len(keys):
            raise AssertionError(f"{db.label} {state}: page {page} out of order")
        if state is not None and any(r.state is not state for r in rows):
            raise AssertionError(f"{db.label}: page {page} mixes states")
        if any(r.output is not None for r in rows):
            raise AssertionError("list rows must not carry outputs")
        samples[min(page, 1)].add(round_no, ms)
        after = rows[-1]


async def measure(dbs: Sequence[Db], plan: Plan, seed: int) -> dict[str, dict[str, Samples]]:
    rng = random.Random(seed)
    out = {db.label: {key: Samples() for key, _ in READS} for db in dbs}
    for round_no in range(-1, plan.rounds):  # round -1 warms up and is dropped
        order = list(dbs) if round_no % 2 == 0 else list(reversed(dbs))
        for db in order:
            s = out[db.label]
            for _ in range(plan.reps):
                for state, walk, sort in WALKS:
                    walked = [s[f"{walk}_first"], s[f"{walk}_next"]]
                    await page_walk(db, state, sort, walked, round_no)
                oldest, middle = db.times
                half = db.client.browse(state=JobState.COMPLETED, since=middle, limit=PAGE)
                page = await s["since_half"].time(round_no, half)
                if len(page.rows) != PAGE or any(
                    (r.finalized_at or oldest) < middle for r in page.rows
                ):
                    raise AssertionError(f"{db.label}: since={middle} page is wrong")
                none = await s["before_all"].time(round_no, db.client.browse(before=oldest))
                if none.rows or none.counts.total:
                    raise AssertionError(f"{db.label}: before={oldest} matched {none.counts}")
                counts = await s["counts"].time(round_no, db.client.counts())
                completed = counts.by_state[JobState.COMPLETED]
                expected = db.jobs * 95 // 100
                exact = counts.is_exact(JobState.COMPLETED)  # else "at least": never too high
                if completed != expected if exact else completed > min(expected, COUNT_CAP):
                    raise AssertionError(f"{db.label}: counts() says {completed} completed")
                page = await s["browse"].time(round_no, db.client.browse(limit=PAGE))
                if len({row.id for row in page.rows}) != PAGE:
                    raise AssertionError(f"{db.label}: browse() page is not {PAGE} distinct jobs")
                job_id = rng.choice(db.compact_ids)
                row = await s["get_job"].time(round_no, db.client.get_job(job_id))
                if row is None or row.state is not JobState.COMPLETED:
                    raise AssertionError(f"{db.label}: job {job_id} not found completed")
                (queue,) = await s["queues"].time(round_no, db.client.list_queues())
                if not queue.completed_1h <= expected or queue.failed_1h > db.jobs // 20:
                    raise AssertionError(f"{db.label}: list_queues() says {queue}")
                (group,) = await s["groups"].time(round_no, db.client.failure_groups())
                if group.count != min(db.jobs // 20, SCAN_CAP):  # the newest SCAN_CAP per source
                    raise AssertionError(f"{db.label}: failure_groups() says {group.count}")
        if round_no >= 0:
            parts = []
            for db in dbs:
                first = statistics.median(out[db.label]["completed_first"].by_round[round_no])
                counts_ms = statistics.median(out[db.label]["counts"].by_round[round_no])
                parts.append(f"{db.label} first page {first:.1f} ms, counts {counts_ms:.1f} ms")
            engine.log(f"round {round_no + 1}/{plan.rounds}: " + "; ".join(parts))
    return out


async def view_lookup(conn: h.Connection, db: Db, reps: int, seed: int) -> list[float]:
    """``SELECT ... FROM terminal_jobs WHERE job_id = $1`` (the public SQL surface)."""
    rng = random.Random(seed)
    s = h.ident(db.schema)
    sql = f"SELECT job_id, state, output::text FROM {s}.terminal_jobs WHERE job_id = $1"
    samples = []
    for _ in range(reps):
        job_id = rng.choice(db.compact_ids)
        ms, rows = await h.timed(conn.fetch(sql, job_id))
        samples.append(ms)
        if len(rows) != 1:
            raise AssertionError(f"terminal_jobs returned {len(rows)} rows for {job_id}")
    return samples


WARM_CALLS = 6
BEFORE_HORIZON = {
    "counts": "counts() straight after a load, no maintenance pass",
    "all_first": "list_jobs(all states) first page straight after a load, no pass",
    "browse": "browse(all states): page + counts, straight after a load, no pass",
}


async def before_horizon(db_client: Client, reps: int) -> dict[str, list[float]]:
    """Reads straight after a load, before any maintenance pass; the first ``WARM_CALLS``
    are dropped (PostgreSQL plans a prepared statement's first five runs one by one)."""
    samples: dict[str, list[float]] = {key: [] for key in BEFORE_HORIZON}
    for i in range(WARM_CALLS + reps):
        for key, call in (
            ("counts", db_client.counts()),
            ("all_first", db_client.list_jobs(limit=PAGE)),
            ("browse", db_client.browse(limit=PAGE)),
        ):
            ms = (await h.timed(call))[0]
            if i >= WARM_CALLS:
                samples[key].append(ms)
    return samples


def reads_table(
    dbs: Sequence[Db], lat: dict[str, dict[str, Samples]], plan: Plan
) -> tuple[h.Table, list[dict[str, object]]]:
    small, large = dbs
    rows = []
    data: list[dict[str, object]] = []
    for key, label in READS:
        a, b = lat[small.label][key], lat[large.label][key]
        sa, sb = h.latency_stats(a.all()), h.latency_stats(b.all())
        ratio = h.Stat.paired_ratio(b.round_medians(), a.round_medians())
        cells = [*h.stat_cells(sa, MS, ".2f"), *h.stat_cells(sb, MS, ".2f")]
        rows.append((label, *cells, h.Stat.of(b.round_medians()).fmt(".2f"), ratio.fmt(".2f")))
        per_db = {
            db.label: {"ms": st, "round_medians": h.Stat.of(x.round_medians())}
            for db, st, x in ((small, sa, a), (large, sb, b))
        }
        data.append({"read": key, "label": label, **per_db, "large_over_small": ratio})
    table = h.Table(
        f"Browser reads, ms: {small.jobs:,} vs {large.jobs:,} terminal jobs"
        f" ({plan.rounds} rounds x {plan.reps} walks)",
        (
            "read",
            *(f"{db.label} {key}" for db in dbs for key in MS),
            f"{large.label} round medians (min..max)",
            f"{large.label} ÷ {small.label}, paired",
        ),
        tuple(rows),
        caption=(
            "Client calls end to end (pool acquire, queries, row decoding). 'next pages' "
            "pools pages 2-6 of each keyset walk (after = the last row of the previous page). "
            "Ratio: per-round median on the large database over the small one's."
        ),
    )
    return table, data


def extra_table(
    dbs: Sequence[Db], view: dict[str, list[float]], before: dict[str, dict[str, list[float]]]
) -> h.Table:
    small, large = dbs
    rows = []
    sources = [("SQL: terminal_jobs WHERE job_id = $1", view)] + [
        (label, {db: before[db][key] for db in before}) for key, label in BEFORE_HORIZON.items()
    ]
    for label, source in sources:
        a, b = statistics.median(source[small.label]), statistics.median(source[large.label])
        rows.append((label, f"{a:,.1f}", f"{b:,.1f}", f"{b / a:,.0f}"))
    return h.Table(
        "Reads outside the browser's bounded paths, ms (median of a few warm calls)",
        ("read", small.label, large.label, "ratio"),
        tuple(rows),
        caption=(
            "terminal_jobs is the documented SQL read surface; filtering it by job_id cannot "
            "reach an index through the compact branch's unnest. Straight after a load the "
            "tables have no statistics and no maintenance pass has run; the runtime moved the "
            "rescue horizon when it ran out of work, so open-attempt reads stay bounded."
        ),
    )


NOTES = """
## Method

Both databases live on the same server and are read alternately (the order flips every
round); round 0 is a warm-up and is dropped. Each walk checks its pages: 50 rows, keys (id,
or finish time then id) strictly descending across pages, the requested state, no outputs on
list rows; `counts()` must report the expected number of completed jobs, a time range only
rows in it (none before the first finish), and `get_job` must find the job completed.
"""


def large_jobs(text: str) -> int:
    """``--large-jobs``: whole copies of the small history."""
    if not text.isdigit() or int(text) < BASE_JOBS or int(text) % BASE_JOBS:
        raise argparse.ArgumentTypeError(f"must be a multiple of {BASE_JOBS:,}")
    return int(text)


QUICK_HELP = f"{QUICK.large_jobs:,} jobs in the large database, {QUICK.rounds} rounds"
QUICK_HELP += f" (default {FULL.large_jobs:,}, {FULL.rounds} rounds)"
ROUNDS = True
OPTIONS = {
    "--large-jobs": {"type": large_jobs, "help": "jobs in the large database (n x 10,000)"},
    "--keep": {"action": "store_true", "help": "keep the schemas (with --dsn)"},
}


async def amain(args: Any) -> int:
    base = QUICK if args.quick else FULL
    rounds, large_jobs = args.rounds or base.rounds, args.large_jobs or base.large_jobs
    plan = dataclasses.replace(base, rounds=rounds, large_jobs=large_jobs)
    async with (
        engine.session(args.dsn) as (dsn, conn, machine),
        histories(conn, dsn, args.seed, plan.large_jobs, keep=args.keep) as built,
        contextlib.AsyncExitStack() as clients,
    ):
        build_seconds = time.perf_counter() - args.started
        dbs: list[Db] = []
        before: dict[str, dict[str, list[float]]] = {}
        for label, schema, jobs in built:
            client = await clients.enter_async_context(await Client.connect(dsn, schema))
            before[label] = await before_horizon(client, plan.view_reps)
            await settle(conn, dsn, schema)
            compact_ids = await conn.fetch(
                f"SELECT u FROM {h.ident(schema)}.receipt_completion_batches, unnest(job_ids) u"
                " ORDER BY random() LIMIT 2000"
            )
            size = await h.relations_size(conn, schema, await h.schema_tables(conn, schema))
            times = await conn.fetchrow(
                "SELECT min(t), min(t) + (max(t) - min(t)) / 2 FROM (SELECT finalized_at AS t"
                f" FROM {h.ident(schema)}.done_entries UNION ALL SELECT finalized_at"
                f" FROM {h.ident(schema)}.receipt_completion_batches) x"
            )
            assert times is not None
            ids = [int(r[0]) for r in compact_ids]
            dbs.append(Db(label, schema, jobs, client, ids, size, (times[0], times[1])))
        engine.log(f"built and settled in {time.perf_counter() - args.started:.0f} s")
        lat = await measure(dbs, plan, args.seed)
        view = {db.label: await view_lookup(conn, db, plan.view_reps, args.seed) for db in dbs}
    reads, data = reads_table(dbs, lat, plan)
    extra = extra_table(dbs, view, before)
    config: dict[str, object] = {"quick": args.quick, "rounds": plan.rounds}
    config |= {"walks_per_round": plan.reps, "page_size": PAGE, "next_pages": NEXT_PAGES}
    config |= {"small_jobs": BASE_JOBS, "large_jobs": plan.large_jobs}
    config["mix_per_100_jobs"] = {kind: count for kind, count, _ in MIX}
    config["database_bytes"] = {db.label: db.bytes for db in dbs}
    config |= {"build_seconds": round(build_seconds, 1), "seed": args.seed}
    meta: dict[str, object] = {"machine": machine, "config": config}
    meta["server"] = "external (--dsn)" if args.dsn else "embedded pgserver"
    meta["data"] = "small: real runtime; large: the small history replicated by SQL (see notes)"
    title = f"Browser reads on {BASE_JOBS:,} vs {plan.large_jobs:,} terminal jobs"
    return h.report(
        args,
        NAME,
        data,
        meta,
        title=title,
        tables=(reads, extra),
        notes=(__doc__.split("\n\n", 1)[1] if __doc__ else "", NOTES),
        extra={"terminal_jobs_view_ms": view, "before_horizon_ms": before},
    )
