"""The HTTP door to the audit trail: every write over HTTP records one entry as the caller
(``actor_of``: "api" for the one unnamed token) with the reason it sent; a refused write
records none; ``GET /api/audit`` reads the trail with its filters; ``POST
/api/jobs/{id}/retry`` takes new ``args`` (an edit-and-retry); all of it in /openapi.json."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx
import pytest

from awa_tui.http.tokens import API_TOKEN_NAME as API_ACTOR
from storage import Client, JobState, TerminalError
from storage.testing import work_one
from tests.http.conftest import park

Send = Callable[[httpx.AsyncClient, int, str], Awaitable[httpx.Response]]

CALLBACK_WRITES: list[tuple[str, Send]] = [
    (
        "complete_external",
        lambda api, job, cb: api.post(f"/api/callbacks/{cb}/complete", json={"output": 1}),
    ),
    (
        "fail_external",
        lambda api, job, cb: api.post(f"/api/callbacks/{cb}/fail", json={"error": "x"}),
    ),
    ("retry_external", lambda api, job, cb: api.post(f"/api/callbacks/{cb}/retry")),
    ("heartbeat_callback", lambda api, job, cb: api.post(f"/api/callbacks/{cb}/heartbeat")),
    (
        "cancel_job",
        lambda api, job, cb: api.post(f"/api/jobs/{job}/cancel", json={"reason": "INC-1"}),
    ),
]


@pytest.mark.parametrize(("action", "send"), CALLBACK_WRITES, ids=[a for a, _ in CALLBACK_WRITES])
async def test_every_write_over_http_records_one_entry_as_the_caller(
    api: httpx.AsyncClient, client: Client, kind: str, action: str, send: Send
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await send(api, job_id, callback_id)
    assert answer.status_code == 200, answer.text
    (entry,) = await client.list_audit()
    assert (entry.action, entry.actor, entry.job_ids) == (action, API_ACTOR, [job_id])


async def _failed(client: Client, kind: str) -> int:
    @client.task(kind=kind)
    async def fail(job: Any) -> None:
        raise TerminalError("boom")

    job = await client.insert({"n": 1}, kind=kind)
    await work_one(client)
    return job.id


async def test_retry_with_new_args_keeps_the_originals_and_the_reason(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id = await _failed(client, kind)
    answer = await api.post(
        f"/api/jobs/{job_id}/retry", json={"args": {"n": 2}, "reason": "n was wrong"}
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["args"] == {"n": 2}
    assert answer.json()["state"] == JobState.AVAILABLE.value
    listed = await api.get("/api/audit", params={"action": "retry_edited"})
    assert listed.status_code == 200
    (entry,) = listed.json()["entries"]
    assert entry["original_args"] == {"n": 1}
    assert (entry["actor"], entry["reason"], entry["job_ids"]) == (
        API_ACTOR,
        "n was wrong",
        [job_id],
    )


async def test_a_refused_retry_records_nothing(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, _ = await park(client, kind)
    answer = await api.post(f"/api/jobs/{job_id}/retry", json={"reason": "try"})
    assert answer.status_code == 409
    assert (await api.get("/api/audit")).json() == {"entries": []}


async def test_the_trail_filters_by_actor_action_and_since(
    api: httpx.AsyncClient, client: Client
) -> None:
    await client.pause_queue("a", actor="ana")
    await client.pause_queue("b", actor="bo")
    by_ana = (await api.get("/api/audit", params={"actor": "ana"})).json()["entries"]
    assert [e["queue"] for e in by_ana] == ["a"]
    pauses = (await api.get("/api/audit", params={"action": "pause_queue"})).json()["entries"]
    assert [e["actor"] for e in pauses] == ["bo", "ana"]
    recent = (await api.get("/api/audit", params={"since": "1h"})).json()["entries"]
    assert len(recent) == 2
    bad = await api.get("/api/audit", params={"since": "yesterday-ish"})
    assert bad.status_code == 400
    assert bad.json()["error"] == "invalid_filter"


async def test_bad_new_args_or_reason_are_400_and_change_nothing(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id = await _failed(client, kind)
    long = await api.post(f"/api/jobs/{job_id}/retry", json={"reason": "x" * 1001})
    assert long.status_code == 400
    nul = await api.post(f"/api/jobs/{job_id}/retry", json={"args": {"s": "a\u0000b"}})
    assert nul.status_code == 400, nul.text
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.FAILED
    assert await client.list_audit() == []


async def test_the_audit_route_and_the_retry_args_are_in_openapi(api: httpx.AsyncClient) -> None:
    spec = (await api.get("/openapi.json")).json()
    assert "/api/audit" in spec["paths"]
    assert {"since", "actor", "action"} <= {
        p["name"] for p in spec["paths"]["/api/audit"]["get"]["parameters"]
    }
    assert "args" in spec["components"]["schemas"]["RetryJobBody"]["properties"]
