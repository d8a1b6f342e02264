"""``GET /api/jobs/{id}?compare=kept``: the failed attempt's kept output beside the completed
one, where each came from, and the diff between them, in ``/openapi.json``."""

from __future__ import annotations

from typing import Any

import asyncpg
import httpx

from awa_tui.http.bodies import CompareOut, JobOut
from storage import Client, Job
from storage.testing import work_one


async def _failed_then_completed(client: Client, conn: asyncpg.Connection, kind: str) -> int:
    @client.task(kind=kind)
    async def sync(job: Job[Any]) -> None:
        if job.attempt == 1:
            job.set_output({"updated": 0, "skipped": 412})
            raise RuntimeError("ledger locked")
        job.set_output({"updated": 412, "skipped": 0, "batches": [1]})

    job = await client.insert({}, kind=kind)
    await work_one(client)
    await conn.execute("UPDATE deferred_jobs SET run_at = now() WHERE job_id = $1", job.id)
    await client.run_maintenance()
    await work_one(client)
    return job.id


async def test_compare_kept_adds_the_kept_output_its_provenance_and_the_diff(
    api: httpx.AsyncClient, client: Client, conn: asyncpg.Connection, kind: str
) -> None:
    job_id = await _failed_then_completed(client, conn, kind)
    plain = (await api.get(f"/api/jobs/{job_id}")).json()
    assert "compare" not in plain
    answer = await api.get(f"/api/jobs/{job_id}", params={"compare": "kept"})
    assert answer.status_code == 200
    body = answer.json()
    assert body["output"] == {"updated": 412, "skipped": 0, "batches": [1]}
    compare = CompareOut.model_validate(body["compare"])
    assert (compare.kept_position, compare.kept_output) == (0, {"updated": 0, "skipped": 412})
    assert compare.reason is None
    assert compare.output_provenance is not None
    assert compare.output_provenance.startswith("Attempt 2 at ")
    assert "by its handler, general path" in compare.output_provenance
    assert compare.kept_provenance is not None
    assert "kept in error entry #1 of the job's payload" in compare.kept_provenance
    assert compare.diff is not None
    assert [(c.path, c.change, c.before, c.after) for c in compare.diff.changes] == [
        ("$.updated", "changed", "0", "412"),
        ("$.skipped", "changed", "412", "0"),
        ("$.batches", "added", None, "[1]"),
    ]
    assert (compare.diff.omitted, compare.diff.counts) == (0, {"changed": 2, "added": 1})
    JobOut.model_validate(body)


async def test_compare_without_both_outputs_says_why_and_a_wrong_value_is_refused(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    @client.task(kind=kind)
    async def done(job: Job[Any]) -> None:
        job.set_output({"ok": True})

    job = await client.insert({}, kind=kind)
    await work_one(client)
    compare = (await api.get(f"/api/jobs/{job.id}", params={"compare": "kept"})).json()["compare"]
    assert (compare["kept_output"], compare["diff"]) == (None, None)
    assert compare["reason"] == (
        f"Job {job.id} has no completed output beside a failed attempt's kept one, so there is "
        "nothing to compare."
    )
    refused = await api.get(f"/api/jobs/{job.id}", params={"compare": "everything"})
    assert refused.status_code == 400
    assert "compare" in refused.json()["message"]
    assert (await api.get("/api/jobs/999999", params={"compare": "kept"})).status_code == 404


async def test_the_openapi_description_has_compare(api: httpx.AsyncClient) -> None:
    description = (await api.get("/openapi.json")).json()
    params = {p["name"]: p for p in description["paths"]["/api/jobs/{job_id}"]["get"]["parameters"]}
    assert "diff from it to the completed output" in params["compare"]["description"]
    schemas = description["components"]["schemas"]
    assert {"kept_output", "diff", "kept_provenance", "output_provenance"} <= set(
        schemas["CompareOut"]["properties"]
    )
