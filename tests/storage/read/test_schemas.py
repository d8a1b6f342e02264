"""The schema picker's read: the installed queue-storage schemas, each with its own counts."""

from __future__ import annotations

from datetime import UTC, datetime

from storage import Client, Job, JobState
from storage.db.migrator import install_schema
from storage.db.pool import connect_once

LATER = datetime(2999, 1, 1, tzinfo=UTC)


async def _noop(job: Job[dict[str, int]]) -> None:
    return None


async def test_each_schema_is_listed_with_its_own_counts(
    migrated_dsn: str, schema: str, client: Client
) -> None:
    other = f"{schema}_other"
    async with connect_once(migrated_dsn) as conn:
        await install_schema(conn, other)
    client.task(kind="s_noop", queue="s")(_noop)
    await client.insert({"n": 1}, kind="s_noop")
    await client.insert({"n": 2}, kind="s_noop")
    async with await Client.connect(migrated_dsn, other) as there:
        there.task(kind="s_noop", queue="s")(_noop)
        await there.insert({"n": 3}, kind="s_noop", run_at=LATER)

    listed = await client.list_schemas([other, schema, "not_installed"])

    assert [s.name for s in listed] == sorted([schema, other])
    by_name = {s.name: s.counts.by_state for s in listed}
    assert by_name[schema][JobState.AVAILABLE] == 2
    assert by_name[schema][JobState.SCHEDULED] == 0
    assert by_name[other][JobState.AVAILABLE] == 0
    assert by_name[other][JobState.SCHEDULED] == 1
    # the client's own schema is still the one it reads after the picker's read
    assert (await client.counts()).by_state[JobState.AVAILABLE] == 2
