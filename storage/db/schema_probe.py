"""Binary-first support: does this queue-storage schema have the output columns yet?

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


class OutputColumnsProbe:
    """Caches whether the current schema can store completion outputs."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._present = False
        self._checked_at: float | None = None

    @property
    def cached(self) -> bool:
        """True once the columns were seen; no further probe is needed."""
        return self._present

    async def present(self, conn: Conn) -> bool:
        if self._present:
            return True
        now = self._clock()
        if self._checked_at is None or now - self._checked_at >= RECHECK_SECONDS:
            self._checked_at = now
            self._present = bool(await conn.fetchval(PROBE))
        return self._present
