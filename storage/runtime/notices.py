"""The LISTEN connection for cancellations and callback answers.

It holds one pool connection. When the server or the network drops it, the termination
callback marks it lost and wakes whoever waits; ``ensure`` then hands the dead connection back
to the pool (``give_back``: so a killed listener, or one whose UNLISTEN or release fails, never
leaks a pool slot) and LISTENs again on a fresh one.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from storage.db.pool import connection_of, give_back

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
        # A dead connection is handed back by asyncpg before its termination callback runs.
        return self._live() is not None

    @property
    def pid(self) -> int | None:
        """The server process id of the live listening connection, if any."""
        live = self._live()
        return live.get_server_pid() if live is not None else None

    def _live(self) -> asyncpg.Connection[asyncpg.Record] | None:
        if self._conn is None or self._lost.is_set():
            return None
        raw = connection_of(self._conn)
        return raw if raw is not None and not raw.is_closed() else None

    async def ensure(self) -> None:
        """LISTEN on every channel, on a fresh connection if the last one was lost."""
        if self.active:
            return
        await self.close()
        conn = await self._pool.acquire()
        try:
            conn.add_termination_listener(self._terminated)
            for channel, handler in self._channels.items():
                await conn.add_listener(channel, handler)
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
        if self._conn is not None and self._live() is None:
            self._lost.set()

    async def close(self) -> None:
        """Stop listening and hand the connection back to the pool (dead or alive)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await self._give_back(conn)

    async def _give_back(self, conn: PoolConnectionProxy[asyncpg.Record]) -> None:
        """UNLISTEN, then give the connection back (``give_back``: released, or terminated
        when that fails, as it does for a dead one whose listeners cannot be removed)."""
        raw = connection_of(conn)
        if raw is None:  # its backend died and asyncpg already handed it back
            return
        raw.remove_termination_listener(self._terminated)  # it is no longer ours to watch
        task = asyncio.current_task()
        try:  # a cancelled task waits on no server: give_back terminates the connection then
            if not raw.is_closed() and not (task is not None and task.cancelling()):
                for channel, handler in self._channels.items():
                    await raw.remove_listener(channel, handler)
        finally:
            await give_back(self._pool, conn)

    def _terminated(self, _conn: object) -> None:
        self._lost.set()
        self._on_lost()
