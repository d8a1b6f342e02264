"""The timeline names the runtime that claimed each attempt: host:pid in the table, and in the
note the highlighted attempt's runtime in full (when it started, its name, version and id);
an attempt claimed outside a runtime reads "-"."""

from __future__ import annotations

import os
import socket
from typing import Any

import asyncpg

from awa_tui.present import runtime_short
from awa_tui.screens.timeline import RUNTIME_WIDTH
from awa_tui.timefmt import absolute
from storage import Client, Job, RuntimeInfo
from storage.testing import work_one
from tests.tui.conftest import open_timeline, settle, text_of
from tests.tui.scenarios import SIZE, build_app


async def test_each_attempt_names_its_runtime(
    migrated_dsn: str, schema: str, client: Client, conn: asyncpg.Connection
) -> None:
    @client.task(kind="twice")
    async def twice(job: Job[dict[str, Any]]) -> None:
        if job.attempt == 1:
            raise RuntimeError("first try fails")

    job = await client.insert({}, kind="twice", max_attempts=2)
    await work_one(client, ["default"])  # attempt 1, outside a runtime: no id
    await conn.execute("UPDATE deferred_jobs SET run_at = now()")  # its retry is due now
    await client.run_until_idle(name="pilot-worker")  # promotes and runs attempt 2
    first, second = await client.attempt_timeline(job.id)
    assert first.runtime is None
    assert second.runtime is not None
    assert second.runtime.started_at is not None

    app = build_app(migrated_dsn, schema, initial_job=job.id)
    async with app.run_test(size=SIZE) as pilot:
        screen, rows = await open_timeline(pilot)
        shown = [r["runtime"] for r in rows]
        expected = runtime_short(second.runtime, RUNTIME_WIDTH)
        assert shown == ["-", expected]
        assert expected.endswith(f":{os.getpid()}")
        assert "Claimed by" not in text_of(screen.query_one("#tl-note"))  # attempt 1: none
        await pilot.press("j")
        await settle(pilot)
        note = text_of(screen.query_one("#tl-note"))
        started = absolute(second.runtime.started_at)[11:16]
        assert f"Claimed by {socket.gethostname()}:{os.getpid()}, started {started}" in note
        assert f"pilot-worker, awa-tui {second.runtime.version}" in note
        assert f"runtime {second.runtime.id})" in note


def test_a_long_host_is_cut_but_never_its_pid() -> None:
    info = RuntimeInfo(id=3, host="ip-10-0-3-17.eu-west-1.compute.internal", pid=4242)
    assert runtime_short(info, RUNTIME_WIDTH) == "ip-10-0-…:4242"
    assert len(runtime_short(info, RUNTIME_WIDTH)) <= RUNTIME_WIDTH
    assert runtime_short(RuntimeInfo(id=3), RUNTIME_WIDTH) == "#3"  # its row was pruned
    assert runtime_short(None, RUNTIME_WIDTH) == "-"
