"""``GET /metrics``: the Prometheus text format, on ``serve`` and on ``worker --metrics-port``.

Every scrape reads the queues once (``Client.list_queues``: one snapshot, bounded whatever the
history, the Queues screen's read) and turns each summary into gauges: depth per queue and live
state, lag (the age of the oldest available job), paused, the last five minutes' completions and
failures. The worker adds its runtime's own instruments (``Client.enable_prometheus``: claim
latency, job wait and duration, completions and failures, outputs) and its health; ``serve``
runs no jobs, so it has the gauges only. Nothing here is an id, an argument, an output or a
password: labels are queue, kind, state and fixed words.

A read that fails (the database is down, the schema went away) is not an empty queue list:
the scrape still answers, with ``awa_queue_read_ok 0`` and no queue gauges.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator, Sequence

from fastapi import APIRouter, Request
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.registry import Collector
from starlette.responses import Response

from awa_tui.http.bodies import client_of
from storage import AwaError, Client, Health, HealthState, QueueSummary

READ_TIMEOUT_SECONDS = 5.0
"""A scrape waits this long for the queue read, then answers without the queue gauges."""

router = APIRouter(tags=["health"])


class QueueCollector(Collector):
    """One scrape's gauges, from summaries already read (prometheus_client collects in sync)."""

    def __init__(
        self, queues: Sequence[QueueSummary] | None, read_seconds: float, health: Health | None
    ) -> None:
        self.queues = queues
        self.read_seconds = read_seconds
        self.health = health

    def collect(self) -> Iterator[GaugeMetricFamily]:
        ok = GaugeMetricFamily(
            "awa_queue_read_ok", "1 if this scrape read the queues, 0 if the read failed"
        )
        ok.add_metric([], 0 if self.queues is None else 1)
        yield ok
        took = GaugeMetricFamily(
            "awa_queue_read_seconds", "How long this scrape's queue read took", unit="seconds"
        )
        took.add_metric([], self.read_seconds)
        yield took
        if self.health is not None:
            health = GaugeMetricFamily(
                "awa_runtime_health",
                "The worker runtime's health: 1 for its current state, 0 for the others",
                labels=["state"],
            )
            for state in HealthState:
                health.add_metric([state.value], 1 if self.health.state is state else 0)
            yield health
        if self.queues is not None:
            yield from queue_families(self.queues)


def queue_families(queues: Sequence[QueueSummary]) -> Iterator[GaugeMetricFamily]:
    depth = GaugeMetricFamily(
        "awa_queue_depth",
        "Live jobs per queue and state (available, scheduled and retryable stop at the read's"
        " cap: see capped)",
        labels=["queue", "state"],
    )
    capped = GaugeMetricFamily(
        "awa_queue_depth_capped",
        "1 if a depth of the queue stopped at the read's cap (that depth is at least the cap)",
        labels=["queue"],
    )
    lag = GaugeMetricFamily(
        "awa_queue_lag",
        "Age of the oldest available job (0: none available)",
        labels=["queue"],
        unit="seconds",
    )
    paused = GaugeMetricFamily("awa_queue_paused", "1 if the queue is paused", labels=["queue"])
    recent = GaugeMetricFamily(
        "awa_queue_finished_5m",
        "Jobs completed, and failed for good (dead-lettered included), in the last 5 minutes",
        labels=["queue", "state"],
    )
    for q in queues:
        for state, n in sorted(q.counts.items()):
            depth.add_metric([q.queue, state.value], n)
        capped.add_metric([q.queue], 1 if q.capped else 0)
        age = q.lag
        lag.add_metric([q.queue], age.total_seconds() if age is not None else 0.0)
        paused.add_metric([q.queue], 1 if q.paused else 0)
        recent.add_metric([q.queue, "completed"], q.completed_5m)
        recent.add_metric([q.queue, "failed"], q.failed_5m)
    yield from (depth, capped, lag, paused, recent)


async def render(client: Client, runtime: CollectorRegistry | None) -> bytes:
    """One scrape: the queue gauges read now, then ``runtime``'s instruments (the worker's)."""
    began = time.perf_counter()
    queues: list[QueueSummary] | None
    try:
        async with asyncio.timeout(READ_TIMEOUT_SECONDS):
            queues = await client.list_queues()
    except (AwaError, TimeoutError):
        queues = None
    health = client.health if runtime is not None else None
    text = generate_latest(QueueCollector(queues, time.perf_counter() - began, health))
    return text + generate_latest(runtime) if runtime is not None else text


@router.get(
    "/metrics",
    summary="Prometheus metrics: queue depth and lag (and, on a worker, its runtime's)",
    response_class=Response,
    responses={
        200: {"content": {CONTENT_TYPE_PLAIN_0_0_4: {}}, "description": "Text format 0.0.4"}
    },
)
async def metrics(request: Request) -> Response:
    runtime: CollectorRegistry | None = getattr(request.app.state, "runtime_metrics", None)
    body = await render(client_of(request), runtime)
    return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)
