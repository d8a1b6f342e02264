"""Why a job has no output, one cause, from what storage keeps; and where an output came from.

Each way a job can end without an output, worked through the real executor (``work_one``),
maintenance and external completion, names exactly one ``NoOutput`` cause.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from storage import Client, Job, JobState, NoOutput, Snooze
from storage.db.pool import connect_once
from storage.testing import work_one
from tests.http.conftest import park
from tests.storage.migration_db import database_at

Args = dict[str, Any]


async def cause(client: Client, job_id: int) -> tuple[NoOutput, str]:
    account = await client.explain_job(job_id)
    absence = account.absence()
    assert absence is not None, f"job {job_id} has an output"
    return absence.cause, absence.text


async def test_compact_handler_that_recorded_none(client: Client) -> None:
    @client.task(kind="quiet")
    async def quiet(job: Job[Args]) -> None:
        return None

    job = await client.insert({}, kind="quiet")
    await work_one(client)
    assert await cause(client, job.id) == (
        NoOutput.NONE_RECORDED,
        "the handler recorded none (set_output)",
    )


async def test_general_handler_that_recorded_none_is_told_by_its_closure(client: Client) -> None:
    @client.task(kind="quiet_tagged")
    async def quiet(job: Job[Args]) -> None:
        return None

    job = await client.insert({}, kind="quiet_tagged", tags=["general"])
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.storage_path == "general"
    assert (await cause(client, job.id))[0] is NoOutput.NONE_RECORDED


async def test_completed_externally_without_an_output(client: Client) -> None:
    job_id, callback_id = await park(client, "hook")
    await client.complete_external(callback_id)
    assert await cause(client, job_id) == (
        NoOutput.COMPLETED_EXTERNAL,
        "completed externally without an output",
    )


async def test_an_external_output_names_its_path_and_completer(client: Client) -> None:
    job_id, callback_id = await park(client, "hook")
    await client.complete_external(callback_id, output={"receipt": "r1"})
    account = await client.explain_job(job_id)
    assert account.absence() is None
    origin = account.provenance()
    assert origin is not None
    assert (origin.attempt, origin.path) == (1, "general path")
    assert origin.by == "an external completion (complete_external)"
    assert origin.prune.startswith("pruned with its queue slot")


async def test_waiting_and_snoozed_outputs_are_discarded(client: Client) -> None:
    waiting, _ = await park(client, "hook")
    assert (await cause(client, waiting))[0] is NoOutput.DISCARDED

    @client.task(kind="later")
    async def later(job: Job[Args]) -> Snooze:
        job.set_output({"partial": True})
        return Snooze(3600)

    snoozed = await client.insert({}, kind="later")
    await work_one(client)
    row = await client.get_job(snoozed.id)
    assert row is not None
    assert row.state is JobState.SCHEDULED
    assert await cause(client, snoozed.id) == (
        NoOutput.DISCARDED,
        "snoozed: an attempt that snoozes has its output discarded",
    )


async def test_a_rescued_attempt_never_finished(client: Client, conn: asyncpg.Connection) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @client.task(kind="slow")
    async def slow(job: Job[Args]) -> None:
        started.set()
        await release.wait()

    job = await client.insert({}, kind="slow", max_attempts=1)
    worker = asyncio.create_task(work_one(client))
    await asyncio.wait_for(started.wait(), 5)
    await conn.execute("UPDATE claim_batches SET claimed_at = now() - interval '10 minutes'")
    assert (await client.run_maintenance()).rescued == 1
    release.set()
    await asyncio.wait_for(worker, 5)
    found, text = await cause(client, job.id)
    assert found is NoOutput.NEVER_FINISHED
    assert text.startswith("rescued: the attempt never finished")


async def test_failed_attempts_keep_theirs_in_an_error_entry(client: Client) -> None:
    @client.task(kind="breaks")
    async def breaks(job: Job[Args]) -> None:
        job.set_output({"updated": 0})
        raise ValueError("boom")

    job = await client.insert({}, kind="breaks", max_attempts=1)
    await work_one(client)
    account = await client.explain_job(job.id)
    assert account.absence() is not None
    assert account.absence() == account.absence()  # pure: the same answer twice
    found, text = await cause(client, job.id)
    assert (found, text) == (
        NoOutput.FAILED,
        "not completed: a failed attempt's output is kept in error entry #1",
    )
    kept = account.kept_provenance()
    assert kept is not None
    assert (kept.attempt, kept.path) == (1, "kept in error entry #1 of the job's payload")
    assert "failed jobs are carried past prune for 3 d" in kept.prune


async def test_deleted_jobs_are_hidden_with_their_prune_time(client: Client) -> None:
    @client.task(kind="done")
    async def done(job: Job[Args]) -> None:
        job.set_output({"n": job.args["n"]})

    compact = await client.insert({"n": 1}, kind="done")
    general = await client.insert({"n": 2}, kind="done", tags=["general"])
    await work_one(client)
    await work_one(client)
    for job_id in (compact.id, general.id):
        await client.delete_job(job_id)
        assert await client.get_job(job_id) is None
        found, text = await cause(client, job_id)
        assert found is NoOutput.DELETED, job_id
        assert "until prune at ~" in text, text
    assert (await cause(client, compact.id))[1].startswith("deleted at ")  # its tombstone's time
    assert "hidden, bytes stay until prune at ~" in (await cause(client, compact.id))[1]
    assert (await cause(client, general.id))[1].startswith(
        "deleted: hidden; its output's row is deleted (the bytes stay until vacuum), its args "
        "until prune at ~"
    )


async def test_an_unknown_job_is_not_found_and_an_unrun_one_not_finished(client: Client) -> None:
    assert (await cause(client, 10**12))[0] is NoOutput.NOT_FOUND

    @client.task(kind="nobody_runs", queue="idle")
    async def never(job: Job[Args]) -> None:
        return None

    job = await client.insert({}, kind="nobody_runs")
    assert await cause(client, job.id) == (NoOutput.NOT_FINISHED, "not run yet (available)")


async def test_prune_estimate_follows_the_queue_ring(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(kind="done")
    async def done(job: Job[Args]) -> None:
        job.set_output({"ok": True})

    job = await client.insert({}, kind="done")
    await work_one(client)
    turned = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
    await conn.execute(
        "UPDATE ring_state SET current_slot = 0, rotated_at = $1 WHERE ring = 'queue'", turned
    )
    account = await client.explain_job(job.id)
    facts = account.facts
    assert (facts.ready_slot, facts.ring_current) == (0, 0)
    # Slot 0 is the current one: it is pruned when the ring comes round to it again.
    assert facts.prune_at() == turned + facts.ring_slots * timedelta(minutes=15)
    now = turned + timedelta(minutes=1)
    assert account.prune_text(now) == (
        f"pruned with its queue slot at ~11:00Z ({facts.ring_slots} more turns of the queue "
        "ring, every 15 min)"
    )


@pytest.fixture
async def v001(pg_dsn: str) -> AsyncIterator[Client]:
    async with database_at(pg_dsn, "awa_account_v001", 1) as dsn:
        async with connect_once(dsn) as admin:
            await admin.execute("SELECT awa.install_queue_storage('older')")
        async with await Client.connect(dsn, "older") as client:
            yield client


async def test_a_schema_without_output_columns_dropped_it(v001: Client) -> None:
    @v001.task(kind="recorded")
    async def recorded(job: Job[Args]) -> None:
        job.set_output({"n": 1})

    job = await v001.insert({}, kind="recorded")
    await work_one(v001)
    assert await cause(v001, job.id) == (
        NoOutput.SCHEMA_MISSING,
        "dropped: the schema had no output column (schema_missing); run awa-tui migrate",
    )
