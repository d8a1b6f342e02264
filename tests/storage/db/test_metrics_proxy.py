"""Output metrics on the global meter provider: skipped while no SDK is behind it, recorded
once one is installed (OpenTelemetry's proxy semantics). In a child process, since the global
provider can be set once per process."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import asyncio, sys
from opentelemetry import metrics
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from pydantic import BaseModel
from storage import Client, Job
from storage.testing import work_one
from tests.storage.metric_points import counter_points, histogram_sums

class Resize(BaseModel):
    width: int

async def main(dsn: str, schema: str) -> None:
    async with await Client.connect(dsn, schema) as client:  # metrics on the API's proxies
        @client.task(Resize)
        async def resize(job: Job[Resize]) -> None:
            job.set_output({"w": job.args.width})

        await client.insert(Resize(width=1))
        await work_one(client)  # no SDK yet: nothing to record into
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        await client.insert(Resize(width=22))
        await work_one(client)
        print(counter_points(reader, "awa.job.output_recorded"))
        print(sum(histogram_sums(reader, "awa.job.output_size")))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


def test_metrics_skip_work_without_an_sdk_and_record_once_one_is_installed(
    migrated_dsn: str, schema: str
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, migrated_dsn, schema],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    recorded, size = done.stdout.splitlines()
    attributes = {"awa.job.kind": "resize", "awa.job.queue": "default"}
    assert recorded == str([({**attributes, "awa.job.outcome": "completed"}, 1)])
    assert float(size) == len('{"w":22}')
