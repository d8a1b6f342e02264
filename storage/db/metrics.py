"""Output metrics (OpenTelemetry API: a no-op until an SDK is installed) and rate-limited warnings.

Outputs are never logged; warnings name the kind, queue and reason only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from opentelemetry import metrics

from storage.db.job_metrics import JobMetrics
from storage.values.codec import utf8_size

log = logging.getLogger("storage")
WARN_INTERVAL_SECONDS = 60.0


class OutputMetrics:
    """``awa.job.output_recorded``, ``awa.job.output_size`` and ``awa.job.output_dropped``."""

    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        meter = (meter_provider or metrics.get_meter_provider()).get_meter("awa")
        self._recorded = meter.create_counter(
            "awa.job.output_recorded", description="Outputs published with their attempt"
        )
        self._size = meter.create_histogram(
            "awa.job.output_size", unit="By", description="Bytes of output JSON text"
        )
        self._dropped = meter.create_counter(
            "awa.job.output_dropped", description="Outputs recorded but not published"
        )
        self._clock = clock
        self.prometheus: JobMetrics | None = None
        """Set by ``Client.enable_prometheus``: the same events, also to Prometheus."""
        self._last_warned: dict[tuple[str, str], float] = {}
        self._recorded_attributes: dict[tuple[str, str, str], dict[str, str]] = {}
        # Made before any SDK is installed, the instruments are the API's proxies: their calls
        # do nothing until an SDK meter provider is set, then pass through to its instruments,
        # which a proxy holds in ``_real_instrument`` (None until then). That attribute is not
        # public API: a test pins it, and an instrument without it counts as live.
        self._proxy: Any = self._size if hasattr(self._size, "_real_instrument") else None

    def recorded(self, kind: str, queue: str, outcome: str, text: str) -> None:
        """An output published with its attempt: counted, and its UTF-8 size recorded."""
        if self.prometheus is not None:
            self.prometheus.output_recorded(queue, kind, outcome, utf8_size(text))
        proxy = self._proxy
        if proxy is not None and proxy._real_instrument is None:
            return  # no SDK behind the proxies yet: skip the per-job work they would ignore
        key = (kind, queue, outcome)
        attributes = self._recorded_attributes.get(key)
        if attributes is None:  # built once per kind, queue and outcome: this runs per job
            attributes = {"awa.job.kind": kind, "awa.job.queue": queue, "awa.job.outcome": outcome}
            self._recorded_attributes[key] = attributes
        self._recorded.add(1, attributes)
        self._size.record(utf8_size(text), attributes)

    def dropped(self, kind: str, queue: str, reason: str) -> None:
        if self.prometheus is not None:
            self.prometheus.output_dropped(queue, kind, reason)
        self._dropped.add(
            1, {"awa.job.kind": kind, "awa.job.queue": queue, "awa.output.reason": reason}
        )
        key = (kind, reason)
        now = self._clock()
        last = self._last_warned.get(key)
        if last is None or now - last >= WARN_INTERVAL_SECONDS:
            self._last_warned[key] = now
            log.warning("job output dropped: kind=%s queue=%s reason=%s", kind, queue, reason)
