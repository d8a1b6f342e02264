"""The task registry: which handler runs each kind, with its args, output type and queue.

A ``Tasks`` object is made at import time, so a module can declare its handlers without a
database (``tasks = Tasks()``, ``@tasks.task(Args)``) and a worker process can load it by name
(``awa-tui worker module:tasks``). A client given ``tasks=`` shares that registry; one made
without it gets its own, and ``client.task(...)`` adds to whichever it holds.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from storage import unique
from storage.codec import JsonConversionError, JsonDecodeMismatch, decode_value, to_json_text
from storage.enqueue import KeyedJob, NewJob
from storage.errors import ArgsValidationError, AwaError, InvalidOption, UnknownKind
from storage.job import Job
from storage.models import JobRow
from storage.names import check_stored_name
from storage.payload import build_payload

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def kind_of(args_type: type) -> str:
    """``SyncInventory`` -> ``sync_inventory``."""
    return _CAMEL.sub("_", args_type.__name__).lower()


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
        """The output model registered for ``kind``; see ``storage.typed_output``."""
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
        """Validate and serialize one job (inserts and ``Job.stage`` both use it)."""
        options = dict(options)
        kind = options.pop("kind", None)
        queue = options.pop("queue", None)
        priority = options.pop("priority", 2)
        max_attempts = options.pop("max_attempts", 25)
        run_at = options.pop("run_at", None)
        tags = options.pop("tags", ())
        metadata = options.pop("metadata", None)
        unique_key = options.pop("unique_key", None)
        if callable(unique_key):  # insert_many: a key per row, computed from its args
            unique_key = unique_key(args)
        states = options.pop("unique_states", None)
        if options:
            raise AwaError(f"Unknown insert option(s): {', '.join(sorted(options))}.")
        if kind is None:
            if isinstance(args, dict):
                raise UnknownKind("A job given as a dict needs kind=...")
            kind = kind_of(type(args))
        check_stored_name(kind, "Kind")
        if queue is not None:
            check_stored_name(queue, "Queue")
        spec = self._specs.get(kind)
        if spec is not None and spec.args_type is not None and not isinstance(args, spec.args_type):
            try:
                decode_value(args, spec.args_type)
            except (JsonDecodeMismatch, TypeError) as exc:
                raise ArgsValidationError(
                    f"Args for kind {kind!r} do not match {spec.args_type_name}: {exc}"
                ) from exc
        if not 1 <= priority <= 4:
            raise AwaError(f"Priority must be between 1 (highest) and 4, not {priority}.")
        if max_attempts < 1:
            raise AwaError(f"max_attempts must be at least 1, not {max_attempts}.")
        if unique_key is not None:
            check_stored_name(unique_key, "Unique key")
        elif states is not None:
            raise InvalidOption("unique_states= needs a unique_key=; nothing was inserted.")
        try:
            args_json = to_json_text(args)
        except JsonConversionError as exc:
            raise ArgsValidationError(f"Args for kind {kind!r} cannot be stored: {exc}") from exc
        job = (
            kind,
            queue or (spec.queue if spec else "default"),
            args_json,
            priority,
            max_attempts,
            run_at,
            build_payload(metadata=metadata, tags=tuple(tags)),
        )
        if unique_key is None:
            return NewJob(*job)
        return KeyedJob(*job, unique_key, unique.resolve_states(states))
