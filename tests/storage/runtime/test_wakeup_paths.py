"""Every way a job becomes ready wakes an idle runtime: one row per path
(``benchmarks._wake_paths.PATHS``), each readying a job from another client while the runtime
idles at ``poll_interval=5``. The job must start well before that poll: its start is awaited
with a timeout of a fifth of the poll, so a path without a ready notice fails here.
"""

from __future__ import annotations

import pytest

from benchmarks._wake_paths import PATHS, POLL, Setup, bench, wake_seconds

BOUND = 1.0  # seconds; polling alone would take up to POLL
assert BOUND <= POLL / 5


@pytest.mark.parametrize("setup", PATHS.values(), ids=PATHS.keys())
async def test_a_job_made_ready_starts_on_an_idle_runtime_before_its_poll(
    migrated_dsn: str, schema: str, setup: Setup
) -> None:
    async with bench(migrated_dsn, schema) as b:
        try:
            wake = await wake_seconds(b, setup, 1, BOUND)
        except TimeoutError:
            pytest.fail(f"the job did not start within {BOUND} s: only the poll would start it")
    assert wake.seconds < BOUND
