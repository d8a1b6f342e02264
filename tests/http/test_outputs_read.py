"""The console's bulk output reads over HTTP: a failure group's kept output shapes and a
field's values (``/api/failure-groups/outputs``, the G screen's panel) and a kind's schema
drift (``/api/kinds/{kind}/drift``, the K screen's), with the same bounds, in /openapi.json."""

from __future__ import annotations

from typing import Any

import httpx

from storage import DRIFT_WINDOW, Client, Job
from storage.testing import work_one

SCHEMA = {"type": "object", "properties": {"rows": {"type": "integer"}}, "required": ["rows"]}


def _register(client: Client, kind: str) -> None:
    """Records ``args["out"]``; ``{"fail": true}`` then fails with the same error every time."""

    @client.task(kind=kind)
    async def work(job: Job[Any]) -> None:
        job.set_output(job.args["out"])
        if job.args.get("fail"):
            raise RuntimeError("the import stopped")


async def _run(client: Client, kind: str, out: Any, *, fail: bool) -> int:
    job = await client.insert({"out": out, "fail": fail}, kind=kind, max_attempts=1)
    await work_one(client)
    return job.id


async def test_a_groups_kept_outputs_by_shape_and_by_field(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    for rows in (0, 0, 400):
        await _run(client, kind, {"rows": rows, "status": "failed"}, fail=True)
    who = {"kind": kind, "signature": "RuntimeError: the import stopped"}
    answer = await api.get("/api/failure-groups/outputs", params={**who, "field": "rows"})
    assert answer.status_code == 200
    body = answer.json()
    assert (body["members"], body["kept"], body["field"]) == (3, 3, "rows")
    assert [(s["keys"], s["count"]) for s in body["shapes"]] == [(["rows", "status"], 3)]
    assert [(v["value"], v["count"]) for v in body["values"]] == [("0", 2), ("400", 1)]
    assert "2,000 failed" in body["window"]
    refused = await api.get("/api/failure-groups/outputs", params={**who, "field": "a\x00b"})
    assert refused.status_code == 400
    assert "cannot be stored" in refused.json()["message"]


async def test_a_kinds_drift_names_path_and_keyword_never_the_value(
    api: httpx.AsyncClient, client: Client, kind: str
) -> None:
    _register(client, kind)
    client.job_kind_descriptor(kind, output={"type": "Import", "schema": SCHEMA})
    await client.sync_descriptors()
    await _run(client, kind, {"rows": 3}, fail=False)
    drifted = await _run(client, kind, {"rows": "secret-rows"}, fail=False)
    answer = await api.get(f"/api/kinds/{kind}/drift")
    assert answer.status_code == 200
    body = answer.json()
    assert (body["checked"], body["drifted"], body["window"]) == (2, 1, DRIFT_WINDOW)
    assert (body["kept_checked"], body["outputs"][0]["kept_by"]) == (0, None)
    (listed,) = body["outputs"]
    assert listed["job_id"] == drifted
    assert [(v["path"], v["keyword"]) for v in listed["violations"]] == [("$.rows", "type")]
    assert "secret" not in answer.text


async def test_both_reads_are_in_openapi(api: httpx.AsyncClient) -> None:
    spec = (await api.get("/openapi.json")).json()
    assert "get" in spec["paths"]["/api/failure-groups/outputs"]
    assert "get" in spec["paths"]["/api/kinds/{kind}/drift"]
    assert {"GroupOutputs", "SchemaDrift", "Violation"} <= set(spec["components"]["schemas"])
