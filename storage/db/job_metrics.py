"""The runtime's Prometheus instruments: claims, waits, handler durations, ends and outputs.

Recorded where each event happens, once: the claim (``storage.runtime.loop``), the handler's
run and the attempt's committed end (``storage.runtime.executor``), and the outputs through
``OutputMetrics`` (``storage.db.metrics``), which feeds these under the names OpenTelemetry's
Prometheus exporter gives its own instruments (``awa.job.output_recorded`` ->
``awa_job_output_recorded_total``), so an output is one event under one name whichever
exporter reads it.

Off until ``enable`` (``Client.enable_prometheus``): every call then returns at once, so a
client that exports nothing pays one attribute check per job. The instruments live in a
registry of their own, never prometheus_client's global one. Labels are queue, kind and a fixed
vocabulary (outcome, reason); never an id, an argument or an output.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram

SECONDS_BUCKETS = (0.005, 0.025, 0.1, 0.25, 1, 2.5, 10, 60, 300)
"""Claim latency, job wait and job duration (seconds), from 5 ms to five minutes. Each bucket
is a line per series in every scrape: few buckets keep a scrape's cost small."""
SIZE_BUCKETS = (256, 4096, 65536, 1048576)
"""Output sizes (bytes) up to the 1 MiB output limit."""


class Waited(Protocol):
    """A claimed job, as far as the wait histogram reads it (``ClaimedJob``)."""

    @property
    def waited(self) -> float: ...


class JobMetrics:
    """The instruments, or nothing while disabled (``registry`` is None then)."""

    def __init__(self) -> None:
        self.registry: CollectorRegistry | None = None

    def enable(self, registry: CollectorRegistry | None = None) -> CollectorRegistry:
        """Create the instruments in ``registry`` (a new one by default) and start recording;
        returns the registry to expose. Enabling twice keeps the first registry."""
        if self.registry is not None:
            return self.registry
        registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self._claim = Histogram(
            "awa_claim_duration_seconds",
            "Time one claim took (lock the lane, read its batch), per queue",
            ["queue"],
            registry=registry,
            buckets=SECONDS_BUCKETS,
        )
        self._wait = Histogram(  # a queue's property: by queue only, a series fewer per kind
            "awa_job_wait_seconds",
            "From when a job was due (run_at) to when this worker claimed it",
            ["queue"],
            registry=registry,
            buckets=SECONDS_BUCKETS,
        )
        self._duration = Histogram(
            "awa_job_duration_seconds",
            "How long a handler ran, whatever it returned or raised",
            ["queue", "kind"],
            registry=registry,
            buckets=SECONDS_BUCKETS,
        )
        self._completed = Counter(
            "awa_job_completed",
            "Attempts this worker ended completed (committed)",
            ["queue", "kind"],
            registry=registry,
        )
        self._failed = Counter(
            "awa_job_failed",
            "Attempts this worker ended failed (committed): retried, or exhausted (failed or "
            "dead-lettered)",
            ["queue", "kind", "outcome"],
            registry=registry,
        )
        self._output_recorded = Counter(
            "awa_job_output_recorded",
            "Outputs published with their attempt (awa.job.output_recorded)",
            ["queue", "kind", "outcome"],
            registry=registry,
        )
        self._output_size = Histogram(
            "awa_job_output_size_bytes",
            "Bytes of output JSON text (awa.job.output_size)",
            ["queue", "kind", "outcome"],
            registry=registry,
            buckets=SIZE_BUCKETS,
        )
        self._output_dropped = Counter(
            "awa_job_output_dropped",
            "Outputs recorded but not published (awa.job.output_dropped)",
            ["queue", "kind", "reason"],
            registry=registry,
        )
        self._per_job: dict[tuple[str, str], tuple[Histogram, Counter]] = {}
        self.registry = registry
        return registry

    def claimed(self, queue: str, jobs: Iterable[Waited], seconds: float) -> None:
        """A claim that took ``seconds`` and returned ``jobs`` of ``queue``."""
        if self.registry is None:
            return
        self._claim.labels(queue).observe(seconds)
        wait = self._wait.labels(queue)
        for job in jobs:
            wait.observe(job.waited)

    def ran(self, queue: str, kind: str, seconds: float) -> None:
        if self.registry is not None:
            self._of_job(queue, kind)[0].observe(seconds)

    def completed(self, queue: str, kind: str) -> None:
        if self.registry is not None:
            self._of_job(queue, kind)[1].inc()

    def _of_job(self, queue: str, kind: str) -> tuple[Histogram, Counter]:
        """The duration and completion series of one queue and kind, found once: ``labels``
        costs as much as the observation itself, and these two run per job. Bounded by the
        queues and kinds, as the series themselves are."""
        key = (queue, kind)
        found = self._per_job.get(key)
        if found is None:
            found = self._per_job[key] = (
                self._duration.labels(queue, kind),
                self._completed.labels(queue, kind),
            )
        return found

    def failed(self, queue: str, kind: str, outcome: str) -> None:
        """``outcome``: ``retried`` or ``exhausted`` (the lifecycle events' names)."""
        if self.registry is not None:
            self._failed.labels(queue, kind, outcome).inc()

    def output_recorded(self, queue: str, kind: str, outcome: str, size: int) -> None:
        if self.registry is not None:
            self._output_recorded.labels(queue, kind, outcome).inc()
            self._output_size.labels(queue, kind, outcome).observe(size)

    def output_dropped(self, queue: str, kind: str, reason: str) -> None:
        if self.registry is not None:
            self._output_dropped.labels(queue, kind, reason).inc()
