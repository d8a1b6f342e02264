"""What the runtime and the executor need from the client that runs them, and no more.

``Client`` implements ``WorkerHost``; ``runtime.py`` and ``executor.py`` depend on this
interface, never on ``Client`` (an import-linter contract holds that), so the worker can be
read, and tested, without the client's 40-odd public methods in view.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import asyncpg

from storage.db.job_metrics import JobMetrics
from storage.db.metrics import OutputMetrics
from storage.insert.enqueue import NewJob
from storage.ops.maintenance import MaintenanceSettings, PassReport
from storage.runtime.batcher import CompletionBatcher
from storage.runtime.job import AttemptServices, Job
from storage.runtime.notices import NoticeListener
from storage.values.events import EventBus
from storage.values.models import JobRow


class HandlerSpec(Protocol):
    """A registered task, as the executor runs it."""

    @property
    def handler(self) -> Callable[[Job[Any]], Awaitable[Any]]: ...

    @property
    def args_type(self) -> type | None: ...

    @property
    def output_type(self) -> type | None: ...

    @property
    def args_type_name(self) -> str: ...

    @property
    def queue(self) -> str: ...


class WorkerHost(AttemptServices, Protocol):
    """The client, as the runtime and the executor see it."""

    pool: asyncpg.Pool
    batcher: CompletionBatcher
    notices: NoticeListener
    events: EventBus
    metrics: OutputMetrics

    @property
    def job_metrics(self) -> JobMetrics: ...

    @property
    def tasks(self) -> Mapping[str, HandlerSpec]: ...

    def task_spec(self, kind: str) -> HandlerSpec | None: ...

    def has_completed_specs(self, kind: str) -> bool: ...

    def completed_follow_ups(self, row: JobRow) -> list[NewJob]: ...

    def outputs_cached(self) -> bool: ...

    async def outputs_supported(self) -> bool: ...

    async def ensure_listener(self) -> None: ...

    async def sync_descriptors(self) -> None: ...

    async def store_schedules(self) -> None: ...

    async def lead_maintenance(self, settings: MaintenanceSettings) -> PassReport: ...

    async def resign_maintenance(self) -> None: ...
