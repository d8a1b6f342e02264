"""``/metrics``, ``/healthz`` and ``/readyz`` in process, on the real database.

The scrape parses with Prometheus's own text parser and its depth and lag are those of
``list_queues()`` for the same data (the lag between a read before and one after); a worker's
counters move when its jobs complete and fail; ``/readyz`` is 200 on a migrated schema and 503
with one line on one that is gone, and the queue gauges then say the read failed rather than
showing no queues.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import httpx
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from awa_tui.http.app import create_app, create_probe_app
from storage import Client, Job, JobState
from storage.db.migrator import migrate
from storage.db.pool import connect_once
from tests.http.conftest import asgi_client, park
from tests.storage.migration_db import fresh_database

DOCS = Path(__file__).resolve().parents[2] / "docs"


def family_of(sample: str) -> str:
    """``awa_job_duration_seconds_bucket`` -> ``awa_job_duration_seconds``."""
    return re.sub(r"_(bucket|count|sum|created)$", "", sample)


def samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def value(found: Iterable[Sample], name: str, **labels: str) -> float | None:
    matches = [s.value for s in found if s.name == name and s.labels == labels]
    assert len(matches) <= 1, (name, labels, matches)
    return matches[0] if matches else None


async def test_depth_and_lag_match_list_queues(
    api: httpx.AsyncClient, server_client: Client, client: Client, kind: str
) -> None:
    await park(client, kind)  # one job waiting for a callback, in "default"
    await client.insert_many([{"n": i} for i in range(3)], kind=kind, queue="mail")
    await client.insert(
        {"n": 9}, kind=kind, queue="mail", run_at=datetime.now(UTC) + timedelta(hours=1)
    )
    await client.insert({"n": 1}, kind=kind, queue="bulk")
    await server_client.pause_queue("bulk")

    before = {q.queue: q for q in await server_client.list_queues()}
    answer = await api.get("/metrics")
    after = {q.queue: q for q in await server_client.list_queues()}

    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    found = samples(answer.text)
    assert value(found, "awa_queue_read_ok") == 1
    assert before.keys() == after.keys() == {"bulk", "default", "mail"}
    for name, summary in after.items():
        for state, n in summary.counts.items():
            assert value(found, "awa_queue_depth", queue=name, state=state.value) == n
        lag = value(found, "awa_queue_lag_seconds", queue=name)
        assert lag is not None
        low, high = before[name].lag, summary.lag
        if high is None:
            assert lag == 0
        else:
            assert low is not None
            assert low.total_seconds() <= lag <= high.total_seconds()
        assert value(found, "awa_queue_paused", queue=name) == (1 if summary.paused else 0)
    assert value(found, "awa_queue_depth", queue="mail", state="available") == 3
    assert value(found, "awa_queue_depth", queue="mail", state="scheduled") == 1
    assert value(found, "awa_queue_depth", queue="default", state="waiting_external") == 1
    assert value(found, "awa_queue_paused", queue="bulk") == 1
    # serve runs no jobs: no runtime instruments, no runtime health
    assert not [s for s in found if s.name.startswith(("awa_job_", "awa_runtime_"))]


async def test_metrics_needs_the_token_and_health_does_not(api: httpx.AsyncClient) -> None:
    del api.headers["Authorization"]
    assert (await api.get("/metrics")).status_code == 401
    healthz = await api.get("/healthz")
    assert (healthz.status_code, healthz.text) == (200, "ok\n")
    readyz = await api.get("/readyz")
    assert (readyz.status_code, readyz.text) == (200, "ready\n")
    paths = (await api.get("/openapi.json")).json()["paths"]
    assert {"/metrics", "/healthz", "/readyz"} <= paths.keys()


async def test_readyz_is_503_and_the_gauges_say_so_once_the_schema_is_gone(
    api: httpx.AsyncClient, conn: asyncpg.Connection, schema: str
) -> None:
    assert (await api.get("/readyz")).status_code == 200
    await conn.execute(f"DROP SCHEMA {schema} CASCADE")

    readyz = await api.get("/readyz")
    assert readyz.status_code == 503
    assert readyz.text.startswith("not ready: ")
    assert readyz.text.count("\n") == 1
    assert "no queue storage" in readyz.text
    assert "awa-tui migrate" in readyz.text
    assert (await api.get("/healthz")).status_code == 200
    scraped = await api.get("/metrics")
    assert scraped.status_code == 200
    found = samples(scraped.text)
    assert value(found, "awa_queue_read_ok") == 0
    assert not [s for s in found if s.name == "awa_queue_depth"]  # not "no jobs": no answer


async def test_a_workers_counters_move_when_its_jobs_complete_and_fail(
    client: Client, kind: str
) -> None:
    registry = client.enable_prometheus()

    @client.task(kind=kind)
    async def handle(job: Job[dict[str, int]]) -> None:
        if job.args["n"] < 0:
            raise ValueError("refused")
        job.set_output({"seen": job.args["n"]})

    async with asgi_client(create_probe_app(client, registry)) as http:
        empty = samples((await http.get("/metrics")).text)
        assert value(empty, "awa_job_completed_total", queue="default", kind=kind) is None
        assert value(empty, "awa_runtime_health", state="stopped") == 1

        await client.insert_many([{"n": 1}, {"n": 2}], kind=kind)
        retried = await client.insert({"n": -1}, kind=kind, max_attempts=2)
        exhausted = await client.insert({"n": -2}, kind=kind, max_attempts=1)
        await client.start()
        await client.run_until_idle()
        found = samples((await http.get("/metrics")).text)
        await client.shutdown()
    for job, state in [(retried, JobState.RETRYABLE), (exhausted, JobState.FAILED)]:
        row = await client.get_job(job.id)
        assert row is not None
        assert row.state is state
    labels = {"queue": "default", "kind": kind}
    assert value(found, "awa_job_completed_total", **labels) == 2
    assert value(found, "awa_job_failed_total", **labels, outcome="retried") == 1
    assert value(found, "awa_job_failed_total", **labels, outcome="exhausted") == 1
    assert value(found, "awa_job_duration_seconds_count", **labels) == 4
    assert value(found, "awa_job_wait_seconds_count", queue="default") == 4
    claims = value(found, "awa_claim_duration_seconds_count", queue="default")
    assert claims is not None
    assert 1 <= claims <= 4
    outputs = {"outcome": "completed", **labels}
    assert value(found, "awa_job_output_recorded_total", **outputs) == 2
    assert value(found, "awa_job_output_size_bytes_count", **outputs) == 2
    assert value(found, "awa_job_output_size_bytes_sum", **outputs) == 2 * len('{"seen":1}')
    assert value(found, "awa_runtime_health", state="running") == 1
    assert value(found, "awa_runtime_health", state="stopped") == 0
    # every name docs/metrics.md, its alert rules and the dashboard use is one a scrape has
    # (no output was dropped here: that counter's name is added by hand)
    scraped = {name for s in found for name in (s.name, family_of(s.name))}
    scraped |= {"awa_job_output_dropped_total"}
    for doc in ("metrics.md", "grafana-dashboard.json"):
        named = set(re.findall(r"\bawa_[a-z0-9_]*[a-z0-9]\b", (DOCS / doc).read_text()))
        assert named - scraped == set(), doc


async def test_readyz_refuses_a_database_that_became_another_tools(pg_dsn: str) -> None:
    """The connect-time refusal of a foreign database, run again by /readyz: a database whose
    awa schema is now Awa's own (no awa-tui ledger, ``awa.schema_version``) is not ready."""
    async with fresh_database(pg_dsn, "awa_readyz_foreign") as dsn:
        await migrate(dsn)
        async with (
            await Client.connect(dsn) as server,
            asgi_client(create_app(server, token=None)) as http,
        ):
            assert (await http.get("/readyz")).status_code == 200
            async with connect_once(dsn) as conn:
                await conn.execute(
                    "DROP TABLE awa.schema_migrations; "
                    "CREATE TABLE awa.schema_version (version int); "
                    "INSERT INTO awa.schema_version VALUES (8)"
                )
            readyz = await http.get("/readyz")
    assert readyz.status_code == 503
    assert readyz.text.startswith("not ready: this database was made by Awa (schema version 8)")
    assert readyz.text.count("\n") == 1


def _series(text: str) -> set[tuple[str, tuple[tuple[str, str], ...]]]:
    return {(s.name, tuple(sorted(s.labels.items()))) for s in samples(text)}


async def test_scrapes_keep_nothing_and_a_vanished_queue_leaves_no_series(
    client: Client, kind: str
) -> None:
    """Flat over hours: a scrape builds its gauges from that read alone and registers nothing
    (not in the worker's registry, not in prometheus_client's global one), so repeated scrapes
    answer the same series, and a queue that is gone is gone from the next scrape."""
    registry = client.enable_prometheus()

    @client.task(kind=kind)
    async def handle(job: Job[dict[str, int]]) -> None:
        return None

    later = await client.insert({"n": 1}, kind=kind, queue="later", run_at=_in_an_hour())
    await client.insert({"n": 2}, kind=kind, queue="now")
    families = {m.name for m in REGISTRY.collect()}
    own = {m.name for m in registry.collect()}
    async with asgi_client(create_probe_app(client, registry)) as http:
        first = _series((await http.get("/metrics")).text)
        for _ in range(30):
            again = _series((await http.get("/metrics")).text)
        assert again == first
        assert ("awa_queue_depth", (("queue", "later"), ("state", "scheduled"))) in first
        await client.cancel_job(later.id)  # its queue had nothing else: no lanes, no settings
        gone = _series((await http.get("/metrics")).text)
    assert [s for s in gone if ("queue", "later") in s[1]] == []
    assert ("awa_queue_depth", (("queue", "now"), ("state", "available"))) in gone
    assert {m.name for m in REGISTRY.collect()} == families
    assert {m.name for m in registry.collect()} == own


def _in_an_hour() -> datetime:
    return datetime.now(UTC) + timedelta(hours=1)
