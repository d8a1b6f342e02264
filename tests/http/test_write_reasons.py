"""Every operator write over HTTP takes ``{"reason": ...}`` as its optional body, and the
reason reaches the write's one audit entry (``GET /api/audit``), as the console's confirmation
dialog's does: queue pause and resume, DLQ retry and purge, a schedule's trigger, delete, a
bulk action, a failure group's retry, and an operator's callback complete, fail, retry and
heartbeat (beside the fields those bodies already have). Without a body the write still
happens, with no reason; every such body is in /openapi.json."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import httpx
import pytest

from awa_tui.http.tokens import API_TOKEN_NAME as API_ACTOR
from storage import Client, Job
from storage.testing import work_one
from tests.http.conftest import park

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


async def _callback(
    api: httpx.AsyncClient, client: Client, kind: str, verb: str, fields: dict[str, Any], body: Any
) -> int:
    _job_id, callback_id = await park(client, kind)
    sent = {**fields, **(body or {})} if fields or body else None
    return await _send(api, "POST", f"/api/callbacks/{callback_id}/{verb}", sent)


async def complete(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _callback(api, client, kind, "complete", {"output": {"ok": True}}, body)


async def fail(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _callback(api, client, kind, "fail", {"error": "the gateway said no"}, body)


async def retry_callback(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _callback(api, client, kind, "retry", {}, body)


async def heartbeat(api: httpx.AsyncClient, client: Client, kind: str, body: Any) -> int:
    return await _callback(api, client, kind, "heartbeat", {}, body)


WRITES: list[tuple[str, Write, int]] = [
    ("pause_queue", pause, 200),
    ("resume_queue", resume, 200),
    ("retry_dlq", retry_dlq, 200),
    ("purge_dlq", purge_dlq, 204),
    ("trigger_schedule", trigger, 200),
    ("delete_job", delete, 204),
    ("bulk_retry", bulk, 200),
    ("bulk_retry", group_retry, 200),
    ("complete_external", complete, 200),
    ("fail_external", fail, 200),
    ("retry_external", retry_callback, 200),
    ("heartbeat_callback", heartbeat, 200),
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


async def test_every_write_body_shows_the_reason_in_openapi(api: httpx.AsyncClient) -> None:
    spec = (await api.get("/openapi.json")).json()
    models = spec["components"]["schemas"]
    for method, path in (
        ("post", "/api/schedules/{name}/trigger"),
        ("post", "/api/queues/{queue}/pause"),
        ("post", "/api/queues/{queue}/resume"),
        ("post", "/api/dlq/{job_id}/retry"),
        ("post", "/api/dlq/{job_id}/purge"),
        ("post", "/api/jobs/{job_id}/cancel"),
        ("delete", "/api/jobs/{job_id}"),
        ("post", "/api/callbacks/{callback_id}/complete"),
        ("post", "/api/callbacks/{callback_id}/fail"),
        ("post", "/api/callbacks/{callback_id}/retry"),
        ("post", "/api/callbacks/{callback_id}/heartbeat"),
    ):
        body = spec["paths"][path][method]["requestBody"]["content"]["application/json"]
        refs = [ref.rsplit("/", 1)[1] for ref in _refs(body["schema"])]
        assert refs, (path, body)
        assert all("reason" in models[name]["properties"] for name in refs), (path, refs)


def _refs(schema: Any) -> list[str]:
    """Every ``$ref`` under an OpenAPI schema (an optional body is ``anyOf: [ref, null]``)."""
    if isinstance(schema, dict):
        own = [schema["$ref"]] if "$ref" in schema else []
        return own + [ref for value in schema.values() for ref in _refs(value)]
    if isinstance(schema, list):
        return [ref for item in schema for ref in _refs(item)]
    return []
