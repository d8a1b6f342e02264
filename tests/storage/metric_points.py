"""Reading metric points from the OpenTelemetry SDK's in-memory reader."""

from __future__ import annotations

from opentelemetry.sdk.metrics.export import (
    HistogramDataPoint,
    InMemoryMetricReader,
    NumberDataPoint,
)


def counter_points(reader: InMemoryMetricReader, name: str) -> list[tuple[dict[str, str], int]]:
    """(attributes, value) of every point of counter ``name``."""
    return [
        ({k: str(v) for k, v in (p.attributes or {}).items()}, int(p.value))
        for p in _points(reader, name)
        if isinstance(p, NumberDataPoint)
    ]


def histogram_sums(reader: InMemoryMetricReader, name: str) -> list[float]:
    return [float(p.sum) for p in _points(reader, name) if isinstance(p, HistogramDataPoint)]


def _points(reader: InMemoryMetricReader, name: str) -> list[object]:
    data = reader.get_metrics_data()
    if data is None:
        return []
    return [
        point
        for resource in data.resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == name
        for point in metric.data.data_points
    ]
