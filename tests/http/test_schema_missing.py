"""A server ahead of its migration (a schema without the output columns): a completion with
a valid output goes ahead, its output dropped and counted, because a webhook sender cannot
recover from a refused completion. An invalid one is still a 400."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from awa_tui.http.app import create_app
from storage import Client, InvalidFilter, JobState
from storage.db.metrics import OutputMetrics
from storage.db.pool import connect_once
from tests.http.conftest import AUTH, TOKEN, asgi_client, park
from tests.storage.metric_points import counter_points
from tests.storage.migration_db import database_at


@pytest.fixture
async def v001_dsn(pg_dsn: str) -> AsyncIterator[str]:
    """A database migrated only to v001, with a queue-storage schema ``older``."""
    async with database_at(pg_dsn, "awa_http_v001", 1) as dsn:
        async with connect_once(dsn) as conn:
            await conn.execute("SELECT awa.install_queue_storage('older')")
        yield dsn


async def test_a_valid_output_is_dropped_counted_and_the_job_completes(v001_dsn: str) -> None:
    reader = InMemoryMetricReader()
    async with (
        await Client.connect(v001_dsn, "older") as worker,
        await Client.connect(v001_dsn, "older") as server,
    ):
        server.metrics = OutputMetrics(meter_provider=MeterProvider(metric_readers=[reader]))
        job_id, callback_id = await park(worker, "hook")
        async with asgi_client(create_app(server, token=TOKEN)) as http:
            http.headers.update(AUTH)
            invalid = await http.post(
                f"/api/callbacks/{callback_id}/complete", json={"output": {"n": 2**70}}
            )
            assert (invalid.status_code, invalid.json()["reason"]) == (400, "invalid")
            answer = await http.post(
                f"/api/callbacks/{callback_id}/complete", json={"output": {"receipt": "r1"}}
            )
            assert answer.status_code == 200
            assert answer.headers["Awa-Output-Dropped"] == "schema_missing"
            assert (answer.json()["state"], answer.json()["output"]) == ("completed", None)
            detail = (await http.get(f"/api/jobs/{job_id}")).json()
            assert (detail["state"], detail["output"]) == ("completed", None)
        row = await worker.get_job(job_id)
        assert row is not None
        assert row.state is JobState.COMPLETED
    dropped = [
        (attrs["awa.job.kind"], attrs["awa.output.reason"], value)
        for attrs, value in counter_points(reader, "awa.job.output_dropped")
    ]
    assert dropped == [("hook", "schema_missing", 1)]


async def test_outputs_are_not_searched_or_compared_where_none_are_kept(v001_dsn: str) -> None:
    """Never "nothing there" where a schema keeps no outputs: the search, the last good
    output and the schema drift are refused in one line, over HTTP (400) and in Python."""
    async with await Client.connect(v001_dsn, "older") as server:
        async with asgi_client(create_app(server, token=TOKEN)) as http:
            http.headers.update(AUTH)
            answer = await http.get("/api/jobs", params={"since": "1h", "out.status": "x"})
            drift = await http.get("/api/kinds/hook/drift")
        assert answer.status_code == 400
        assert "no output columns (it is at migration v001)" in answer.json()["message"]
        assert drift.status_code == 400
        assert "no output columns (it is at migration v001)" in drift.json()["message"]
        with pytest.raises(InvalidFilter, match="migrate it first"):
            await server.last_good_output("hook")
        with pytest.raises(InvalidFilter, match="migrate it first"):
            await server.schema_drift("hook")
