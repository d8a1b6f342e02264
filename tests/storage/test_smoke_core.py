from __future__ import annotations

from pydantic import BaseModel

from storage import Client, Job, JobState


class Noop(BaseModel):
    n: int


async def test_insert_run_until_idle_completes_compact(client: Client, conn) -> None:
    @client.task(Noop)
    async def handle(job: Job[Noop]) -> None:
        assert isinstance(job.args, Noop)

    rows = await client.insert_many([Noop(n=i) for i in range(20)])
    assert all(r.state is JobState.AVAILABLE for r in rows)
    await client.run_until_idle()
    got = await client.get_job(rows[0].id)
    assert got is not None and got.state is JobState.COMPLETED
    assert got.storage_path == "compact"
    assert await conn.fetchval("select count(*) from done_entries") == 0
