"""``storage.Tasks``: handlers declared at import time, shared with the clients given them."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from storage import ArgsValidationError, Client, Job, JobState, Tasks

tasks = Tasks()  # as a user's module declares it: no database needed


class Resize(BaseModel):
    width: int


class Thumbnail(BaseModel):
    size: int


@tasks.task(Resize, output=Thumbnail, queue="images")
async def resize(job: Job[Resize]) -> None:
    job.set_output(Thumbnail(size=job.args.width // 2))


def test_the_registry_knows_its_tasks_without_a_database() -> None:
    spec = tasks.spec("resize")
    assert spec is not None
    assert (spec.args_type, spec.output_type, spec.queue) == (Resize, Thumbnail, "images")
    assert tasks.queues() == ["images"]


async def test_a_client_given_tasks_runs_them(migrated_dsn: str, schema: str) -> None:
    async with await Client.connect(migrated_dsn, schema, tasks=tasks) as client:
        assert client.registry is tasks
        row = await client.insert(Resize(width=640))
        assert row.queue == "images"
        with pytest.raises(ArgsValidationError):
            await client.insert({"width": "wide"}, kind="resize")
        await client.run_until_idle(maintenance_interval=None)
        done = await client.get_job(row.id)
    assert done is not None
    assert done.state is JobState.COMPLETED
    assert done.output == {"size": 320}
    assert done.declared_output_type == "Thumbnail"


async def test_client_task_adds_to_its_own_registry_only(client: Client) -> None:
    @client.task(kind="local")
    async def local(job: Job[dict[str, int]]) -> None:
        del job

    assert "local" in client.tasks
    assert tasks.spec("local") is None
