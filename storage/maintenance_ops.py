"""The client's maintenance part: one pass now, the runtime's pass as leader, resigning.

The pass itself lives in ``storage.ops.maintenance``; the leader's lock in
``storage.ops.leadership`` (kept on ``Session.leader``). ``Client`` publishes these under the
same names.
"""

from __future__ import annotations

from functools import partial

from storage.db.pool import Conn, translate_errors
from storage.ops import maintenance
from storage.ops.maintenance import MaintenanceSettings, PassReport
from storage.ops.rescue import emit_rescued
from storage.session import Session


class MaintenanceOperations:
    """Maintenance passes on one client's schema, led through the session's leader's lock."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def run_maintenance(self, settings: MaintenanceSettings | None = None) -> PassReport:
        """One maintenance pass (promote, rescue, timeouts, rotate, prune) if this client leads:
        on the connection its runtime keeps the leader's lock on, or else if it wins the lock
        for this pass."""
        chosen = settings or MaintenanceSettings()

        async def borrowed() -> PassReport:
            async with self._session.connection("run_maintenance") as conn:
                return await maintenance.run_pass(
                    conn,
                    chosen,
                    outputs_supported=await self._session.probe.present(conn),
                    registry=await self._session.runtimes_probe.present(conn),
                )

        with translate_errors(self._session.dsn, "run_maintenance"):
            report = await self._session.leader.once(partial(self._leading, chosen), borrowed)
        return self._told(report)

    async def lead_maintenance(self, settings: MaintenanceSettings) -> PassReport:
        """The runtime's pass: this client keeps the leader's lock across passes once it wins
        it, and tries for it only now and then while another leads (``storage.ops.leadership``)."""
        return self._told(await self._session.leader.lead(partial(self._leading, settings)))

    async def resign_maintenance(self) -> None:
        """Give the leader's lock up, with the connection holding it (a no-op when this
        client does not lead): the runtime does when it stops or fails."""
        await self._session.leader.resign()

    async def _leading(self, settings: MaintenanceSettings, conn: Conn) -> PassReport:
        return await maintenance.run_pass_leading(
            conn,
            settings,
            outputs_supported=await self._session.probe.present(conn),
            registry=await self._session.runtimes_probe.present(conn),
        )

    def _told(self, report: PassReport) -> PassReport:
        # Each rescue committed in its own transaction: tell listeners now, in order.
        emit_rescued(self._session.events, report.rescues)
        return report
