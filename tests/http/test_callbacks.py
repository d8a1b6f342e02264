"""``/api/callbacks/{id}/...`` against a real PostgreSQL: completion with and without an
output, the refusals (invalid output, declared schema, unknown, resolved, stale lease), fail,
retry and heartbeat; each refusal leaves the job waiting."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx
import pytest

from storage import Client, JobState
from tests.http.conftest import park

UNREADABLE = "The request body could not be read as JSON."
RECEIPT_SCHEMA = {
    "type": "object",
    "properties": {"status": {"enum": ["paid", "failed"]}, "amount": {"type": "integer"}},
    "required": ["status"],
}


async def _state(client: Client, job_id: int) -> JobState:
    row = await client.get_job(job_id)
    assert row is not None
    return row.state


async def _declare_receipt(client: Client, kind: str) -> None:
    client.job_kind_descriptor(kind, output={"type": "Receipt", "schema": RECEIPT_SCHEMA})
    await client.sync_descriptors()


async def test_complete_with_an_output_returns_the_job_and_the_detail_shows_it(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(
        f"/api/callbacks/{callback_id}/complete",
        json={"payload": {"provider": "x"}, "output": {"charge": "ch_1", "amount": 1.0}},
    )
    assert answer.status_code == 200
    assert answer.json()["state"] == "completed"
    assert answer.json()["id"] == job_id
    assert "Awa-Output-Dropped" not in answer.headers
    detail = await api.get(f"/api/jobs/{job_id}")
    assert detail.status_code == 200
    assert detail.json()["output"] == {"charge": "ch_1", "amount": 1.0}
    assert '"output":{"charge":"ch_1","amount":1.0}' in detail.text  # exactly as stored


async def test_complete_without_a_body_completes_with_no_output(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(f"/api/callbacks/{callback_id}/complete")
    assert answer.status_code == 200
    assert answer.json()["output"] is None
    assert await _state(client, job_id) is JobState.COMPLETED


async def test_the_payload_is_not_stored(
    api: httpx.AsyncClient, client: Client, kind: str, conn: asyncpg.Connection
) -> None:
    _, callback_id = await park(client, kind)
    answer = await api.post(
        f"/api/callbacks/{callback_id}/complete", json={"payload": {"card": "pay-l0ad-s3cret"}}
    )
    assert answer.status_code == 200
    assert "pay-l0ad-s3cret" not in answer.text
    stored = await conn.fetchval(
        "SELECT count(*) FROM done_entries d WHERE d::text LIKE '%pay-l0ad-s3cret%'"
    )
    assert stored == 0


@pytest.mark.parametrize(
    ("output", "reason", "path"),
    [
        ({"nested": {"bad": "\u0000"}}, "invalid", "$.nested.bad"),
        ({"big": "x" * 5000}, "too_large", None),
        ({"n": 2**70}, "invalid", "$.n"),
    ],
    ids=["nul", "too-large", "int-over-64-bits"],
)
async def test_an_invalid_output_is_400_with_reason_and_path_and_the_job_still_waits(
    api: httpx.AsyncClient,
    client: Client,
    kind: str,
    output: Any,
    reason: str,
    path: str | None,
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(f"/api/callbacks/{callback_id}/complete", json={"output": output})
    assert answer.status_code == 400
    body = answer.json()
    assert body["error"] == "invalid_output"
    assert body["reason"] == reason
    assert body["path"] == path
    assert await _state(client, job_id) is JobState.WAITING_EXTERNAL
    retried = await api.post(f"/api/callbacks/{callback_id}/complete", json={"output": {"ok": 1}})
    assert retried.status_code == 200


async def test_an_output_that_does_not_fit_the_declared_schema_is_400_and_the_job_waits(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    await _declare_receipt(client, kind)
    answer = await api.post(
        f"/api/callbacks/{callback_id}/complete",
        json={"output": {"status": "refunded", "amount": "s3cret-amount"}},
    )
    assert answer.status_code == 400
    body = answer.json()
    assert (body["error"], body["reason"]) == ("invalid_output", "wrong_type")
    assert body["path"] in ("$.status", "$.amount")
    assert "Receipt" in body["message"]
    assert "s3cret-amount" not in answer.text  # the value is never echoed
    assert await _state(client, job_id) is JobState.WAITING_EXTERNAL
    good = await api.post(
        f"/api/callbacks/{callback_id}/complete", json={"output": {"status": "paid"}}
    )
    assert good.status_code == 200
    assert good.json()["output"] == {"status": "paid"}
    detail = await api.get(f"/api/jobs/{job_id}")
    assert detail.json()["declared_output_type"] == "Receipt"


async def test_completing_the_same_callback_again_is_404(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _, callback_id = await park(client, kind)
    first = await api.post(f"/api/callbacks/{callback_id}/complete", json={"output": 1})
    again = await api.post(f"/api/callbacks/{callback_id}/complete", json={"output": 2})
    assert (first.status_code, again.status_code) == (200, 404)
    assert again.json()["error"] == "callback_not_found"


@pytest.mark.parametrize("action", ["complete", "fail", "retry", "heartbeat"])
async def test_an_unknown_callback_is_404(api: httpx.AsyncClient, action: str) -> None:
    body = {"error": "x"} if action == "fail" else {}
    answer = await api.post(f"/api/callbacks/no-such-callback/{action}", json=body)
    assert answer.status_code == 404
    assert answer.json() == {
        "error": "callback_not_found",
        "message": (
            "No job is waiting for callback no-such-callback (unknown or already resolved)."
        ),
    }


@pytest.mark.parametrize("action", ["complete", "fail", "retry"])
async def test_a_stale_run_lease_is_409_and_the_job_still_waits(
    api: httpx.AsyncClient, client: Client, kind: str, action: str
) -> None:
    job_id, callback_id = await park(client, kind)
    body: dict[str, Any] = {"run_lease": 7, **({"error": "x"} if action == "fail" else {})}
    answer = await api.post(f"/api/callbacks/{callback_id}/{action}", json=body)
    assert answer.status_code == 409
    assert answer.json()["error"] == "stale_attempt"
    assert await _state(client, job_id) is JobState.WAITING_EXTERNAL


async def test_complete_with_the_current_run_lease_succeeds(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _, callback_id = await park(client, kind)
    answer = await api.post(f"/api/callbacks/{callback_id}/complete", json={"run_lease": 1})
    assert answer.status_code == 200


async def test_fail_fails_the_job_for_good_with_the_error_in_its_history(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(f"/api/callbacks/{callback_id}/fail", json={"error": "card declined"})
    assert answer.status_code == 200
    assert answer.json()["state"] == "failed"
    assert answer.json()["errors"][-1]["error"] == "card declined"
    assert await _state(client, job_id) is JobState.FAILED


async def test_fail_needs_an_error(api: httpx.AsyncClient, client: Client, kind: str) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(f"/api/callbacks/{callback_id}/fail", json={})
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_request", "message": "body.error: Field required"}
    assert await _state(client, job_id) is JobState.WAITING_EXTERNAL


async def test_retry_makes_the_job_available_again(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(f"/api/callbacks/{callback_id}/retry")
    assert answer.status_code == 200
    assert answer.json()["state"] == "available"
    assert answer.json()["run_lease"] == 2
    assert await _state(client, job_id) is JobState.AVAILABLE


async def test_heartbeat_pushes_the_timeout_out(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    before = await client.get_job(job_id)
    assert before is not None
    assert before.callback is not None
    assert before.callback.timeout_at is not None
    answer = await api.post(
        f"/api/callbacks/{callback_id}/heartbeat", json={"timeout_seconds": 7200}
    )
    assert answer.status_code == 200
    assert answer.json() == {"callback_id": callback_id, "timeout_seconds": 7200.0}
    after = await client.get_job(job_id)
    assert after is not None
    assert after.callback is not None
    assert after.callback.timeout_at is not None
    assert after.callback.timeout_at > before.callback.timeout_at
    assert after.state is JobState.WAITING_EXTERNAL


@pytest.mark.parametrize("seconds", [0, -5, "soon", 10**9])
async def test_heartbeat_refuses_a_timeout_out_of_range(
    api: httpx.AsyncClient, client: Client, kind: str, seconds: Any
) -> None:
    _, callback_id = await park(client, kind)
    answer = await api.post(
        f"/api/callbacks/{callback_id}/heartbeat", json={"timeout_seconds": seconds}
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_request"
    assert answer.json()["message"].startswith("body.timeout_seconds: ")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "The request body is not valid JSON."),
        (b'{"output": ' + b"[" * 30000 + b"]" * 30000 + b"}", UNREADABLE),
        (b"[1, 2]", "The request body must be a JSON object (Content-Type: application/json)."),
    ],
    ids=["not-json", "too-deep", "not-an-object"],
)
async def test_a_body_that_is_not_a_json_object_is_400(
    api: httpx.AsyncClient, client: Client, kind: str, content: bytes, message: str
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(
        f"/api/callbacks/{callback_id}/complete",
        content=content,
        headers={"Content-Type": "application/json"},
    )
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_request", "message": message}
    assert await _state(client, job_id) is JobState.WAITING_EXTERNAL


async def test_an_error_text_postgresql_cannot_store_is_400_and_the_job_waits(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    job_id, callback_id = await park(client, kind)
    answer = await api.post(f"/api/callbacks/{callback_id}/fail", json={"error": "a\u0000b"})
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "invalid_request",
        "message": "The error text contains a NUL character at position 1, so it cannot be stored.",
    }
    assert await _state(client, job_id) is JobState.WAITING_EXTERNAL


@pytest.mark.parametrize("action", ["complete", "fail", "retry", "heartbeat"])
async def test_a_callback_id_postgresql_cannot_store_is_404(
    api: httpx.AsyncClient, action: str
) -> None:
    answer = await api.post(f"/api/callbacks/a%00b/{action}", json={"error": "x"})
    assert answer.status_code == 404
    assert answer.json()["error"] == "callback_not_found"
