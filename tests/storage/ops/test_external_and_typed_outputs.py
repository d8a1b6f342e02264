"""External completion with an output, typed outputs, descriptors and the output metrics."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import BaseModel

from storage import (
    AwaError,
    CallbackNotFound,
    Client,
    ExternalCompletion,
    Job,
    JobState,
    OutputError,
    Snooze,
    WaitForCallback,
)
from storage.db.metrics import OutputMetrics
from storage.testing import HandlerJob, work_one
from tests.storage.metric_points import counter_points, histogram_sums


class Resize(BaseModel):
    width: int


class Thumbnail(BaseModel):
    url: str
    bytes: int


class Other(BaseModel):
    url: str


async def _waiting_job(client: Client) -> tuple[int, str]:
    @client.task(Resize, output=Thumbnail)
    async def resize(job: Job[Resize]) -> WaitForCallback:
        job.set_output(Thumbnail(url="handler", bytes=1))  # discarded when parked
        return WaitForCallback(await job.register_callback(timeout_seconds=600))

    job = await client.insert(Resize(width=10))
    await work_one(client)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.callback is not None
    return job.id, row.callback.callback_id


async def test_external_completion_stores_its_own_validated_output(client: Client) -> None:
    job_id, callback_id = await _waiting_job(client)
    row = await client.complete_external(
        callback_id, {"token": "s3cr3t"}, output={"url": "s3://a", "bytes": 42}
    )
    assert row.id == job_id
    assert row.state is JobState.COMPLETED
    assert row.output_text == '{"url":"s3://a","bytes":42}'
    assert row.output_as(Thumbnail) == Thumbnail(url="s3://a", bytes=42)
    assert "s3cr3t" not in row.model_dump_json()  # the payload is never stored


async def test_external_completion_without_output_stores_none(client: Client) -> None:
    _, callback_id = await _waiting_job(client)
    row = await client.complete_external(callback_id)
    assert row.state is JobState.COMPLETED
    assert row.output is None


@pytest.mark.parametrize(
    ("output", "reason"),
    [
        ({"url": "x", "bytes": float("inf")}, "invalid"),
        ("x" * 5000, "too_large"),
        ({"url": "\x00", "bytes": 1}, "invalid"),
    ],
)
async def test_invalid_external_output_fails_the_call_and_writes_nothing(
    client: Client, output: object, reason: str
) -> None:
    job_id, callback_id = await _waiting_job(client)
    with pytest.raises(OutputError) as caught:
        await client.complete_external(callback_id, output=output)
    assert caught.value.reason == reason
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    assert (await client.complete_external(callback_id)).state is JobState.COMPLETED


async def test_output_for_refuses_a_job_of_another_kind_and_writes_nothing(
    client: Client,
) -> None:
    job_id, callback_id = await _waiting_job(client)
    opts = ExternalCompletion().output_for("other_kind", Other, Other(url="x"))
    with pytest.raises(OutputError, match="is of kind 'resize', not 'other_kind'"):
        await client.complete_external_with(callback_id, opts)
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    good = ExternalCompletion().output_for("resize", Thumbnail, Thumbnail(url="y", bytes=2))
    done = await client.complete_external_with(callback_id, good)
    assert done.output == {"url": "y", "bytes": 2}


async def test_declared_type_refuses_an_instance_of_another_class(client: Client) -> None:
    _, callback_id = await _waiting_job(client)
    with pytest.raises(OutputError) as caught:
        await client.complete_external(callback_id, output=Other(url="x"))
    assert caught.value.reason == "wrong_type"


async def test_unknown_callback_raises_callback_not_found(client: Client) -> None:
    with pytest.raises(CallbackNotFound):
        await client.complete_external("00000000-0000-0000-0000-000000000000", output={"a": 1})


async def test_external_completion_wins_against_a_sequential_waiter(client: Client) -> None:
    registered = asyncio.Event()
    tokens: list[str] = []
    outcomes: list[str] = []

    @client.task(Resize)
    async def resize(job: Job[Resize]) -> None:
        token = await job.register_callback(timeout_seconds=600)
        tokens.append(token.callback_id)
        job.set_output({"from": "handler"})
        registered.set()
        try:
            await job.wait_for_callback(token)
        except AwaError as exc:
            outcomes.append(type(exc).__name__)
            raise

    job = await client.insert(Resize(width=1))
    runner = asyncio.create_task(work_one(client))
    await registered.wait()
    row = await client.complete_external(tokens[0], output={"from": "external"})
    assert row.output == {"from": "external"}
    await runner
    final = await client.get_job(job.id)
    assert final is not None
    assert final.output == {"from": "external"}
    assert outcomes == ["StaleAttempt"]


async def test_sequential_waiter_resumes_and_completes_with_its_own_output(
    client: Client,
) -> None:
    registered = asyncio.Event()
    tokens: list[str] = []

    @client.task(Resize)
    async def resize(job: Job[Resize]) -> None:
        token = await job.register_callback(timeout_seconds=600)
        tokens.append(token.callback_id)
        registered.set()
        payload = await job.wait_for_callback(token)
        job.set_output({"resumed_with": payload})

    job = await client.insert(Resize(width=1))
    runner = asyncio.create_task(work_one(client))
    await registered.wait()
    # Registered is not yet waiting: the handler marks itself waiting inside
    # wait_for_callback, a round trip later. Poll the real state (bounded), as a person would.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 20
    while (waiting := await client.get_job(job.id)) is not None and (
        waiting.state is JobState.RUNNING
    ):
        assert loop.time() < deadline, "the handler never started waiting"
        await asyncio.sleep(0.01)
    assert waiting is not None
    assert waiting.state is JobState.WAITING_EXTERNAL
    await client.resolve_callback(tokens[0], {"ok": True})
    await runner
    final = await client.get_job(job.id)
    assert final is not None
    assert final.output == {"resumed_with": {"ok": True}}


async def test_typed_task_refuses_other_classes_in_the_handler(client: Client) -> None:
    job = HandlerJob(Resize(width=1), kind="resize", output_type=Thumbnail)
    with pytest.raises(OutputError) as caught:
        job.set_output(Other(url="x"))
    assert caught.value.reason == "wrong_type"
    assert job.output is None
    job.set_output(Thumbnail(url="u", bytes=3))
    assert job.seal() == '{"url":"u","bytes":3}'


async def test_descriptor_publishes_the_declared_type_and_schema(client: Client) -> None:
    @client.task(Resize, output=Thumbnail)
    async def resize(job: Job[Resize]) -> None:
        return None

    client.job_kind_descriptor("explicit", output={"type": "Custom", "schema": {"type": "string"}})
    await client.sync_descriptors()
    declared = await client.get_descriptor("resize")
    assert declared is not None
    assert declared.output_type_name == "Thumbnail"
    assert declared.output_schema is not None
    assert set(declared.output_schema["properties"]) == {"url", "bytes"}
    explicit = await client.get_descriptor("explicit")
    assert explicit is not None
    assert explicit.output == {"type": "Custom", "schema": {"type": "string"}}


async def test_output_as_refuses_a_type_the_kind_does_not_declare(client: Client) -> None:
    from storage.values.errors import OutputDecodeError

    @client.task(Resize, output=Thumbnail)
    async def resize(job: Job[Resize]) -> None:
        job.set_output(Thumbnail(url="u", bytes=1))

    @client.task(kind="plain")
    async def plain(job: Job[dict[str, int]]) -> None:
        job.set_output({"url": "u", "bytes": 1})

    typed = await client.insert(Resize(width=1))
    other = await client.insert({"a": 1}, kind="plain")
    await work_one(client)
    await work_one(client)
    row = await client.get_job(typed.id)
    assert row is not None
    assert row.declared_output_type == "Thumbnail"
    assert row.output_as(Thumbnail) == Thumbnail(url="u", bytes=1)
    with pytest.raises(OutputDecodeError, match="declares output type Thumbnail, not Other"):
        row.output_as(Other)
    undeclared = await client.get_job(other.id)
    assert undeclared is not None
    assert undeclared.declared_output_type is None  # decodes like args: no kind to check
    assert undeclared.output_as(Other) == Other(url="u")


async def test_output_metrics_count_recorded_sizes_and_drops(
    client: Client, conn: asyncpg.Connection
) -> None:
    reader = InMemoryMetricReader()
    client.metrics = OutputMetrics(meter_provider=MeterProvider(metric_readers=[reader]))

    @client.task(Resize)
    async def resize(job: Job[Resize]) -> object:
        job.set_output({"w": job.args.width})
        if job.args.width == 2:
            raise RuntimeError("fails")
        if job.args.width == 3:
            return Snooze(60)
        return None

    for width in (1, 2, 3):
        await client.insert(Resize(width=width))
        await work_one(client)
    recorded = {
        attrs["awa.job.outcome"]: value
        for attrs, value in counter_points(reader, "awa.job.output_recorded")
    }
    assert recorded == {"completed": 1, "failed": 1}
    assert sum(histogram_sums(reader, "awa.job.output_size")) == 2 * len('{"w":1}')
    dropped = [
        (attrs["awa.output.reason"], value)
        for attrs, value in counter_points(reader, "awa.job.output_dropped")
    ]
    assert dropped == [("outcome", 1)]
