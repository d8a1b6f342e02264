"""The Client's operator surface: list reads, admin actions, descriptors and maintenance.

Kept apart from ``client.py`` (which owns tasks, inserts, callbacks and the runtime) so each
module stays small; ``Client`` inherits these methods.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from storage import admin, counting, descriptors, listing, maintenance, periodic
from storage.db import acquire
from storage.errors import AwaError, InvalidJobState, JobNotFound
from storage.events import EventBus, JobEvent
from storage.listing import ListFilter
from storage.maintenance import MaintenanceSettings, PassReport
from storage.models import (
    JobKindDescriptor,
    JobPage,
    JobRow,
    JobState,
    KindSummary,
    StateCounts,
)
from storage.names import check_stored_name
from storage.output import output_descriptor

if TYPE_CHECKING:
    from storage.schema_probe import OutputColumnsProbe

BULK_PAGE = 500
BULK_ACTIONS = ("retry", "cancel", "delete", "retry_dlq", "purge_dlq")


class Operations:
    """Mixed into ``Client``; relies on its pool, dsn, probe and registered tasks."""

    pool: asyncpg.Pool
    dsn: str | None
    _probe: OutputColumnsProbe
    _descriptors: dict[str, JobKindDescriptor]
    events: EventBus
    count_cap: int = counting.COUNT_CAP
    """Tab counts (``counts``, ``browse``) stop at this many jobs per state."""

    def _connection(
        self, operation: str
    ) -> AbstractAsyncContextManager[PoolConnectionProxy[asyncpg.Record]]:
        """A pooled connection for the public call ``operation``; every failure, including
        the pool's (re)connect, surfaces as an ``AwaError`` naming it."""
        return acquire(self.pool, self.dsn, operation)

    # -- lists --------------------------------------------------------------------------------
    async def list_jobs(
        self,
        *,
        state: JobState | str | None = None,
        dlq: bool = False,
        kind: str | None = None,
        queue: str | None = None,
        search: str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> list[JobRow]:
        """A page of jobs, newest first, read in one snapshot. Rows carry no output;
        ``has_output`` says if one exists. An unknown state or unusable filter text raises
        ``InvalidFilter``."""
        where = ListFilter.of(state=state, dlq=dlq, kind=kind, queue=queue, search=search)
        async with self._connection("list_jobs") as conn:
            outputs = await self._probe.present(conn)
            async with listing.snapshot(conn):
                return await listing.list_jobs(
                    conn, where, before_id=before_id, limit=limit, outputs=outputs
                )

    async def browse(
        self,
        *,
        state: JobState | str | None = None,
        dlq: bool = False,
        kind: str | None = None,
        queue: str | None = None,
        search: str | None = None,
        before_id: int | None = None,
        limit: int = 50,
    ) -> JobPage:
        """``list_jobs`` and ``counts`` together, from one snapshot (what a screen shows)."""
        where = ListFilter.of(state=state, dlq=dlq, kind=kind, queue=queue, search=search)
        async with self._connection("browse") as conn:
            outputs = await self._probe.present(conn)
            return await listing.browse(
                conn,
                where,
                before_id=before_id,
                limit=limit,
                outputs=outputs,
                count_cap=self.count_cap,
            )

    async def counts(self, *, cap: int | None = None) -> StateCounts:
        """Jobs per state, exact up to a cap and "at least the cap" above it (see
        ``StateCounts.capped`` and ``storage.counting``). By default the console's caps:
        ``count_cap`` for the live states, 1,000 for completed, failed and cancelled; an
        explicit ``cap`` applies to every state."""
        async with self._connection("counts") as conn, listing.snapshot(conn):
            if cap is None:
                return await counting.counts(conn, cap=self.count_cap)
            return await counting.counts(conn, cap=cap, terminal_cap=cap, batches=cap)

    async def count_matching(self, **where: Any) -> int:
        """How many jobs a bulk action on this filter would touch (shown before acting).

        Always exact, unlike the tab counts: it lists every matching id, as the action would,
        so its cost grows with the number of matches."""
        return len(await self._matching_ids(ListFilter.of(**where)))

    async def _matching_ids(self, where: ListFilter) -> list[int]:
        async with self._connection("bulk_action") as conn:
            outputs = await self._probe.present(conn)
            return await listing.matching_ids(conn, where, outputs=outputs, chunk=BULK_PAGE)

    async def bulk_action(
        self,
        action: str,
        *,
        ids: list[int] | None = None,
        dry_run: bool = False,
        **where: Any,
    ) -> int:
        """Apply ``action`` to ``ids`` or to every job matching the filter; returns how many.

        ``dry_run`` only counts the targets. A job that no longer admits the action when its
        turn comes (it moved on, or was deleted meanwhile) is skipped, not an error, so the
        result can be lower than the count shown before acting.
        """
        if action not in BULK_ACTIONS:
            raise AwaError(f"Unknown bulk action {action!r}; use one of {', '.join(BULK_ACTIONS)}.")
        targets = ids if ids is not None else await self._matching_ids(ListFilter.of(**where))
        if dry_run:
            return len(targets)
        apply = getattr(
            self, f"{action}_job" if action in ("retry", "cancel", "delete") else action
        )
        done = 0
        for job_id in targets:
            try:
                await apply(job_id)
            except (InvalidJobState, JobNotFound):
                continue
            done += 1
        return done

    # -- admin --------------------------------------------------------------------------------
    async def cancel_job(self, job_id: int) -> JobRow | None:
        row = await self._admin(admin.cancel, job_id)
        if row is not None:  # after commit; a cancel that was refused raised before this
            self.events.emit(JobEvent("cancelled", row.id, row.kind, row.queue))
        return row

    async def retry_job(self, job_id: int) -> JobRow | None:
        return await self._admin(admin.retry, job_id)

    async def delete_job(self, job_id: int) -> None:
        await self._admin(admin.delete, job_id)

    async def retry_dlq(self, job_id: int) -> JobRow | None:
        return await self._admin(admin.retry_dlq, job_id)

    async def purge_dlq(self, job_id: int) -> None:
        await self._admin(admin.purge_dlq, job_id)

    async def _admin(self, action: Any, job_id: int) -> JobRow | None:
        from storage import reads

        name = action.__name__
        async with self._connection(name if name.endswith("dlq") else f"{name}_job") as conn:
            outputs = await self._probe.present(conn)
            await action(conn, job_id, outputs=outputs)
            return await reads.get_job(conn, job_id, outputs=outputs)

    async def database_read_only(self) -> bool:
        async with self._connection("database_read_only") as conn:
            return await admin.database_read_only(conn)

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
        from storage.client import kind_of

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
        """Descriptors for every registered task; an explicit descriptor output wins."""
        found = dict(self._descriptors)
        for kind, spec in tasks.items():
            base = found.get(kind) or JobKindDescriptor(kind=kind)
            if base.output is None and spec.output_type is not None:
                base = base.model_copy(update={"output": output_descriptor(spec.output_type)})
            found[kind] = base
        return list(found.values())

    async def sync_descriptors(self) -> None:
        tasks: dict[str, Any] = getattr(self, "tasks", {})
        async with self._connection("sync_descriptors") as conn:
            await descriptors.sync(conn, self.declared_descriptors(tasks))

    async def get_descriptor(self, kind: str) -> JobKindDescriptor | None:
        check_stored_name(kind, "Kind")
        async with self._connection("get_descriptor") as conn:
            return (await descriptors.fetch(conn, kind)).get(kind)

    async def list_kinds(self) -> list[KindSummary]:
        async with self._connection("list_kinds") as conn:
            return await descriptors.list_kinds(conn)

    # -- periodic schedules --------------------------------------------------------------------
    async def list_schedules(self) -> list[periodic.PeriodicSchedule]:
        """The stored periodic schedules with their next run, by name."""
        async with self._connection("list_schedules") as conn:
            return await periodic.list_schedules(conn)

    async def remove_schedule(self, name: str) -> bool:
        """Stop a stored schedule (a client that declares it again stores it again)."""
        async with self._connection("remove_schedule") as conn:
            return await periodic.remove(conn, check_stored_name(name, "Schedule"))

    # -- maintenance --------------------------------------------------------------------------
    async def run_maintenance(self, settings: MaintenanceSettings | None = None) -> PassReport:
        """One maintenance pass (promote, rescue, timeouts, rotate, prune) if this client leads."""
        async with self._connection("run_maintenance") as conn:
            report = await maintenance.run_pass(
                conn,
                settings or MaintenanceSettings(),
                outputs_supported=await self._probe.present(conn),
            )
        # Each rescue committed in its own transaction: tell listeners now, in order. A rescue
        # that failed the job for good is also an exhaustion.
        for rescued in report.rescues:
            self.events.emit(JobEvent("rescued", rescued.job_id, rescued.kind, rescued.queue))
            if rescued.state is JobState.FAILED:
                self.events.emit(JobEvent("exhausted", rescued.job_id, rescued.kind, rescued.queue))
        return report
