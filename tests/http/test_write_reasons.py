"""Every operator write over HTTP takes ``{"reason": ...}`` as its optional body, and the
reason reaches the write's one audit entry (``GET /api/audit``), as the console's confirmation
dialog's does: queue pause and resume, DLQ retry and purge, a schedule's trigger, delete, a
bulk action and a failure group's retry. Without a body the write still happens, with no
reason; every such body is in /openapi.json."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest

from awa_tui.http.tokens import API_TOKEN_NAME as API_ACTOR
from storage import Client, Job
from storage.testing import work_one

REASON = {"reason": "INC-7: the gateway was down"}

Write = Callable[[httpx.AsyncClient, Client, str, dict[str, Any] | None], Awaitable[int]]
"""Sets up what the write needs, sends it (with ``body``, or none) and returns its status."""


def _register(client: Client, kind: str) -> None:
    @client.task(kind=kind)
    async def work(job: Job[Any]) -> None:
        if job.args.get("fail"):
            raise RuntimeError("the gateway timed out")


async def _failed(client: Client, kind: str, queue: str = "default") -> int:
    _register(client, kind)
    job = await client.insert({"fail": True}, kind=kind, max_attempts=1, queue=queue)
    await work_one(client, [queue])
    return job.id


async def _dead(client: Client, kind: str) -> int:
    await client.configure_queue("dead", dlq=True)
    return await _failed(client, kind, "dead")


async def _send(api: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None) -> int:
    return (await api.request(method, path, json=body)).status_code


async def pause(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _send(api, "POST", "/api/queues/mail/pause", body)


async def resume(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    await client.pause_queue("mail", actor="someone else")
    return await _send(api, "POST", "/api/queues/mail/resume", body)


async def retry_dlq(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _send(api, "POST", f"/api/dlq/{await _dead(client, kind)}/retry", body)


async def purge_dlq(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _send(api, "POST", f"/api/dlq/{await _dead(client, kind)}/purge", body)


async def trigger(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    _register(client, kind)
    client.periodic({}, kind=kind, every=timedelta(hours=1), name=f"{kind}_hourly")
    await client.store_schedules()
    return await _send(api, "POST", f"/api/schedules/{kind}_hourly/trigger", body)


async def delete(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _send(api, "DELETE", f"/api/jobs/{await _failed(client, kind)}", body)


async def bulk(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    ids = [await _failed(client, kind)]
    sent = {"action": "retry", "ids": ids, "dry_run": False, **(body or {})}
    return await _send(api, "POST", "/api/jobs/bulk", sent)


async def group_retry(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    await _failed(client, kind)
    (group,) = await client.failure_groups(kind=kind)
    sent = {"kind": kind, "signature": group.signature, "dry_run": False, **(body or {})}
    return await _send(api, "POST", "/api/failure-groups/retry", sent)


WRITES: list[tuple[str, Write, int]] = [
    ("pause_queue", pause, 200),
    ("resume_queue", resume, 200),
    ("retry_dlq", retry_dlq, 200),
    ("purge_dlq", purge_dlq, 204),
    ("trigger_schedule", trigger, 200),
    ("delete_job", delete, 204),
    ("bulk_retry", bulk, 200),
    ("bulk_retry", group_retry, 200),
]
IDS = [write.__name__ for _, write, _ in WRITES]


@pytest.mark.parametrize("body", [REASON, None], ids=["with a reason", "without a body"])
@pytest.mark.parametrize(("action", "write", "status"), WRITES, ids=IDS)
async def test_the_reason_sent_reaches_the_writes_one_audit_entry(
    api: httpx.AsyncClient,
    client: Client,
    kind: str,
    action: str,
    write: Write,
    status: int,
    body: dict[str, str] | None,
) -> None:
    assert await write(api, client, kind, body) == status
    listed = (await api.get("/api/audit", params={"action": action, "actor": API_ACTOR})).json()
    (entry,) = listed["entries"]
    assert entry["reason"] == (body or {}).get("reason")


async def test_a_reason_too_long_is_400_and_triggers_nothing(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    assert await trigger(api, client, kind, {"reason": "x" * 1001}) == 400
    assert await client.list_audit() == []


async def test_the_trigger_and_the_admin_writes_show_the_reason_in_openapi(
    api: httpx.AsyncClient,
) -> None:
    paths = (await api.get("/openapi.json")).json()["paths"]
    for path in (
        "/api/schedules/{name}/trigger",
        "/api/queues/{queue}/pause",
        "/api/queues/{queue}/resume",
        "/api/dlq/{job_id}/retry",
        "/api/dlq/{job_id}/purge",
        "/api/jobs/{job_id}/cancel",
    ):
        schema = paths[path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert "ActionBody" in str(schema), (path, schema)
    delete = paths["/api/jobs/{job_id}"]["delete"]["requestBody"]
    assert "ActionBody" in str(delete)
