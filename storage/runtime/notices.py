"""The LISTEN connection for cancellations and callback answers.

It holds one pool connection. When the server or the network drops it, the termination
callback marks it lost and wakes whoever waits; ``ensure`` then hands the dead connection back
to the pool (so a killed listener never leaks a pool slot) and LISTENs again on a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from storage.runtime.supervise import describe

log = logging.getLogger("storage")

Notice = Callable[[object, int, str, object], None]


class NoticeListener:
    def __init__(
        self, pool: asyncpg.Pool, channels: dict[str, Notice], on_lost: Callable[[], None]
    ) -> None:
        self._pool = pool
        self._channels = channels
        self._on_lost = on_lost
        self._conn: PoolConnectionProxy[asyncpg.Record] | None = None
        self._lost = asyncio.Event()

    @property
    def active(self) -> bool:
        return self._conn is not None and not self._lost.is_set()

    @property
    def pid(self) -> int | None:
        """The server process id of the live listening connection, if any."""
        return self._conn.get_server_pid() if self.active and self._conn is not None else None

    async def ensure(self) -> None:
        """LISTEN on every channel, on a fresh connection if the last one was lost."""
        if self.active:
            return
        await self.close()
        conn = await self._pool.acquire()
        try:
            for channel, handler in self._channels.items():
                await conn.add_listener(channel, handler)
            conn.add_termination_listener(self._terminated)
        except BaseException:
            await self._give_back(conn)
            raise
        self._conn = conn
        self._lost.clear()

    async def wait_lost(self, check_every: float) -> None:
        """Return when the connection is lost, or after ``check_every`` seconds (a check of
        last resort, in case the loss went unnoticed)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._lost.wait(), check_every)
        if self._conn is not None and self._conn.is_closed():
            self._lost.set()

    async def close(self) -> None:
        """Stop listening and hand the connection back to the pool (dead or alive)."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            if not self._lost.is_set() and not conn.is_closed():
                for channel, handler in self._channels.items():
                    await conn.remove_listener(channel, handler)
        finally:
            await self._give_back(conn)

    async def _give_back(self, conn: PoolConnectionProxy[asyncpg.Record]) -> None:
        try:
            await self._pool.release(conn)
        except Exception as exc:  # the pool terminated the broken connection; it is gone
            log.warning("listener connection released with an error (%s)", describe(exc))

    def _terminated(self, _conn: object) -> None:
        self._lost.set()
        self._on_lost()
