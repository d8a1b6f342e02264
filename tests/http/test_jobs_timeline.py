"""``GET /api/jobs/{id}/timeline``: the console's timeline over HTTP, oldest first, each attempt
with the runtime that claimed it and the error entry it wrote (matched by position), read with
the job in one snapshot; an unknown job is a 404."""

from __future__ import annotations

import os
import socket
from datetime import datetime
from typing import Any

import asyncpg
import httpx

from awa_tui.http.bodies import TimelineOut
from awa_tui.timefmt import absolute
from storage import Client, Job


async def test_each_attempt_with_its_runtime_and_error(
    api: httpx.AsyncClient, client: Client, conn: asyncpg.Connection, kind: str
) -> None:
    @client.task(kind=kind)
    async def twice(job: Job[dict[str, Any]]) -> None:
        if job.attempt == 1:
            raise RuntimeError("first try fails")

    job = await client.insert({}, kind=kind, max_attempts=2)
    await client.run_until_idle(name="http-worker", maintenance_interval=None)
    await conn.execute("UPDATE deferred_jobs SET run_at = now()")  # its retry is due now
    await client.run_until_idle(name="http-worker")
    answer = await api.get(f"/api/jobs/{job.id}/timeline")
    assert answer.status_code == 200
    body = answer.json()
    TimelineOut.model_validate(body)
    first, second = body["attempts"]
    assert (first["attempt"], first["outcome"], second["attempt"], second["outcome"]) == (
        1,
        "retried",
        2,
        "completed",
    )
    assert first["error_position"] == 0
    assert "first try fails" in first["error"]
    assert (second["error"], second["error_position"]) == (None, None)
    for span in (first, second):
        runtime = span["runtime"]
        assert (runtime["host"], runtime["pid"], runtime["name"]) == (
            socket.gethostname(),
            os.getpid(),
            "http-worker",
        )
    assert first["runtime"]["id"] != second["runtime"]["id"]  # two starts, two runtimes
    started = absolute(datetime.fromisoformat(second["runtime"]["started_at"]))[11:16]
    assert second["runtime_label"] == f"{socket.gethostname()}:{os.getpid()}, started {started}"


async def test_an_unknown_job_is_a_404(api: httpx.AsyncClient) -> None:
    answer = await api.get("/api/jobs/999999999/timeline")
    assert answer.status_code == 404
    assert answer.json()["error"] == "job_not_found"
