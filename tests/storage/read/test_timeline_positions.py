"""Error entries matched to attempts by position (``storage.error_positions``): attempt numbers
restart after a DLQ retry (ADR-048), so two attempts can both be "attempt 1"."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from storage import AttemptSpan, Client, Job, error_positions
from storage.testing import work_one

AT = datetime(2026, 12, 1, tzinfo=UTC)


async def twice_dead(client: Client) -> int:
    """A job dead-lettered at attempt 1, retried from the DLQ, dead-lettered again at attempt
    1: its errors say "run 1 failed" then "run 2 failed"."""
    runs: list[int] = []

    @client.task(kind="twice_dead", queue="dead_q")
    async def fail(job: Job[dict[str, Any]]) -> None:
        runs.append(job.attempt)
        raise RuntimeError(f"run {len(runs)} failed")

    await client.configure_queue("dead_q", dlq=True)
    job = await client.insert({}, kind="twice_dead", max_attempts=1)
    await work_one(client, ["dead_q"])
    await client.retry_dlq(job.id)
    await work_one(client, ["dead_q"])
    return job.id


async def test_after_a_dlq_retry_each_attempt_1_gets_its_own_error(client: Client) -> None:
    job_id = await twice_dead(client)
    row = await client.get_job(job_id)
    assert row is not None
    assert [e["attempt"] for e in row.errors] == [1, 1]
    spans = await client.attempt_timeline(job_id)
    assert [span.attempt for span in spans] == [1, 1]
    positions = error_positions(spans, row.errors)
    assert positions == [0, 1]
    texts = [row.errors[p]["error"] for p in positions if p is not None]
    assert [text.split(" (")[0] for text in texts] == [
        "RuntimeError: run 1 failed",
        "RuntimeError: run 2 failed",
    ]
    by_number = {e["attempt"]: e["error"] for e in row.errors}  # what the timeline did before
    assert [by_number[span.attempt] for span in spans] != texts


def _spans(*attempts: int | None) -> list[AttemptSpan]:
    return [AttemptSpan(run_lease=n + 1, attempt=a, ready_at=AT) for n, a in enumerate(attempts)]


@pytest.mark.parametrize(
    ("attempts", "entries", "expected"),
    [
        ((1, 2, 3), (1, 2), [0, 1, None]),  # the third completed
        ((1, 2, 1, 2), (1, 2, 1), [0, 1, 2, None]),  # a DLQ retry, then completed
        ((1, 2), (1, 2, 2), [0, 1]),  # an admin cancel after attempt 2: no span shows it
        ((None, 2), (1, 2), [None, 1]),  # attempt 1's claim was pruned
        ((1, 2), (1, 1, 2), [0, 2]),  # an entry of attempt 1 no span shows is passed over
        ((1,), (), [None]),
    ],
)
def test_entries_are_merged_in_order(
    attempts: tuple[int | None, ...], entries: tuple[int, ...], expected: list[int | None]
) -> None:
    errors = [{"attempt": a, "error": f"e{n}"} for n, a in enumerate(entries)]
    assert error_positions(_spans(*attempts), errors) == expected
