"""The admin routes against a real PostgreSQL, each with the console's semantics and guard:
queues paused and resumed, the DLQ listed, retried and purged (only dead-lettered jobs), a job
deleted (only when it has finished), schedules listed and triggered now, failure groups and
bulk actions counted first (``dry_run``, writing nothing) then acted on, and the console's
filter text on the job list; unknown ids are 404 in one line, a bad filter 400 with the
parser's message."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import httpx
import pytest

from awa_tui.query import FilterSyntaxError, parse_filter
from storage import Client, Job
from storage.testing import work_one


def _register(client: Client, kind: str) -> None:
    """``{"do": "ok"}`` completes, ``{"do": "fail"}`` fails with the same error every time."""

    @client.task(kind=kind)
    async def work(job: Job[Any]) -> None:
        if job.args["do"] == "fail":
            raise RuntimeError("the gateway timed out")


async def _run(client: Client, kind: str, do: str, queue: str = "default", **args: Any) -> int:
    job = await client.insert({"do": do, **args}, kind=kind, max_attempts=1, queue=queue)
    await work_one(client, [queue])
    return job.id


async def _state(client: Client, job_id: int) -> str:
    row = await client.get_job(job_id)
    assert row is not None
    return "dlq" if row.dlq is not None else row.state.value


async def test_queues_are_listed_paused_and_resumed(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    await client.insert({"n": 1}, kind=kind, queue="mail")
    (mail,) = [q for q in (await api.get("/api/queues")).json()["queues"] if q["queue"] == "mail"]
    assert (mail["paused"], mail["counts"]["available"]) == (False, 1)
    paused = await api.post("/api/queues/mail/pause")
    assert paused.json() == {"queue": "mail", "paused": True}
    assert [q.paused for q in await client.list_queues() if q.queue == "mail"] == [True]
    resumed = await api.post("/api/queues/mail/resume")
    assert resumed.json() == {"queue": "mail", "paused": False}
    assert [q.paused for q in await client.list_queues() if q.queue == "mail"] == [False]


async def test_a_queue_name_postgres_cannot_store_is_400(api: httpx.AsyncClient) -> None:
    answer = await api.post("/api/queues/a%00b/pause")
    assert answer.status_code == 400
    assert answer.json()["error"] == "invalid_request"


async def test_the_dlq_is_listed_retried_and_purged_and_only_dead_letters(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    await client.configure_queue("dead", dlq=True)
    first, second = [await _run(client, kind, "fail", queue="dead") for _ in range(2)]
    done = await _run(client, kind, "ok")
    listed = (await api.get("/api/dlq", params={"kind": kind})).json()
    assert [row["id"] for row in listed["jobs"]] == [second, first]
    refused = await api.post(f"/api/dlq/{done}/purge")
    assert refused.status_code == 409
    assert refused.json() == {
        "error": "invalid_state",
        "message": refused.json()["message"],
    }
    assert "only dead-lettered" in refused.json()["message"]
    assert await _state(client, done) == "completed"
    retried = await api.post(f"/api/dlq/{first}/retry")
    assert (retried.status_code, retried.json()["state"]) == (200, "available")
    purged = await api.post(f"/api/dlq/{second}/purge")
    assert purged.status_code == 204
    assert await client.get_job(second) is None


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/dlq/999999/retry"),
        ("POST", "/api/dlq/999999/purge"),
        ("DELETE", "/api/jobs/999999"),
    ],
)
async def test_an_unknown_job_is_404_in_one_line(
    api: httpx.AsyncClient, method: str, path: str
) -> None:
    answer = await api.request(method, path)
    assert answer.status_code == 404
    assert answer.json() == {
        "error": "job_not_found",
        "message": "Job 999999 does not exist (it may have been deleted or pruned).",
    }


async def test_only_a_finished_job_can_be_deleted(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    waiting = (await client.insert({"do": "ok"}, kind=kind, queue="idle")).id
    refused = await api.delete(f"/api/jobs/{waiting}")
    assert refused.status_code == 409
    assert refused.json()["error"] == "invalid_state"
    assert "only completed, failed or cancelled" in refused.json()["message"]
    assert await _state(client, waiting) == "available"
    done = await _run(client, kind, "ok")
    assert (await api.delete(f"/api/jobs/{done}")).status_code == 204
    assert (await api.get(f"/api/jobs/{done}")).status_code == 404


async def test_a_schedule_is_listed_and_triggered_now(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    client.periodic({"do": "ok"}, kind=kind, every=timedelta(hours=1), name=f"{kind}_hourly")
    await client.store_schedules()
    listed = (await api.get("/api/schedules")).json()["schedules"]
    (mine,) = [s for s in listed if s["name"] == f"{kind}_hourly"]
    assert (mine["kind"], mine["description"]) == (kind, "every 1 h")
    triggered = await api.post(f"/api/schedules/{kind}_hourly/trigger")
    assert (triggered.status_code, triggered.json()["kind"], triggered.json()["state"]) == (
        200,
        kind,
        "available",
    )
    unknown = await api.post("/api/schedules/nope/trigger")
    assert unknown.status_code == 404
    assert unknown.json() == {
        "error": "schedule_not_found",
        "message": "No stored schedule is named 'nope'.",
    }


async def test_a_failure_group_is_counted_then_retried(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    failed = [await _run(client, kind, "fail") for _ in range(2)]
    groups = (await api.get("/api/failure-groups", params={"kind": kind})).json()["groups"]
    (group,) = groups
    assert (group["count"], group["failed"]) == (2, 2)
    who = {"kind": kind, "signature": group["signature"]}
    members = (await api.get("/api/failure-groups/members", params=who)).json()
    assert (sorted(members["failed"]), members["retryable"]) == (sorted(failed), [])
    counted = await api.post("/api/failure-groups/retry", json=who)
    assert counted.json() == {"action": "retry", "dry_run": True, "count": 2}
    assert [await _state(client, j) for j in failed] == ["failed", "failed"]
    nothing = await api.post("/api/failure-groups/cancel", json={**who, "dry_run": False})
    assert nothing.json() == {"action": "cancel", "dry_run": False, "count": 0}
    done = await api.post("/api/failure-groups/retry", json={**who, "dry_run": False})
    assert done.json() == {"action": "retry", "dry_run": False, "count": 2}
    assert [await _state(client, j) for j in failed] == ["available", "available"]


async def test_a_bulk_action_by_filter_counts_first_then_acts(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    failed = [await _run(client, kind, "fail", who=who) for who in ("alice", "alice", "bob")]
    body = {"action": "retry", "state": "failed", "q": f"kind:{kind} alice"}
    counted = await api.post("/api/jobs/bulk", json=body)
    assert counted.json() == {"action": "retry", "dry_run": True, "count": 2}
    assert [await _state(client, j) for j in failed] == ["failed"] * 3
    acted = await api.post("/api/jobs/bulk", json={**body, "dry_run": False})
    assert acted.json() == {"action": "retry", "dry_run": False, "count": 2}
    assert [await _state(client, j) for j in failed] == ["available", "available", "failed"]
    by_ids = await api.post(
        "/api/jobs/bulk", json={"action": "cancel", "ids": failed, "dry_run": False}
    )
    assert by_ids.json() == {"action": "cancel", "dry_run": False, "count": 2}  # bob had ended
    assert [await _state(client, j) for j in failed] == ["cancelled", "cancelled", "failed"]


async def test_the_job_list_takes_the_consoles_filter_text(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    alice = (await client.insert({"who": "alice"}, kind=kind, queue="idle")).id
    await client.insert({"who": "bob"}, kind=kind, queue="idle")
    page = (await api.get("/api/jobs", params={"q": f'kind:{kind} queue:idle "alice"'})).json()
    assert [row["id"] for row in page["jobs"]] == [alice]


BAD_FILTERS = ["since:yesterday", "id:abc", "sort:nonsense", "kind:"]


def _parser_message(text: str) -> str:
    try:
        parse_filter(text)
    except FilterSyntaxError as exc:
        return str(exc)
    raise AssertionError(f"{text} parses")


@pytest.mark.parametrize("text", BAD_FILTERS)
@pytest.mark.parametrize("route", ["list", "bulk", "dlq"])
async def test_a_bad_filter_is_400_with_the_parsers_message_and_writes_nothing(
    api: httpx.AsyncClient, text: str, route: str
) -> None:
    if route == "list":
        answer = await api.get("/api/jobs", params={"q": text})
    elif route == "dlq":
        answer = await api.get("/api/dlq", params={"q": text})
    else:
        answer = await api.post(
            "/api/jobs/bulk", json={"action": "delete", "q": text, "dry_run": False}
        )
    assert answer.status_code == 400
    assert answer.json() == {"error": "invalid_filter", "message": _parser_message(text)}


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"q": "kind:a", "kind": "b"}, "kind is given twice, in q (kind:) and as kind=; keep one."),
        (
            {"q": "sort:id", "sort": "-when"},
            "sort is given twice, in q (sort:) and as sort=; keep one.",
        ),
        ({"q": "id:7"}, "id:7 names one job: GET /api/jobs/7 reads it."),
    ],
)
async def test_a_list_filter_given_twice_or_naming_one_job_is_400(
    api: httpx.AsyncClient, params: dict[str, str], message: str
) -> None:
    answer = await api.get("/api/jobs", params=params)
    assert answer.json() == {"error": "invalid_filter", "message": message}


async def test_a_bulk_filter_naming_one_job_is_400(api: httpx.AsyncClient) -> None:
    answer = await api.post("/api/jobs/bulk", json={"action": "delete", "q": "id:7"})
    assert answer.json() == {
        "error": "invalid_filter",
        "message": "id:7 names one job: pass ids [7].",
    }


async def test_a_bulk_action_takes_ids_or_a_filter_not_both(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    job_id = (await client.insert({"n": 1}, kind=kind, queue="idle")).id
    body = {"action": "cancel", "ids": [job_id], "kind": kind, "dry_run": False}
    answer = await api.post("/api/jobs/bulk", json=body)
    assert answer.status_code == 400
    assert await _state(client, job_id) == "available"
