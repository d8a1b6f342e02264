"""Drop warnings are rate-limited per kind and reason and never carry the output."""

from __future__ import annotations

import logging

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from storage.db.metrics import OutputMetrics
from tests.storage.metric_points import counter_points


def test_drop_warnings_once_per_kind_and_reason_per_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    reader = InMemoryMetricReader()
    metrics = OutputMetrics(
        clock=lambda: now[0], meter_provider=MeterProvider(metric_readers=[reader])
    )
    with caplog.at_level(logging.WARNING, logger="storage"):
        for _ in range(5):
            metrics.dropped("resize", "images", "outcome")
        metrics.dropped("resize", "images", "schema_missing")
        now[0] += 59.9
        metrics.dropped("resize", "images", "outcome")
        now[0] += 0.1
        metrics.dropped("resize", "images", "outcome")
    warned = [r.getMessage() for r in caplog.records]
    assert warned == [
        "job output dropped: kind=resize queue=images reason=outcome",
        "job output dropped: kind=resize queue=images reason=schema_missing",
        "job output dropped: kind=resize queue=images reason=outcome",
    ]
    counted = {
        a["awa.output.reason"]: v for a, v in counter_points(reader, "awa.job.output_dropped")
    }
    assert counted == {"outcome": 7, "schema_missing": 1}
