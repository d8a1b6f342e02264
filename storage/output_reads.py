"""The client's output-reading part: what stored and kept outputs look like in bulk.

The last good output of a kind (``storage.read.last_output``), the outputs a failure group's
members kept (``storage.read.group_outputs``) and a kind's schema drift (``storage.read.drift``).
Each is a bounded read in one snapshot; ``Client`` publishes them under the same names.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from storage.read import drift, group_outputs, last_output
from storage.read.listing_filter import check_text, since_moment
from storage.session import Session
from storage.values.names import check_stored_name
from storage.values.shapes import GroupOutputs, SchemaDrift


class OutputReads:
    """Bounded reads over one client's stored and kept outputs."""

    def __init__(self, session: Session) -> None:
        self._session = session

    async def last_good_output(
        self, kind: str, queue: str | None = None
    ) -> last_output.LastGoodOutput | None:
        """The most recent completed output of ``kind`` (in ``queue`` when given): what a
        failed attempt's kept output is compared with. Bounded: None means none among
        ``storage.read.last_output.LAST_GOOD_BOUND``, not "never"."""
        async with self._session.connection("last_good_output") as conn:
            outputs = await self._session.probe.present(conn)
            return await last_output.last_good_output(conn, kind, queue, outputs=outputs)

    async def failure_group_outputs(
        self,
        kind: str,
        signature: str,
        *,
        field: str | None = None,
        since: datetime | timedelta | None = None,
        queue: str | None = None,
    ) -> GroupOutputs:
        """The outputs the members of one failure group (``failure_groups``) kept: their
        shapes with counts and a sample, and with ``field`` (a top-level key, e.g. one the
        kind's output schema declares) one row per value of it. Bounded as the groups are."""
        for what, text in (("kind", kind), ("signature", signature), ("queue", queue)):
            check_text(what, text)
        if field is not None:
            check_stored_name(field, "Field")
        async with self._session.connection("failure_group_outputs") as conn:
            return await group_outputs.group_outputs(
                conn, kind, signature, since=since_moment(since), queue=queue, field=field
            )

    async def schema_drift(self, kind: str) -> SchemaDrift:
        """The recent completed outputs of ``kind`` that do not fit its current declared
        schema: counted within ``drift.LAST_GOOD_BOUND``, the newest listed with the path and
        keyword each breaks (never the value)."""
        async with self._session.connection("schema_drift") as conn:
            outputs = await self._session.probe.present(conn)
            window = await drift.read_window(conn, kind, outputs=outputs)
        return await drift.check_window(window)
