"""Starts that fail cleanly, a runtime that fails loudly, and a listener that comes back.

A failed ``start()`` leaves the client as it was: the error says why, ``start()`` can be called
again (and fails the same way, not "already running"), ``run_until_idle()`` raises instead of
hanging, and ``close()`` returns. A loop that cannot recover turns the runtime's health to
failed and makes a waiting caller raise.
"""

from __future__ import annotations

import asyncio

import asyncpg
import orjson
import pytest
from pydantic import BaseModel, create_model

from storage import Client, Job
from storage.values.errors import ReadOnlyError, RuntimeFailed, StartFailed
from storage.values.health import STOPPED, HealthState
from storage.values.names import channel
from storage.values.output import MAX_DESCRIPTOR_BYTES, output_descriptor


class Work(BaseModel):
    n: int


async def _noop(job: Job[Work]) -> None:
    del job


def _schema_too_large_for_the_column() -> type[BaseModel]:
    """An output model whose compact schema passes the 64 KiB check but whose jsonb text
    (``jsonb::text`` adds a space after every ``:`` and ``,``) breaks the column's CHECK."""
    fields = 920
    model: type[BaseModel] = create_model(  # type: ignore[call-overload]
        "Wide", **{f"field_{i:05d}": (int, ...) for i in range(fields)}
    )
    described = output_descriptor(model)
    assert described is not None
    assert "schema" in described, "schema dropped: too large"
    return model


async def test_read_only_start_fails_clearly_twice_and_close_is_prompt(
    migrated_dsn: str, schema: str
) -> None:
    client = await Client.connect(migrated_dsn, schema, read_only=True)
    client.task(Work)(_noop)
    for _ in range(2):  # the second start fails the same way, not "already running"
        with pytest.raises(ReadOnlyError, match="read-only"):
            await client.start()
        assert client.health.state is HealthState.STOPPED
    with pytest.raises(ReadOnlyError):
        await client.run_until_idle()
    await asyncio.wait_for(client.close(), 10)  # a hang guard: close must not wait on a ghost


async def test_descriptor_check_violation_fails_start_and_leaves_the_client_usable(
    client: Client, conn: asyncpg.Connection, schema: str
) -> None:
    kind = f"wide_{schema}"  # descriptors live in the shared control schema
    wide = _schema_too_large_for_the_column()
    described = output_descriptor(wide)
    assert described is not None
    assert len(orjson.dumps(described)) <= MAX_DESCRIPTOR_BYTES

    @client.task(Work, kind=kind, output=wide)
    async def work(job: Job[Work]) -> None:
        del job

    for _ in range(2):
        with pytest.raises(StartFailed, match="descriptors") as caught:
            await client.start()
        assert "SQLSTATE 23514" in str(caught.value)
    # Nothing was written; once the output type fits, the same client starts and runs.
    kinds = "SELECT count(*) FROM awa.job_kind_descriptors WHERE kind = $1"
    assert await conn.fetchval(kinds, kind) == 0
    client.task(Work, kind=kind, output=Work)(work)
    await client.insert(Work(n=1), kind=kind)
    await asyncio.wait_for(client.run_until_idle(), 30)
    assert await conn.fetchval(kinds, kind) == 1


async def test_a_loop_that_cannot_recover_fails_the_runtime_loudly(
    client: Client, conn: asyncpg.Connection, schema: str
) -> None:
    client.task(Work)(_noop)
    await client.start(poll_interval=0.01, maintenance_interval=0.01)
    assert client.health.state is HealthState.RUNNING
    # Every claim now fails with the same server error: retrying cannot fix it.
    await conn.execute(f"DROP SCHEMA {schema} CASCADE")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 30

    def failed() -> bool:
        return client.health.state is HealthState.FAILED

    while not failed():  # a bounded poll of the real state
        assert loop.time() < deadline, "the runtime never reported its failure"
        await asyncio.sleep(0.02)
    with pytest.raises(RuntimeFailed, match="times in a row"):
        await client.run_until_idle()
    health = client.health
    assert health.state is HealthState.FAILED
    assert not client.session.leader.leading  # a failed runtime leaves maintenance to others
    assert health.reason is not None
    assert "SQLSTATE" in health.reason
    runtime = client.worker.runtime
    assert runtime is not None
    with pytest.raises(RuntimeFailed):  # so does a caller waiting for quiet
        await runtime.wait_quiet()
    await asyncio.wait_for(client.shutdown(), 10)
    assert client.health == STOPPED


async def test_the_listener_listens_again_on_a_new_connection_after_losing_its_own(
    client: Client, conn: asyncpg.Connection
) -> None:
    client.task(Work)(_noop)
    await client.start(heartbeat_interval=0.1, maintenance_interval=None)
    try:
        before = client.notices.pid
        assert before is not None
        assert await conn.fetchval("SELECT pg_terminate_backend($1)", before)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 20
        while client.notices.pid in (None, before):  # a bounded poll of the real condition
            assert loop.time() < deadline, "the listener did not come back"
            await asyncio.sleep(0.02)
        heard = asyncio.Event()
        client.callback_ops.waiters["probe"] = heard
        await conn.execute("SELECT pg_notify($1, 'probe')", channel("callback", client.schema))
        await asyncio.wait_for(heard.wait(), 10)
    finally:
        client.callback_ops.waiters.pop("probe", None)
        await client.shutdown()
