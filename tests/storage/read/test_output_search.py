"""Searching inside outputs (``ListFilter.output``): completed outputs on both paths (a done
entry's ``output``, a compact batch's array subscripted per row) and the output a failed
attempt kept, always within a time range."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from storage import Client, InvalidFilter, Job, JobState, ListFilter, OutputMatch
from storage.testing import work_one

PARTIAL = OutputMatch.at("status", "partial")


async def _report(job: Job[dict[str, Any]]) -> None:
    job.set_output(job.args["out"])
    if job.args.get("fail"):
        raise RuntimeError("failed after writing its report")


async def _done(client: Client, out: Any, *, general: bool = False, fail: bool = False) -> int:
    """One job of kind ``report`` run to its end: compact unless ``general`` (tags take the
    general path), failed (keeping ``out``) when ``fail``."""
    args = {"out": out, "fail": fail}
    job = await client.insert(
        args, kind="report", tags=["general"] if general else [], max_attempts=1
    )
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.state is (JobState.FAILED if fail else JobState.COMPLETED)
    if not fail:
        assert result.row.storage_path == ("general" if general else "compact")
    return job.id


async def _two_hours_ago(conn: asyncpg.Connection, job_id: int) -> None:
    """Move the job's finish outside the last hour, on whichever path it took."""
    moved = await conn.execute(
        "UPDATE done_entries SET finalized_at = now() - interval '2 hours' WHERE job_id = $1",
        job_id,
    )
    moved_batch = await conn.execute(
        "UPDATE receipt_completion_batches SET finalized_at = now() - interval '2 hours'"
        " WHERE $1 = ANY(job_ids) AND completed_count = 1",
        job_id,
    )
    assert "UPDATE 1" in (moved, moved_batch)


@pytest.fixture
async def outputs(client: Client, conn: asyncpg.Connection) -> dict[str, int]:
    client.task(kind="report")(_report)
    made: dict[str, int] = {}
    for general in (False, True):
        path = "general" if general else "compact"
        made[f"{path}_partial"] = await _done(
            client, {"status": "partial", "rows": 412}, general=general
        )
        made[f"{path}_ok"] = await _done(client, {"status": "ok", "rows": 0}, general=general)
        made[f"{path}_old"] = await _done(client, {"status": "partial"}, general=general)
        made[f"{path}_nested"] = await _done(
            client, {"summary": {"status": "partial"}, "items": [{"id": "x-17"}]}, general=general
        )
        made[f"{path}_none"] = await _done(client, None, general=general)
        await _two_hours_ago(conn, made[f"{path}_old"])
    made["failed_partial"] = await _done(client, {"status": "partial"}, fail=True)
    return made


async def _found(client: Client, match: OutputMatch, state: str | None = None) -> set[int]:
    since = datetime.now(UTC) - timedelta(hours=1)
    rows = await client.list_jobs(state=state, since=since, output=match, limit=100)
    return {row.id for row in rows}


async def test_a_path_value_lists_exactly_the_completed_jobs_with_it_in_the_range(
    client: Client, outputs: dict[str, int]
) -> None:
    found = await _found(client, PARTIAL, "completed")
    assert found == {outputs["compact_partial"], outputs["general_partial"]}


async def test_other_states_are_searched_by_the_output_their_failed_attempt_kept(
    client: Client, outputs: dict[str, int]
) -> None:
    assert await _found(client, PARTIAL, "failed") == {outputs["failed_partial"]}
    everywhere = {outputs["compact_partial"], outputs["general_partial"], outputs["failed_partial"]}
    assert await _found(client, PARTIAL) == everywhere


@pytest.mark.parametrize(
    ("match", "expected"),
    [
        (OutputMatch.at("rows", "412"), {"partial"}),  # a number compares as written
        (OutputMatch.at("rows", "0"), {"ok"}),
        (OutputMatch.at("summary.status", "partial"), {"nested"}),
        (OutputMatch.at("items.0.id", "x-17"), {"nested"}),  # an array index is a step
        (OutputMatch.at("status", "PARTIAL"), set()),  # a value is exact
        (OutputMatch(text="PARTIAL"), {"partial", "nested"}),  # text is any case, any depth
        (OutputMatch(text="x-1"), {"nested"}),
        (OutputMatch(text="status"), set()),  # keys are not searched
        (OutputMatch("partial", ("rows",), "412"), {"partial"}),  # both in the same output
    ],
)
async def test_paths_and_text_on_both_paths(
    client: Client, outputs: dict[str, int], match: OutputMatch, expected: set[str]
) -> None:
    wanted = {outputs[f"{path}_{name}"] for path in ("compact", "general") for name in expected}
    assert await _found(client, match, "completed") == wanted


async def test_pages_and_counts_and_bulk_targets_agree(
    client: Client, outputs: dict[str, int]
) -> None:
    where = ListFilter.of(
        state="completed", since=datetime.now(UTC) - timedelta(hours=1), output=PARTIAL
    )
    first = await client.browse(where, limit=1)
    second = await client.browse(where, after=first.rows[0], limit=1)
    assert {first.rows[0].id, second.rows[0].id} == {
        outputs["compact_partial"],
        outputs["general_partial"],
    }
    assert await client.count_matching(where) == 2


@pytest.mark.parametrize(
    ("build", "says"),
    [
        (lambda: ListFilter.of(output=PARTIAL), "needs a time range start"),
        (lambda: OutputMatch.at("a..b", "x"), "empty step"),
        (lambda: OutputMatch.at(".".join("a" * 17), "x"), "1 to 16 steps"),
        (lambda: OutputMatch(("status",), None), "must be text"),  # type: ignore[arg-type]
        (lambda: OutputMatch(path=("status",)), "needs a value"),
        (lambda: OutputMatch(), "needs text"),
        (lambda: OutputMatch(text="a\x00b"), "NUL"),
        (lambda: OutputMatch.at("status", "a\ud800"), "lone surrogate"),
    ],
)
def test_an_output_search_it_cannot_run_is_refused_in_one_line(build: Any, says: str) -> None:
    with pytest.raises(InvalidFilter, match=says) as refused:
        build()
    assert "\n" not in str(refused.value)
