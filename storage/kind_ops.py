"""The client's kinds part: job-kind descriptors, the kinds seen, and periodic schedules.

Descriptors are declared here (``job_kind_descriptor``) and for every registered task, and
published by ``sync_descriptors`` (``storage.read.descriptors``); schedules are read, removed
and triggered through ``storage.insert.periodic``. ``Client`` publishes these under the same
names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from storage.insert import periodic
from storage.insert.plan import kind_of
from storage.ops.audit import Recorder
from storage.read import descriptors, one_job
from storage.runtime.host import HandlerSpec
from storage.session import Session
from storage.values.audit import Audit
from storage.values.errors import ScheduleNotFound
from storage.values.models import ARGS_SCHEMA, QUEUE, JobKindDescriptor, JobRow, KindSummary
from storage.values.names import check_stored_name
from storage.values.output import args_schema, output_descriptor


class KindOperations:
    """What one client declares and reads about kinds and schedules; ``tasks`` gives the
    registered tasks (their declared outputs, queues and args are published with the
    descriptors)."""

    def __init__(self, session: Session, tasks: Callable[[], Mapping[str, HandlerSpec]]) -> None:
        self._session = session
        self._tasks = tasks
        self._descriptors: dict[str, JobKindDescriptor] = {}

    # -- descriptors --------------------------------------------------------------------------
    def job_kind_descriptor(
        self,
        kind_or_type: str | type,
        *,
        display_name: str | None = None,
        description: str | None = None,
        owner: str | None = None,
        docs_url: str | None = None,
        tags: tuple[str, ...] | list[str] = (),
        extra: dict[str, Any] | None = None,
        output: dict[str, Any] | None = None,
    ) -> JobKindDescriptor:
        """Declare what a kind is; published when the runtime starts and on every sync."""
        kind = kind_or_type if isinstance(kind_or_type, str) else kind_of(kind_or_type)
        check_stored_name(kind, "Kind")
        descriptor = JobKindDescriptor(
            kind=kind,
            display_name=display_name,
            description=description,
            owner=owner,
            docs_url=docs_url,
            tags=list(tags),
            extra=extra or {},
            output=output,
        )
        self._descriptors[kind] = descriptor
        return descriptor

    def declared_descriptors(self, tasks: dict[str, Any]) -> list[JobKindDescriptor]:
        """Descriptors for every registered task: its output type and schema, its queue and
        its args schema (``JobKindDescriptor.queue``, ``args_schema``); what an explicit
        descriptor says wins."""
        found = dict(self._descriptors)
        for kind, spec in tasks.items():
            base = found.get(kind) or JobKindDescriptor(kind=kind)
            if base.output is None and spec.output_type is not None:
                base = base.model_copy(update={"output": output_descriptor(spec.output_type)})
            # What a form needs to enqueue one (``enqueue_job``); explicit extra keys win.
            published = {QUEUE: spec.queue, ARGS_SCHEMA: args_schema(spec.args_type)}
            extra = {k: v for k, v in published.items() if v is not None} | base.extra
            found[kind] = base.model_copy(update={"extra": extra})
        return list(found.values())

    async def sync_descriptors(self) -> None:
        """Publish the declared descriptors (the runtime also does, at start and periodically)."""
        async with self._session.connection("sync_descriptors") as conn:
            await descriptors.sync(conn, self.declared_descriptors(dict(self._tasks())))

    async def get_descriptor(self, kind: str) -> JobKindDescriptor | None:
        check_stored_name(kind, "Kind")
        async with self._session.connection("get_descriptor") as conn:
            return (await descriptors.fetch(conn, kind)).get(kind)

    async def list_kinds(self) -> list[KindSummary]:
        async with self._session.connection("list_kinds") as conn:
            return await descriptors.list_kinds(conn)

    # -- periodic schedules --------------------------------------------------------------------
    async def list_schedules(self) -> list[periodic.PeriodicSchedule]:
        """The stored periodic schedules with their next run, by name."""
        async with self._session.connection("list_schedules") as conn:
            return await periodic.list_schedules(conn)

    async def remove_schedule(self, name: str) -> bool:
        """Stop a stored schedule (a client that declares it again stores it again)."""
        async with self._session.connection("remove_schedule") as conn:
            return await periodic.remove(conn, check_stored_name(name, "Schedule"))

    async def trigger_schedule(
        self, name: str, *, actor: str | None = None, reason: str | None = None
    ) -> JobRow:
        """Enqueue one job of the stored schedule ``name`` now, besides its ticks (which stay
        as they are); a worker serving its queue is woken. ``ScheduleNotFound`` if none.
        Audited as ``trigger_schedule`` on the new job."""
        audit = Recorder(Audit.of(actor, reason))
        async with self._session.connection("trigger_schedule") as conn, conn.transaction():
            job_id = await periodic.trigger(conn, check_stored_name(name, "Schedule"))
            if job_id is None:
                raise ScheduleNotFound(f"No stored schedule is named {name!r}.")
            row = await one_job.get_job(
                conn, job_id, outputs=await self._session.probe.present(conn)
            )
            assert row is not None  # inserted by this transaction
            await audit.job(conn, "trigger_schedule", job_id, row.queue)
        return row
