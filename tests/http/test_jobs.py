"""``/api/jobs`` and ``/api/kinds`` against a real PostgreSQL: the detail with its output and
the error entry that kept one, lists without outputs (keyset paged, filtered, the DLQ), and
retry/cancel refused in states that do not allow them, as the console's actions are."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from awa_tui.http.bodies import JobOut, job_json
from storage import Client, Job, JobState
from storage.testing import work_one
from tests.http.test_callbacks import RECEIPT_SCHEMA


def _register(client: Client, kind: str) -> None:
    """``{"do": "ok"}`` completes with an output, ``{"do": "fail"}`` fails with one."""

    @client.task(kind=kind)
    async def work(job: Job[Any]) -> None:
        job.set_output({"done": job.args["do"], "n": job.args.get("n", 0)})
        if job.args["do"] == "fail":
            raise RuntimeError("it broke")


async def _run(client: Client, kind: str, do: str, **options: Any) -> int:
    job = await client.insert({"do": do}, kind=kind, max_attempts=1, **options)
    await work_one(client, [options.get("queue", "default")])
    return job.id


async def test_the_detail_has_the_output_and_the_error_entry_that_kept_one(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    done, failed = await _run(client, kind, "ok"), await _run(client, kind, "fail")
    completed = (await api.get(f"/api/jobs/{done}")).json()
    assert (completed["state"], completed["output"]) == ("completed", {"done": "ok", "n": 0})
    assert completed["has_output"] is True
    failure = (await api.get(f"/api/jobs/{failed}")).json()
    assert failure["state"] == "failed"
    assert failure["output"] is None
    assert failure["kept_output_position"] == len(failure["errors"]) - 1
    assert failure["errors"][-1]["output"] == {"done": "fail", "n": 0}
    assert "it broke" in failure["errors"][-1]["error"]
    (frame,) = failure["errors"][-1]["traceback"]  # the handler's frame, where it raised
    assert frame.startswith("tests/http/test_jobs.py:")
    assert frame.endswith(" in _register.<locals>.work")


async def test_list_rows_carry_no_output(api: httpx.AsyncClient, client: Client, kind: str) -> None:
    _register(client, kind)
    done, failed = await _run(client, kind, "ok"), await _run(client, kind, "fail")
    page = await api.get("/api/jobs")
    assert page.status_code == 200
    rows = {row["id"]: row for row in page.json()["jobs"]}
    assert set(rows) == {done, failed}
    assert all("output" not in row for row in rows.values())
    assert all("output" not in entry for row in rows.values() for entry in row["errors"])
    assert all("traceback" not in entry for row in rows.values() for entry in row["errors"])
    assert rows[done]["has_output"] is True
    assert rows[failed]["kept_output_position"] == 0
    assert '"done"' not in page.text  # no output value anywhere in the page


async def test_list_pages_by_before_id_newest_first_with_counts(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    ids = [row.id for row in await client.insert_many([{"n": n} for n in range(5)], kind=kind)]
    seen: list[int] = []
    before: int | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"before_id": before} if before else {})}
        page = (await api.get("/api/jobs", params=params)).json()
        seen += [row["id"] for row in page["jobs"]]
        assert page["counts"]["by_state"]["available"] == 5
        if not page["has_more"]:
            assert page["next_before_id"] is None
            break
        before = page["next_before_id"]
        assert before == seen[-1]
    assert seen == sorted(ids, reverse=True)


async def test_list_filters_by_state_kind_and_queue(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    _register(client, f"{kind}_other")
    done = await _run(client, kind, "ok")
    other_queue = (await client.insert({"n": 1}, kind=kind, queue="q2")).id
    other_kind = (await client.insert({"n": 1}, kind=f"{kind}_other")).id

    async def ids(**params: str) -> set[int]:
        answer = await api.get("/api/jobs", params=params)
        assert answer.status_code == 200
        return {row["id"] for row in answer.json()["jobs"]}

    assert await ids(state="completed") == {done}
    assert await ids(state="available") == {other_queue, other_kind}
    assert await ids(kind=kind) == {done, other_queue}
    assert await ids(queue="q2") == {other_queue}
    assert await ids(kind=kind, state="available", queue="q2") == {other_queue}


async def test_state_dlq_lists_dead_lettered_jobs(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    await client.configure_queue("dead", dlq=True)
    dead = await _run(client, kind, "fail", queue="dead")
    page = (await api.get("/api/jobs", params={"state": "dlq"})).json()
    assert [row["id"] for row in page["jobs"]] == [dead]
    assert page["jobs"][0]["dlq"]["reason"]
    assert page["counts"]["dlq"] == 1


@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"state": "finished"}, "invalid_filter"),
        ({"limit": 0}, "invalid_request"),
        ({"limit": 501}, "invalid_request"),
        ({"before_id": "x"}, "invalid_request"),
        ({"kind": "a\x00b"}, "invalid_filter"),
    ],
)
async def test_a_bad_list_query_is_400(
    api: httpx.AsyncClient, params: dict[str, Any], code: str
) -> None:
    answer = await api.get("/api/jobs", params=params)
    assert answer.status_code == 400
    assert answer.json()["error"] == code


@pytest.mark.parametrize("path", ["/api/jobs/999999", "/api/jobs/999999/retry"])
async def test_an_unknown_job_is_404(api: httpx.AsyncClient, path: str) -> None:
    answer = await (api.get(path) if path.endswith("999999") else api.post(path))
    assert answer.status_code == 404
    assert answer.json()["error"] == "job_not_found"


async def test_a_job_id_that_is_not_a_number_is_400(api: httpx.AsyncClient) -> None:
    answer = await api.get("/api/jobs/latest")
    assert answer.status_code == 400
    assert answer.json() == {
        "error": "invalid_request",
        "message": "path.job_id: Input should be a valid integer, unable to parse string as an "
        "integer",
    }


async def test_cancel_then_retry_follow_the_states_that_allow_them(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    job_id = (await client.insert({"n": 1}, kind=kind)).id
    retry_available = await api.post(f"/api/jobs/{job_id}/retry")
    assert retry_available.status_code == 409
    assert retry_available.json()["error"] == "invalid_state"
    assert "is available, so it cannot be retried" in retry_available.json()["message"]
    cancelled = await api.post(f"/api/jobs/{job_id}/cancel")
    assert (cancelled.status_code, cancelled.json()["state"]) == (200, "cancelled")
    again = await api.post(f"/api/jobs/{job_id}/cancel")
    assert (again.status_code, again.json()["error"]) == (409, "invalid_state")
    retried = await api.post(f"/api/jobs/{job_id}/retry")
    assert (retried.status_code, retried.json()["state"]) == (200, "available")
    row = await client.get_job(job_id)
    assert row is not None
    assert row.state is JobState.AVAILABLE


async def test_retry_brings_a_job_back_from_the_dlq(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    await client.configure_queue("dead", dlq=True)
    dead = await _run(client, kind, "fail", queue="dead")
    answer = await api.post(f"/api/jobs/{dead}/retry")
    assert (answer.status_code, answer.json()["state"], answer.json()["dlq"]) == (
        200,
        "available",
        None,
    )


async def test_kinds_show_the_declared_output_type_and_schema(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    client.job_kind_descriptor(
        kind, description="Charges a card", output={"type": "Receipt", "schema": RECEIPT_SCHEMA}
    )
    await client.sync_descriptors()
    await client.insert({"n": 1}, kind=kind)
    answer = await api.get("/api/kinds")
    assert answer.status_code == 200
    (entry,) = [k for k in answer.json()["kinds"] if k["kind"] == kind]
    assert entry["output_type"] == "Receipt"
    assert entry["output_schema"] == RECEIPT_SCHEMA
    assert entry["descriptor"]["description"] == "Charges a card"
    assert entry["counts"] == {"available": 1}
    assert entry["stale"] is False


async def test_job_json_has_exactly_the_fields_openapi_describes(client: Client, kind: str) -> None:
    _register(client, kind)
    row = await client.get_job(await _run(client, kind, "ok"))
    assert row is not None
    only_compared = {"compare"}  # only with ?compare=kept (test_jobs_compare)
    assert set(job_json(row, detail=True)) == set(JobOut.model_fields) - only_compared
    assert set(job_json(row, detail=False)) == set(JobOut.model_fields) - {"output", *only_compared}


async def test_the_state_filter_takes_the_consoles_words(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    """``waiting`` as the console's tab says it, as well as ``waiting_external``; ``all``."""
    _register(client, kind)
    waiting = await client.insert({"n": 1}, kind=kind)  # available: listed by all, not waiting
    for word in ("available", "Available", "all"):
        answer = await api.get("/api/jobs", params={"state": word})
        assert answer.status_code == 200, word
        assert waiting.id in {row["id"] for row in answer.json()["jobs"]}
    for word in ("waiting", "waiting_external", "Waiting"):
        answer = await api.get("/api/jobs", params={"state": word})
        assert answer.status_code == 200, word
        assert waiting.id not in {row["id"] for row in answer.json()["jobs"]}
    assert (await api.get("/api/jobs", params={"state": "finished"})).status_code == 400
