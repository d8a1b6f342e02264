"""Reads of every job of a live workload (compact and general completions, tags, unique keys,
retries, snoozes, callbacks), through ``Client.get_job`` and ``GET /api/jobs/{id}``, while the
jobs move between states: no read misses a job that exists (``benchmarks._live_reads``).
Before one snapshot per read, a few in every few thousand came back None or 404."""

from __future__ import annotations

from benchmarks._live_reads import run

READS = 2_000  # a few seconds on a quiet machine (python -m benchmarks one_job_reads: 20,000)
SECONDS = 45.0  # only a cap, for a loaded shared host (30 reads a second at load 10)


async def test_every_read_of_a_live_workload_finds_its_job(migrated_dsn: str, schema: str) -> None:
    misses = await run(migrated_dsn, schema, reads=READS, seconds=SECONDS)
    assert misses.reads >= 100, misses  # the workload ran, and was read throughout
    assert misses.http_reads > 0, misses
    assert misses.keyed_inserts > 0, misses
    assert (misses.none, misses.not_found_http, misses.job_not_found) == (0, 0, 0), misses
