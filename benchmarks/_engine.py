"""Shared plumbing for the benchmarks that drive the real engine (``storage``).

* :func:`prepare` migrates a server once; :func:`new_queue_schema` installs a fresh
  queue-storage schema per measured run and :func:`drop_queue_schema` removes it again, so
  every run starts from empty tables and the server never accumulates old runs (whose
  autovacuum would otherwise write WAL inside later measurement windows).
* :func:`insert_all` inserts jobs through ``Client.insert_many`` in batches.
* :func:`completion_totals` reads back what a run stored (compact and general terminal rows,
  batch rows, claim batches, outputs), so every run is checked, not assumed.
* :func:`autovacuum_count` reports autovacuum/autoanalyze activity on a schema, recorded
  with each WAL measurement.
* The output shapes are the ADR's benchmark shapes from :mod:`benchmarks.completion_statements`
  (100 B summary object, ~4 KiB numeric array, ~4 KiB many-key object), parsed to Python
  values so handlers record them through ``job.set_output`` like user code.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from benchmarks._harness import Connection, ident
from benchmarks.completion_statements import MANY_KEYS, NUMERIC, SMALL, Shape
from storage import Client, Job, migrate

__all__ = [
    "INSERT_BATCH",
    "MANY_KEYS",
    "NUMERIC",
    "SMALL",
    "CallStats",
    "CallTimer",
    "CompletionTotals",
    "Noop",
    "Shape",
    "autovacuum_count",
    "completion_totals",
    "drop_queue_schema",
    "insert_all",
    "log",
    "new_queue_schema",
    "output_values",
    "prepare",
    "register_lifecycle_handler",
    "shuffled",
    "statement_timer",
]

INSERT_BATCH = 2_000
"""Jobs per ``insert_many`` call (one transaction each)."""

_schema_ids = itertools.count(1)


def log(message: str) -> None:
    """Progress goes to stderr so stdout holds only the tables."""
    print(message, file=sys.stderr, flush=True)


@dataclass(slots=True)
class Noop:
    """The benchmark job's args, ``{"i": n}``: n picks the job's output from a pool."""

    i: int


async def prepare(dsn: str) -> None:
    """Apply the project's migrations (idempotent)."""
    await migrate(dsn)


async def new_queue_schema(conn: Connection, prefix: str) -> str:
    """Install a fresh queue-storage schema named ``<prefix>_<n>`` and return its name."""
    while True:
        name = f"{prefix}_{next(_schema_ids)}"
        ident(name)
        exists = await conn.fetchval("SELECT to_regnamespace($1) IS NOT NULL", name)
        if not exists:
            break
    await conn.execute("SELECT awa.install_queue_storage($1)", name)
    return name


async def drop_queue_schema(conn: Connection, schema: str) -> None:
    """Drop a queue-storage schema and its registry row."""
    await conn.execute(f"DROP SCHEMA IF EXISTS {ident(schema)} CASCADE")
    await conn.execute("DELETE FROM awa.queue_storage_registry WHERE schema_name = $1", schema)


async def insert_all(
    client: Client, args: Sequence[Any], *, batch: int = INSERT_BATCH, **options: Any
) -> list[int]:
    """Insert ``args`` in ``batch``-sized ``insert_many`` calls; return the job ids."""
    ids: list[int] = []
    for start in range(0, len(args), batch):
        rows = await client.insert_many(args[start : start + batch], **options)
        ids.extend(row.id for row in rows)
    return ids


@dataclass(frozen=True, slots=True)
class CompletionTotals:
    """What a run left in its schema's terminal tables."""

    compact_jobs: int
    compact_outputs: int
    batch_rows: int
    batch_rows_with_outputs: int
    claim_batches: int
    done_completed: int
    done_failed: int
    done_outputs: int
    deferred: int
    dlq: int

    @property
    def completed(self) -> int:
        return self.compact_jobs + self.done_completed

    def as_dict(self) -> dict[str, int]:
        return {
            "compact_jobs": self.compact_jobs,
            "compact_outputs": self.compact_outputs,
            "batch_rows": self.batch_rows,
            "batch_rows_with_outputs": self.batch_rows_with_outputs,
            "claim_batches": self.claim_batches,
            "done_completed": self.done_completed,
            "done_failed": self.done_failed,
            "done_outputs": self.done_outputs,
            "deferred": self.deferred,
            "dlq": self.dlq,
        }


async def completion_totals(conn: Connection, schema: str) -> CompletionTotals:
    """Count what ``schema`` stores (compact batches, done rows, claims, outputs)."""
    s = ident(schema)
    row = await conn.fetchrow(
        f"""
        SELECT
          (SELECT coalesce(sum(completed_count), 0) FROM {s}.receipt_completion_batches)
            AS compact_jobs,
          (SELECT coalesce(sum((SELECT count(*) FROM unnest(outputs) o WHERE o IS NOT NULL)), 0)
             FROM {s}.receipt_completion_batches) AS compact_outputs,
          (SELECT count(*) FROM {s}.receipt_completion_batches) AS batch_rows,
          (SELECT count(*) FROM {s}.receipt_completion_batches WHERE outputs IS NOT NULL)
            AS batch_rows_with_outputs,
          (SELECT count(*) FROM {s}.claim_batches) AS claim_batches,
          (SELECT count(*) FROM {s}.done_entries WHERE state = 'completed') AS done_completed,
          (SELECT count(*) FROM {s}.done_entries WHERE state = 'failed') AS done_failed,
          (SELECT count(*) FROM {s}.done_entries WHERE output IS NOT NULL) AS done_outputs,
          (SELECT count(*) FROM {s}.deferred_jobs) AS deferred,
          (SELECT count(*) FROM {s}.dlq_entries) AS dlq
        """
    )
    assert row is not None
    return CompletionTotals(**{key: int(row[key]) for key in row.keys()})  # noqa: SIM118


async def autovacuum_count(conn: Connection, schema: str) -> int:
    """Autovacuum plus autoanalyze runs so far on ``schema``'s tables (and partitions)."""
    value = await conn.fetchval(
        "SELECT coalesce(sum(autovacuum_count + autoanalyze_count), 0)::bigint"
        " FROM pg_stat_all_tables WHERE schemaname = $1",
        schema,
    )
    return int(value)


def output_values(shape: Shape, size: int, seed: int) -> list[Any]:
    """``size`` distinct outputs of ``shape`` as Python values (what a handler records)."""
    values: list[Any] = [orjson.loads(text) for text in shape.pool(size, seed)]
    for value in values[:4]:
        text = orjson.dumps(value)
        if len(text) > 4096:
            raise AssertionError(f"{shape.key} output is {len(text)} B, over the 4 KiB cap")
    return values


def register_lifecycle_handler(client: Client, outputs: Sequence[Any] | None) -> None:
    """The lifecycle benchmarks' handler: a no-op, or one that records output ``i`` mod the
    pool's size (``lifecycle`` and ``instructions`` must measure the same handler)."""
    if outputs is None:

        @client.task(Noop)
        async def noop(job: Job[Noop]) -> None:
            return None

    else:
        pool = outputs

        @client.task(Noop)
        async def with_output(job: Job[Noop]) -> None:
            job.set_output(pool[job.args.i % len(pool)])


def shuffled(items: Iterable[Any], seed: int) -> list[Any]:
    """A reproducible shuffle (used for interleaving orders and sampling ids)."""
    out = list(items)
    random.Random(seed).shuffle(out)
    return out


@dataclass(slots=True)
class CallStats:
    calls: int = 0
    seconds: float = 0.0
    items: int = 0

    @property
    def mean_ms(self) -> float:
        return 1000 * self.seconds / self.calls if self.calls else 0.0


class CallTimer:
    """Time calls to engine functions (``"module.function"`` in ``storage``) during a block.

    Each target is replaced by a timing wrapper for the duration of the ``with`` block and
    restored afterwards; the engine calls these through their module attribute, so the
    wrapper sees every call. Times are wall time from call to return as the caller awaits
    them: they include waiting for locks, the server and (under load) the event loop, and
    concurrent calls overlap. ``items`` counts the length of list arguments/results where
    the function takes or returns a batch. A target missing from the engine's version is
    skipped (0 calls). Nothing in ``storage`` is changed.
    """

    def __init__(self, *targets: str) -> None:
        self.targets = targets
        self.stats: dict[str, CallStats] = {t.rsplit(".", 1)[1]: CallStats() for t in targets}
        self._saved: list[tuple[Any, str, Any]] = []

    def __enter__(self) -> CallTimer:
        import importlib
        import time

        for target in self.targets:
            module_name, name = target.rsplit(".", 1)
            module = importlib.import_module(f"storage.{module_name}")
            original = getattr(module, name, None)
            if original is None:  # not in this version of the engine: reported as 0 calls
                continue
            stats = self.stats[name]

            def make(original: Any, stats: CallStats) -> Any:
                async def timed(*args: Any, **kwargs: Any) -> Any:
                    started = time.perf_counter()
                    try:
                        result = await original(*args, **kwargs)
                    finally:
                        stats.seconds += time.perf_counter() - started
                        stats.calls += 1
                    if isinstance(result, list | dict):
                        stats.items += len(result)
                    return result

                return timed

            self._saved.append((module, name, original))
            setattr(module, name, make(original, stats))
        return self

    def __exit__(self, *exc: object) -> None:
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)
        self._saved = []

    def as_dict(self) -> dict[str, dict[str, float]]:
        return {
            name: {"calls": st.calls, "seconds": st.seconds, "items": st.items}
            for name, st in self.stats.items()
        }


def statement_timer() -> CallTimer:
    """Times the run phase's claim and completion calls (both paths) and claim-lock waits."""
    return CallTimer(
        "claim.claim_batch",
        "finalize.complete_compact",
        "transitions.complete_general",
        "finalize.lock_claims",
        "finalize.lock_attempt",
    )
