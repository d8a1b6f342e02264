"""ADR-048 "Where an attempt's output goes", row by row, against a real PostgreSQL."""

from __future__ import annotations

import asyncpg
import orjson
import pytest
from pydantic import BaseModel

from storage import (
    Cancel,
    Client,
    Job,
    JobEvent,
    JobState,
    OutputError,
    RetryAfter,
    Snooze,
    WaitForCallback,
    encode_output,
)
from storage.finalize.compact_writes import MAX_BATCH_OUTPUT_BYTES, complete_compact, split_parts
from storage.finalize.types import CompactCompletion, Outcome
from storage.runtime.claim import claim_batch
from storage.testing import work_one


class Work(BaseModel):
    n: int = 0


def handler_returning(client: Client, output: object, result: object = None) -> None:
    @client.task(Work)
    async def handle(job: Job[Work]) -> object:
        job.set_output(output)
        if isinstance(result, BaseException):
            raise result
        return result


async def test_compact_completion_stores_the_output_exactly(
    client: Client, conn: asyncpg.Connection
) -> None:
    handler_returning(client, {"z": 1.0, "a": [1, 2], "é": "ü"})
    job = await client.insert(Work())
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.storage_path == "compact"
    assert result.row.output_text == '{"z":1.0,"a":[1,2],"é":"ü"}'  # key order and 1.0 kept
    assert list(result.row.output) == ["z", "a", "é"]
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 0
    view = await conn.fetchval("SELECT output FROM terminal_jobs WHERE job_id = $1", job.id)
    assert view == result.row.output_text


async def test_general_completion_stores_the_output_in_done_entries(
    client: Client, conn: asyncpg.Connection
) -> None:
    handler_returning(client, [1.5, "x"])
    job = await client.insert(Work(), metadata={"tenant": "a"})
    result = await work_one(client)
    assert result is not None
    assert result.row is not None
    assert result.row.storage_path == "general"
    assert result.row.output_text == '[1.5,"x"]'
    stored = await conn.fetchval("SELECT output FROM done_entries WHERE job_id = $1", job.id)
    assert stored == '[1.5,"x"]'


async def test_ten_thousand_hundred_byte_outputs_stay_on_the_compact_path(
    client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(Work)
    async def handle(job: Job[Work]) -> None:
        job.set_output({"job": job.args.n, "pad": "x" * (83 - len(str(job.args.n)))})

    rows = []
    for start in range(0, 10_000, 2_500):
        rows += await client.insert_many([Work(n=i) for i in range(start, start + 2_500)])
    await client.run_until_idle(
        concurrency=512, claim_size=512, claim_threshold=512, maintenance_interval=None
    )
    assert await conn.fetchval("SELECT count(*) FROM done_entries") == 0
    assert (
        await conn.fetchval("SELECT sum(completed_count) FROM receipt_completion_batches") == 10_000
    )
    sizes = await conn.fetch(
        "SELECT DISTINCT octet_length(o::text) AS n"
        " FROM receipt_completion_batches, unnest(outputs) o"
    )
    assert [r["n"] for r in sizes] == [100]
    for row in rows[::97]:
        got = await client.get_job(row.id)
        assert got is not None
        assert got.output == {"job": row.args["n"], "pad": got.output["pad"]}
        assert len(got.output_text or "") == 100


async def test_batches_split_once_outputs_pass_64_kib(
    client: Client, conn: asyncpg.Connection
) -> None:
    handler_returning(client, None)  # makes the kind known, whatever ran before
    await client.insert_many([Work(n=i) for i in range(40)], kind="work")
    async with client.pool.acquire() as c:
        claimed = await claim_batch(c, ["default"], 40, 60)
        text = orjson.dumps(list(range(1000))).decode()[:4000].rsplit(",", 1)[0] + "]"
        items = [
            CompactCompletion(
                j.job_id, j.run_lease, j.claim_id, j.lane_seq, text if j.job_id % 2 else None, False
            )
            for j in claimed
        ]
        await complete_compact(c, items, outputs_supported=True)
    rows = await conn.fetch(
        "SELECT completed_count,"
        " (SELECT sum(octet_length(o::text)) FROM unnest(outputs) o) AS bytes,"
        " cardinality(outputs) AS n FROM receipt_completion_batches ORDER BY batch_id"
    )
    assert len(rows) > 1
    assert sum(r["completed_count"] for r in rows) == 40
    assert all(r["n"] == r["completed_count"] for r in rows)  # aligned with job_ids
    assert all(r["bytes"] <= MAX_BATCH_OUTPUT_BYTES for r in rows)
    for j in claimed:
        got = await client.get_job(j.job_id)
        assert got is not None
        assert got.output_text == (text if j.job_id % 2 else None)


async def test_one_flush_keeps_each_output_in_its_place(client: Client) -> None:
    """The flush sends its outputs as one separated text: a separator or an empty string
    inside an output, and jobs without one, must not shift or merge anything."""
    values: list[object] = ["", "a\x1eb", None, {"": "\x1e", "n": [1, 2]}, [], "\n", None]
    handler_returning(client, None)  # makes the kind known
    await client.insert_many([Work(n=i) for i in range(len(values))], kind="work")
    async with client.pool.acquire() as c:
        claimed = await claim_batch(c, ["default"], len(values), 60)
        assert len(claimed) == len(values)
        texts = [encode_output(value) for value in values]
        items = [
            CompactCompletion(j.job_id, j.run_lease, j.claim_id, j.lane_seq, t, False)
            for j, t in zip(claimed, texts, strict=True)
        ]
        outcomes = await complete_compact(c, items, outputs_supported=True)
    assert set(outcomes) == {Outcome.WRITTEN}
    for j, text in zip(claimed, texts, strict=True):
        got = await client.get_job(j.job_id)
        assert got is not None
        assert got.output_text == text


def test_the_batch_split_counts_utf8_bytes_not_characters() -> None:
    text = '"' + "é" * 2000 + '"'  # 2,002 characters, 4,002 bytes
    items = [CompactCompletion(n, 1, 7, n, text, False) for n in range(20)]
    # 16 x 4,002 B fit in 64 KiB; counted in characters all 20 would (40 KB).
    assert split_parts(items, "\x1e".join([text] * 20)) == [0] * 16 + [1] * 4


async def test_a_batch_without_outputs_stores_null(
    client: Client, conn: asyncpg.Connection
) -> None:
    handler_returning(client, None)
    await client.insert(Work())
    await work_one(client)
    assert await conn.fetchval("SELECT outputs IS NULL FROM receipt_completion_batches")


@pytest.mark.parametrize(
    ("result", "state"),
    [
        (RuntimeError("boom"), JobState.RETRYABLE),
        (Cancel("stop"), JobState.CANCELLED),
        (RetryAfter(60), JobState.RETRYABLE),
    ],
)
async def test_failures_keep_the_output_in_their_error_entry(
    client: Client, result: object, state: JobState
) -> None:
    handler_returning(client, {"partial": 3}, result)
    await client.insert(Work())
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.state is state
    assert run.row.output is None
    assert run.row.errors[-1]["output"] == {"partial": 3}
    assert run.row.kept_output_position() == len(run.row.errors) - 1


async def test_terminal_failure_and_exhaustion_keep_the_output(client: Client) -> None:
    handler_returning(client, "last words", RuntimeError("boom"))
    await client.insert(Work(), max_attempts=1)
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.state is JobState.FAILED
    assert run.row.errors[-1]["terminal"] is True
    assert run.row.errors[-1]["output"] == "last words"
    assert run.row.error_output_as(str) == "last words"


async def test_only_the_latest_entry_with_an_output_keeps_it_and_dispatch_strips_them(
    client: Client, conn: asyncpg.Connection
) -> None:
    seen_errors: list[list[dict[str, object]]] = []

    @client.task(Work)
    async def handle(job: Job[Work]) -> None:
        seen_errors.append(job.errors)
        if job.attempt < 3:
            job.set_output({"attempt": job.attempt})
            raise RuntimeError(f"fail {job.attempt}")
        if job.attempt == 3:
            raise RuntimeError("fail without output")

    job = await client.insert(Work(), max_attempts=5)
    for _ in range(4):
        await conn.execute("UPDATE deferred_jobs SET run_at = now()")
        await client.run_maintenance()
        await work_one(client)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.COMPLETED
    assert [("output" in e) for e in row.errors] == [False, True, False]
    assert row.errors[1]["output"] == {"attempt": 2}
    assert all("output" not in e for errors in seen_errors for e in errors)
    assert [len(e) for e in seen_errors] == [0, 1, 2, 3]


async def test_snooze_and_wait_for_callback_discard_the_output(client: Client) -> None:
    @client.task(Work)
    async def handle(job: Job[Work]) -> object:
        job.set_output("discarded")
        if job.args.n == 1:
            return Snooze(60)
        return WaitForCallback(await job.register_callback(timeout_seconds=600))

    snoozed = await client.insert(Work(n=1))
    await work_one(client)
    waiting = await client.insert(Work(n=2))
    await work_one(client)
    for job_id in (snoozed.id, waiting.id):
        row = await client.get_job(job_id)
        assert row is not None
        assert row.output is None
        assert row.errors == []
    row = await client.get_job(waiting.id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL


async def test_retry_after_with_output_writes_an_entry(client: Client) -> None:
    handler_returning(client, {"polled": True}, RetryAfter(5))
    await client.insert(Work())
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.errors == [run.row.errors[0]]
    assert run.row.errors[0]["output"] == {"polled": True}


async def test_wait_for_callback_without_registration_keeps_output_in_violation_entry(
    client: Client,
) -> None:
    from storage import CallbackToken

    handler_returning(client, {"why": "forgot"}, WaitForCallback(CallbackToken("nope", 1, 1)))
    await client.insert(Work(), max_attempts=3)
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.state is JobState.FAILED
    entry = run.row.errors[-1]
    assert entry["error"].startswith("wait_for_callback_contract_violation")
    assert entry["output"] == {"why": "forgot"}


async def test_output_error_does_not_poison_the_attempt_when_caught(client: Client) -> None:
    @client.task(Work)
    async def handle(job: Job[Work]) -> None:
        job.set_output({"first": 1})
        with pytest.raises(OutputError) as too_large:
            job.set_output("x" * 5000)
        assert too_large.value.reason == "too_large"
        assert job.output is None
        job.set_output({"kept": True})

    await client.insert(Work())
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.state is JobState.COMPLETED
    assert run.row.output == {"kept": True}


async def test_uncaught_output_error_fails_terminally_without_output(client: Client) -> None:
    handler_returning(client, {float("nan"): 1})
    await client.insert(Work(), max_attempts=5)
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.state is JobState.FAILED
    entry = run.row.errors[-1]
    assert entry["terminal"] is True
    assert "OutputError" in entry["error"]
    assert "output" not in entry


async def test_null_clears_and_the_slot_is_sealed_after_return(client: Client) -> None:
    leaked: list[Job[Work]] = []

    @client.task(Work)
    async def handle(job: Job[Work]) -> None:
        job.set_output("something")
        job.set_output(None)
        leaked.append(job)

    await client.insert(Work())
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.output is None
    with pytest.raises(OutputError) as sealed:
        leaked[0].set_output("late")
    assert sealed.value.reason == "sealed"


async def test_completed_event_carries_the_sealed_output_from_memory(client: Client) -> None:
    events: list[JobEvent] = []
    client.on_event(events.append, kinds=["work"])
    handler_returning(client, {"n": 1})
    await client.insert(Work())
    await work_one(client)
    completed = [e for e in events if e.name == "completed"]
    assert [e.output for e in completed] == [{"n": 1}]


async def test_list_reads_never_load_outputs(client: Client) -> None:
    handler_returning(client, {"big": "y" * 2000})
    job = await client.insert(Work())
    await work_one(client)
    (listed,) = await client.list_jobs(state=JobState.COMPLETED)
    assert listed.id == job.id
    assert listed.output_text is None
    assert listed.output is None
    assert listed.has_output is True


async def test_staged_follow_up_is_inserted_with_the_completion(client: Client) -> None:
    @client.task(Work)
    async def handle(job: Job[Work]) -> None:
        if job.args.n == 0:
            job.stage(Work(n=1))
            job.set_output({"staged": 1})

    job = await client.insert(Work(n=0))
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.state is JobState.COMPLETED
    assert run.row.output == {"staged": 1}
    follow_up = await client.list_jobs(state=JobState.AVAILABLE)
    assert [r.args for r in follow_up] == [{"n": 1}]
    assert follow_up[0].id > job.id


async def test_a_failed_stage_poisons_the_attempt_and_keeps_the_output(client: Client) -> None:
    from storage import StageError

    @client.task(Work)
    async def handle(job: Job[Work]) -> None:
        job.set_output({"did": "side effects"})
        with pytest.raises(StageError):
            job.stage({"not": "serializable", "x": {1, 2}}, kind="work")

    await client.insert(Work(), max_attempts=5)
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.state is JobState.FAILED
    entry = run.row.errors[-1]
    assert entry["terminal"] is True
    assert entry["error"].startswith("staged follow-up failed")
    assert entry["output"] == {"did": "side effects"}
    assert await client.list_jobs(state=JobState.AVAILABLE) == []


async def test_completed_specs_never_see_the_output(client: Client) -> None:
    seen: list[object] = []

    def build(row: object) -> Work:
        seen.append(getattr(row, "output", "missing"))
        return Work(n=99)

    client.on_completed("work", build)
    handler_returning(client, {"secret": "derived"})
    job = await client.insert(Work())
    run = await work_one(client)
    assert run is not None
    assert run.row is not None
    assert run.row.output == {"secret": "derived"}
    assert seen == [None]
    (follow_up,) = await client.list_jobs(state=JobState.AVAILABLE)
    assert follow_up.args == {"n": 99}
    assert follow_up.id != job.id


async def test_rescue_entry_leaves_the_earlier_kept_output_in_place(
    client: Client, conn: asyncpg.Connection
) -> None:
    from storage.ops.maintenance import MaintenanceSettings

    handler_returning(client, {"first": "attempt"}, RuntimeError("boom"))
    job = await client.insert(Work(), max_attempts=5)
    await work_one(client)
    await conn.execute("UPDATE deferred_jobs SET run_at = now()")
    await client.run_maintenance()
    async with client.pool.acquire() as c:
        (claimed,) = await claim_batch(c, ["default"], 1, 600)  # a worker that then dies
    assert claimed.job_id == job.id
    await client.run_maintenance(MaintenanceSettings(heartbeat_stale_seconds=0))
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.RETRYABLE
    assert [e["error"] for e in row.errors] == [
        "RuntimeError: boom",
        "heartbeat stale: worker presumed dead",
    ]
    assert row.kept_output_position() == 0
    assert row.errors[0]["output"] == {"first": "attempt"}


async def test_kept_output_survives_the_dlq_and_a_later_failure_replaces_it(
    client: Client,
) -> None:
    await client.configure_queue("default", dlq=True)

    @client.task(Work)
    async def handle(job: Job[Work]) -> None:
        job.set_output({"run": job.run_lease})
        raise RuntimeError("still broken")

    job = await client.insert(Work(), max_attempts=1)
    await work_one(client)
    dead = await client.get_job(job.id)
    assert dead is not None
    assert dead.dlq is not None
    assert dead.errors[-1]["output"] == {"run": 1}
    await client.retry_dlq(job.id)
    await work_one(client)
    again = await client.get_job(job.id)
    assert again is not None
    assert again.dlq is not None
    assert len(again.errors) == 2
    assert [("output" in e) for e in again.errors] == [False, True]
    assert again.errors[1]["output"] == {"run": 2}
