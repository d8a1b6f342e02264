"""An in-process API (``httpx.ASGITransport``) over its own ``Client`` on the test's schema,
as ``awa-tui serve`` runs it: a process that handles no kinds. Jobs are parked waiting for a
callback by the test's worker client (the ``client`` fixture), through the real runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from awa_tui.http.app import create_app
from storage import Client, Job, JobState, WaitForCallback
from storage.testing import work_one

TOKEN = "t0ken-for-tests-only"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
async def server_client(migrated_dsn: str, schema: str) -> AsyncIterator[Client]:
    """The API's own client: it registers no tasks, as the server's does not."""
    async with await Client.connect(migrated_dsn, schema) as c:
        yield c


def asgi_client(app: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api")


@pytest.fixture
async def api(server_client: Client) -> AsyncIterator[httpx.AsyncClient]:
    """The API with a token; requests carry it unless a test overrides the header."""
    async with asgi_client(create_app(server_client, token=TOKEN)) as http:
        http.headers.update(AUTH)
        yield http


@pytest.fixture
def kind(schema: str) -> str:
    """A kind of this test only: descriptors live in the control schema all tests share."""
    return f"{schema}_hook"


async def park(client: Client, kind: str, *, args: Any = None) -> tuple[int, str]:
    """A job of ``kind`` waiting for a callback: (job id, callback id)."""
    if client.task_spec(kind) is None:

        @client.task(kind=kind)
        async def wait(job: Job[Any]) -> WaitForCallback:
            return WaitForCallback(await job.register_callback(timeout_seconds=600))

    job = await client.insert(args if args is not None else {"n": 1}, kind=kind)
    await work_one(client)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    assert row.callback is not None
    return job.id, row.callback.callback_id
