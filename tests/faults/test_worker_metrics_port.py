"""``awa-tui worker --metrics-port 0``: a real worker process serves ``/metrics``, ``/healthz``
and ``/readyz`` on a free port; its completion counter moves when it runs a job; on SIGTERM it
exits 0 within a bound and the port is closed. A taken port is one line and exit 2, before
anything runs; ``--metrics-port`` with ``--processes`` is refused the same way."""

from __future__ import annotations

import asyncio
import re

import asyncpg
import httpx
import pytest

from awa_tui.errors import EXIT_OK, EXIT_USAGE
from awa_tui.http.serve import listen
from storage import Client
from tests.faults.test_many_workers import (
    Worker,
    _runs_table,
    _spawn,
    _started,
    _stop,
    _until,
)
from tests.http.test_metrics import samples, value
from tests.workers_tasks import Count, tasks

ADDRESS = re.compile(r"metrics on (http://127\.0\.0\.1:\d+)/metrics")


async def test_the_worker_serves_metrics_health_and_readiness_then_stops(
    migrated_dsn: str, schema: str, conn: asyncpg.Connection
) -> None:
    await _runs_table(conn)
    worker = await _spawn(migrated_dsn, schema, f"m-{schema}", ["--metrics-port", "0"])
    try:
        await _until(lambda: _started(worker), 60)
        (url,) = {m.group(1) for line in worker.stderr if (m := ADDRESS.search(line))}
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            assert (await http.get("/healthz")).status_code == 200
            assert (await http.get("/readyz")).text == "ready\n"
            async with await Client.connect(migrated_dsn, schema, tasks=tasks) as inserter:
                await inserter.insert(Count(n=1))

            async def completed() -> bool:
                found = samples((await http.get("/metrics")).text)
                done = value(found, "awa_job_completed_total", queue="many", kind="count")
                return done == 1

            await _until(completed, 60)
            found = samples((await http.get("/metrics")).text)
            assert value(found, "awa_runtime_health", state="running") == 1
            assert value(found, "awa_queue_read_ok") == 1
            assert value(found, "awa_job_duration_seconds_count", queue="many", kind="count") == 1
        code, text = await asyncio.wait_for(_stop(worker), 30)
        assert code == EXIT_OK, text
        with pytest.raises(httpx.ConnectError):
            async with httpx.AsyncClient(base_url=url, timeout=5) as http:
                await http.get("/healthz")
    finally:
        if worker.process.returncode is None:
            worker.process.kill()
            await worker.process.wait()
        await worker.drained


async def test_a_taken_metrics_port_and_processes_are_refused_in_one_line(
    migrated_dsn: str, schema: str
) -> None:
    with listen("127.0.0.1", 0) as taken:
        port = str(taken.getsockname()[1])
        worker = await _spawn(migrated_dsn, schema, f"t-{schema}", ["--metrics-port", port])
        code, text = await _exited(worker)
    assert code == EXIT_USAGE
    assert text.startswith(f"awa-tui: Cannot listen on 127.0.0.1:{port} for --metrics-port")
    assert text.count("\n") == 1
    options = ["--metrics-port", "0", "--processes", "2"]
    code, text = await _exited(await _spawn(migrated_dsn, schema, f"p-{schema}", options))
    assert code == EXIT_USAGE
    assert "--metrics-port serves one worker process" in text


async def _exited(worker: Worker) -> tuple[int, str]:
    """A worker that stops by itself (a refusal): its exit code and what it printed."""
    code = await asyncio.wait_for(worker.process.wait(), 60)
    await worker.drained
    return code, "".join(worker.stderr)
