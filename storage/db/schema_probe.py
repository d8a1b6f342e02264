"""Binary-first support: does this queue-storage schema have a migration's objects yet (the
output columns of v002, the runtime registry of v010)?

A positive answer is cached for good; a negative one is re-checked at most every 30 seconds,
so a runtime started before the migration picks the columns up without a restart.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from storage.db.pool import Conn

RECHECK_SECONDS = 30.0

PROBE = """
SELECT count(*) = 2 FROM pg_attribute
 WHERE NOT attisdropped AND (
       (attrelid = to_regclass(current_schema() || '.receipt_completion_batches')
        AND attname = 'outputs')
    OR (attrelid = to_regclass(current_schema() || '.done_entries') AND attname = 'output'))
"""
# v010 adds the table and claim_batches.runtime_id in one transaction: the table stands for both.
RUNTIMES_PROBE = "SELECT to_regclass(current_schema() || '.runtimes') IS NOT NULL"


class SchemaProbe:
    """Caches whether the current schema has what ``statement`` (one boolean) looks for."""

    def __init__(self, statement: str, clock: Callable[[], float] = time.monotonic) -> None:
        self._statement = statement
        self._clock = clock
        self._present = False
        self._checked_at: float | None = None

    @property
    def cached(self) -> bool:
        """True once it was seen; no further probe is needed."""
        return self._present

    async def present(self, conn: Conn) -> bool:
        if self._present:
            return True
        now = self._clock()
        if self._checked_at is None or now - self._checked_at >= RECHECK_SECONDS:
            self._checked_at = now
            self._present = bool(await conn.fetchval(self._statement))
        return self._present


class OutputColumnsProbe(SchemaProbe):
    """Caches whether the current schema can store completion outputs (v002)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(PROBE, clock)


class RuntimesProbe(SchemaProbe):
    """Caches whether the current schema has the runtime registry (v010)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(RUNTIMES_PROBE, clock)
