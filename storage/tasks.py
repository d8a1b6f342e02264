"""The task registry: which handler runs each kind, with its args, output type and queue.

A ``Tasks`` object is made at import time, so a module can declare its handlers without a
database (``tasks = Tasks()``, ``@tasks.task(Args)``) and a worker process can load it by name
(``awa-tui worker module:tasks``). A client given ``tasks=`` shares that registry; one made
without it gets its own, and ``client.task(...)`` adds to whichever it holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from storage.insert.enqueue import NewJob
from storage.insert.plan import InsertPlan, kind_of
from storage.runtime.job import Job
from storage.values.errors import AwaError
from storage.values.models import JobRow
from storage.values.names import check_stored_name

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])


@dataclass(frozen=True)
class TaskSpec:
    kind: str
    handler: Callable[[Job[Any]], Awaitable[Any]]
    args_type: type | None
    output_type: type | None
    queue: str

    @property
    def args_type_name(self) -> str:
        return self.args_type.__name__ if self.args_type is not None else "dict"


@dataclass(frozen=True)
class CompletedSpec:
    build: Callable[[JobRow], Any]
    options: dict[str, Any]


class Tasks:
    """Handlers by kind, and the follow-ups to enqueue when a kind completes."""

    def __init__(self) -> None:
        self._specs: dict[str, TaskSpec] = {}
        self._completed: dict[str, list[CompletedSpec]] = {}

    def task(
        self,
        args_type: type | None = None,
        *,
        kind: str | None = None,
        output: type | None = None,
        queue: str = "default",
    ) -> Callable[[F], F]:
        """Register the decorated coroutine as the handler of a kind (from ``args_type``)."""
        if kind is None:
            if args_type is None:
                raise AwaError("A task needs an args type or an explicit kind.")
            kind = kind_of(args_type)
        resolved_kind = check_stored_name(kind, "Kind")
        check_stored_name(queue, "Queue")

        def decorate(handler: F) -> F:
            self._specs[resolved_kind] = TaskSpec(resolved_kind, handler, args_type, output, queue)
            return handler

        return decorate

    def spec(self, kind: str) -> TaskSpec | None:
        return self._specs.get(kind)

    @property
    def specs(self) -> dict[str, TaskSpec]:
        return dict(self._specs)

    def queues(self) -> list[str]:
        """The queues of the registered tasks, sorted (what a runtime serves by default)."""
        return sorted({spec.queue for spec in self._specs.values()})

    def output_model(self, kind: str) -> type | None:
        """The output model registered for ``kind``; see ``storage.ops.declared_output``."""
        spec = self._specs.get(kind)
        return spec.output_type if spec is not None else None

    def on_completed(
        self, kind: str, build: Callable[[JobRow], Any], **insert_options: Any
    ) -> None:
        """Enqueue follow-ups when a job of ``kind`` completes, in its completion transaction.

        ``build`` receives the completed row with ``output`` cleared (no spec can derive a
        follow-up from an output) and returns args, a list of args, or None. Jobs of a kind
        with specs complete on the general path.
        """
        self._completed.setdefault(kind, []).append(CompletedSpec(build, insert_options))

    def has_completed_specs(self, kind: str) -> bool:
        return bool(self._completed.get(kind))

    def completed_follow_ups(self, row: JobRow) -> list[NewJob]:
        """The follow-ups registered specs build for ``row`` (its output is never passed)."""
        row = row.model_copy(update={"output_text": None, "has_output": False})
        jobs: list[NewJob] = []
        for spec in self._completed.get(row.kind, []):
            built = spec.build(row)
            for args in built if isinstance(built, list) else [] if built is None else [built]:
                jobs.append(self.build_job(args, spec.options))
        return jobs

    def build_job(self, args: Any, options: dict[str, Any]) -> NewJob:
        """Validate and serialize one job (``Job.stage``, periodic jobs)."""
        return InsertPlan(self._specs, options).job(args)

    def plan(self, options: dict[str, Any]) -> InsertPlan:
        """The checked options of one insert call (``storage.insert.plan``)."""
        return InsertPlan(self._specs, options)
