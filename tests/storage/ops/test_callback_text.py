"""External callback calls refuse text PostgreSQL cannot store before it reaches the driver:
an id with a NUL names no callback, an error text with one is refused, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest

from storage import CallbackNotFound, Client, Job, JobState, UnstorableText, WaitForCallback
from storage.testing import work_one


async def _parked(client: Client) -> tuple[int, str]:
    @client.task(kind="hook")
    async def wait(job: Job[dict[str, int]]) -> WaitForCallback:
        return WaitForCallback(await job.register_callback(timeout_seconds=600))

    job = await client.insert({"n": 1}, kind="hook")
    await work_one(client)
    row = await client.get_job(job.id)
    assert row is not None
    assert row.callback is not None
    return job.id, row.callback.callback_id


@pytest.mark.parametrize(
    "call",
    ["complete_external", "fail_external", "retry_external", "heartbeat_callback", "resolve"],
)
@pytest.mark.parametrize("callback_id", ["a\x00b", "a\ud800b"], ids=["nul", "surrogate"])
async def test_an_unstorable_callback_id_is_not_found(
    client: Client, call: str, callback_id: str
) -> None:
    calls: dict[str, Callable[[], Awaitable[object]]] = {
        "complete_external": lambda: client.complete_external(callback_id),
        "fail_external": lambda: client.fail_external(callback_id, "x"),
        "retry_external": lambda: client.retry_external(callback_id),
        "heartbeat_callback": lambda: client.heartbeat_callback(callback_id),
        "resolve": lambda: client.resolve_callback(callback_id),
    }
    with pytest.raises(CallbackNotFound, match="cannot be stored"):
        await calls[call]()


@pytest.mark.parametrize(
    ("error", "reason"),
    [("a\x00b", "a NUL character at position 1"), ("\ud800", "a lone surrogate at position 0")],
)
async def test_fail_external_refuses_an_unstorable_error_and_the_job_waits(
    client: Client, error: str, reason: str
) -> None:
    job_id, callback_id = await _parked(client)
    with pytest.raises(UnstorableText, match=reason):
        await client.fail_external(callback_id, error)
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.WAITING_EXTERNAL
    assert row.errors == []
