"""Typed external completion (stored as the model's dump, or refused with the job waiting),
checks from the published descriptor in a process that handles no kinds, and the
``abandoned`` drop reason."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import BaseModel, Field

from storage import Client, Job, JobState, OutputError, WaitForCallback
from storage.db.metrics import OutputMetrics
from storage.testing import work_one
from storage.values.errors import OutputDecodeError
from tests.storage.metric_points import counter_points

SECRET = "s3cr3t-0utput-v4lue"


class Resize(BaseModel):
    width: int


class Thumbnail(BaseModel):
    url: str
    bytes: int = Field(ge=0)


class Other(BaseModel):
    url: str


@pytest.fixture
def kind(schema: str) -> str:
    """A kind of this test only: descriptors live in the shared control schema."""
    return f"{schema}_thumb"


async def _waiting(client: Client, kind: str) -> tuple[int, str]:
    @client.task(Resize, kind=kind, output=Thumbnail)
    async def resize(job: Job[Resize]) -> WaitForCallback:
        return WaitForCallback(await job.register_callback(timeout_seconds=600))

    job = await client.insert(Resize(width=1), kind=kind)
    await work_one(client)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.callback is not None
    return job.id, row.callback.callback_id


async def _still_waiting(client: Client, job_id: int) -> None:
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    assert row.output_text is None


async def test_typed_completion_stores_the_models_json_dump(client: Client, kind: str) -> None:
    _, callback_id = await _waiting(client, kind)
    row = await client.complete_external(
        callback_id, output={"url": "x", "bytes": "42", "extra": 1}
    )
    assert row.state is JobState.COMPLETED
    assert row.output_text == '{"url":"x","bytes":42}'


async def test_typed_completion_that_does_not_validate_is_refused_and_the_job_waits(
    client: Client, kind: str
) -> None:
    job_id, callback_id = await _waiting(client, kind)
    with pytest.raises(OutputError) as caught:
        await client.complete_external(callback_id, output={"url": "x", "bytes": SECRET})
    assert caught.value.reason == "wrong_type"
    assert "$.bytes" in str(caught.value)
    assert SECRET not in str(caught.value)
    await _still_waiting(client, job_id)


async def test_a_client_without_the_model_checks_the_published_schema(
    client: Client, console: Client, kind: str
) -> None:
    job_id, callback_id = await _waiting(client, kind)
    await client.sync_descriptors()
    with pytest.raises(OutputError) as caught:
        await console.complete_external(callback_id, output={"url": "x", "bytes": -1})
    assert caught.value.reason == "wrong_type"
    assert caught.value.path == "$.bytes"
    assert "$.bytes: must be >= 0" in str(caught.value)  # a keyword the old subset ignored
    with pytest.raises(OutputError, match=r"\$\.bytes: expected integer, got string"):
        await console.complete_external(callback_id, output={"url": "x", "bytes": SECRET})
    await _still_waiting(console, job_id)
    row = await console.complete_external(callback_id, output={"url": "x", "bytes": 42, "extra": 1})
    assert row.output_text == '{"url":"x","bytes":42,"extra":1}'  # fits: stored as sent


async def test_output_as_checks_the_published_declaration_in_a_client_without_tasks(
    client: Client, console: Client, kind: str
) -> None:
    @client.task(Resize, kind=kind, output=Thumbnail)
    async def resize(job: Job[Resize]) -> None:
        job.set_output(Thumbnail(url="u", bytes=1))

    job = await client.insert(Resize(width=1), kind=kind)
    await work_one(client)
    unpublished = await console.get_job(job.id)
    assert unpublished is not None
    assert unpublished.declared_output_type is None
    await client.sync_descriptors()
    row = await console.get_job(job.id)
    assert row is not None
    assert row.declared_output_type == "Thumbnail"
    assert row.output_as(Thumbnail) == Thumbnail(url="u", bytes=1)
    with pytest.raises(OutputDecodeError, match="declares output type Thumbnail, not Other"):
        row.output_as(Other)


async def test_an_output_from_an_attempt_cancelled_while_running_is_dropped_as_abandoned(
    client: Client, kind: str
) -> None:
    reader = InMemoryMetricReader()
    client.metrics = OutputMetrics(meter_provider=MeterProvider(metric_readers=[reader]))

    @client.task(Resize, kind=kind)
    async def resize(job: Job[Resize]) -> None:
        job.set_output({"done": True})
        await client.cancel_job(job.id)  # an operator cancels it before it returns

    job = await client.insert(Resize(width=1), kind=kind)
    await work_one(client)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.CANCELLED
    assert row.output is None
    dropped = [
        (attrs["awa.output.reason"], value)
        for attrs, value in counter_points(reader, "awa.job.output_dropped")
    ]
    assert dropped == [("abandoned", 1)]
    assert counter_points(reader, "awa.job.output_recorded") == []
