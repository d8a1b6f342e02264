"""Every pooled connection comes back (``storage.db.pool.pooled`` and ``give_back``).

A connection whose release raises (asyncpg warns about a listener left on it: an error under
this suite's ``-W error``), the listener's connection after its backend was killed, and one
held by a cancelled task all free their pool slot: the next borrower gets a connection and
``Pool.close()`` returns. Before ``give_back``, each of these slots stayed taken for good and
``Pool.close()`` waited for it forever (issue #23: the chaos test's hangs). The maintenance
leader's held connection comes back too: at resign, after a failed pass, and after a lost try.
Every watchdog here turns such a hang into a failure.
"""

from __future__ import annotations

import asyncio
import gc
import re
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import pytest

from storage.db.pool import connect_once, connection_of, create_pool, pooled
from storage.db.sql import TRY_LOCK_MAINTENANCE_LEADER
from storage.ops.leadership import MaintenanceLeader
from storage.ops.maintenance import PassReport
from storage.runtime.notices import NoticeListener

WATCHDOG = 20.0
"""Seconds a borrow or a close may take before the slot counts as leaked."""
STORAGE = Path(__file__).resolve().parents[3] / "storage"


@pytest.fixture
async def one_slot(migrated_dsn: str, schema: str) -> AsyncIterator[asyncpg.Pool]:
    """A pool of one connection: a slot that does not come back blocks the next borrower."""
    pool = await create_pool(migrated_dsn, schema, min_size=1, max_size=1)
    try:
        yield pool
    finally:
        pool.terminate()


async def _slot_is_free(pool: asyncpg.Pool) -> None:
    try:
        async with asyncio.timeout(WATCHDOG):
            async with pooled(pool) as conn:
                assert await conn.fetchval("SELECT 1") == 1
            await pool.close()
    except TimeoutError:
        pytest.fail("the pool slot never came back: the next borrow or Pool.close() hung")


def _ignore(*_args: object) -> None:
    return None


async def test_a_release_that_raises_still_gives_the_connection_back(
    one_slot: asyncpg.Pool,
) -> None:
    async with pooled(one_slot) as conn:
        await conn.add_listener("left_registered", _ignore)  # Pool.release warns: an error here
    await _slot_is_free(one_slot)


async def test_a_connection_held_by_a_cancelled_task_comes_back(
    one_slot: asyncpg.Pool, migrated_dsn: str
) -> None:
    holding = asyncio.Event()
    pids: list[int] = []

    async def hold() -> None:
        async with pooled(one_slot) as conn:
            pids.append(conn.get_server_pid())
            holding.set()
            await conn.execute("SELECT pg_sleep(60)")

    task = asyncio.ensure_future(hold())
    await holding.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _slot_is_free(one_slot)
    # The terminated connection's backend would sleep on for a minute, a statement left running
    # in the database the next tests share (tests/benchmarks/test_wait_events.py once saw it).
    async with connect_once(migrated_dsn) as conn:
        await conn.execute("SELECT pg_terminate_backend($1)", pids[0])


async def test_the_listener_gives_its_connection_back_after_its_backend_is_killed(
    migrated_dsn: str, one_slot: asyncpg.Pool
) -> None:
    lost = asyncio.Event()
    listener = NoticeListener(one_slot, {"awa_test_channel": _ignore}, lost.set)
    await listener.ensure()
    pid = listener.pid
    async with connect_once(migrated_dsn) as killer:
        assert await killer.fetchval("SELECT pg_terminate_backend($1)", pid)
    async with asyncio.timeout(WATCHDOG):
        await lost.wait()  # its termination listener heard of it
    await listener.close()  # its listeners are still registered on the dead connection
    await _slot_is_free(one_slot)


async def test_the_listener_gives_back_a_connection_aborted_under_it(
    one_slot: asyncpg.Pool,
) -> None:
    """The chaos test's hang: a protocol abort closes a connection without asyncpg's cleanup
    (its own comment in ``PoolConnectionHolder.release``), so no termination callback runs,
    the listeners stay registered, and ``Pool.release`` raised on them before freeing the
    slot. ``_abort`` puts the connection in exactly that state."""
    listener = NoticeListener(one_slot, {"awa_test_channel": _ignore}, _ignore)
    await listener.ensure()
    assert listener._conn is not None
    raw = connection_of(listener._conn)
    assert raw is not None
    raw._abort()  # type: ignore[attr-defined]
    assert not listener.active
    await listener.close()
    await _slot_is_free(one_slot)


async def test_the_listener_gives_a_live_connection_back_on_close(
    one_slot: asyncpg.Pool,
) -> None:
    listener = NoticeListener(one_slot, {"awa_test_channel": _ignore}, _ignore)
    await listener.ensure()
    await listener.close()
    await _slot_is_free(one_slot)


def test_the_engine_borrows_pooled_connections_only_through_pooled_or_give_back() -> None:
    """``pool.acquire()`` appears only in ``pooled`` itself and in the listener, which holds
    its connection across calls and gives it back through ``give_back``."""
    acquiring = {
        str(path.relative_to(STORAGE))
        for path in STORAGE.rglob("*.py")
        if re.search(r"\.acquire\(", path.read_text())
    }
    assert acquiring == {"db/pool.py", "runtime/notices.py", "ops/leadership.py"}
    for holder in ("runtime/notices.py", "ops/leadership.py"):
        text = (STORAGE / holder).read_text()
        assert "await give_back(self._pool, " in text
        assert ".release(" not in text


async def _a_pass(_conn: object) -> PassReport:
    return PassReport()


async def _a_failing_pass(_conn: object) -> PassReport:
    raise RuntimeError("the pass failed")


async def test_the_maintenance_leader_gives_its_held_connection_back(
    one_slot: asyncpg.Pool,
) -> None:
    leader = MaintenanceLeader(one_slot)
    assert (await leader.lead(_a_pass)).leader is True
    assert leader.leading  # kept across passes: the one slot is the leader's
    await leader.resign()
    assert not leader.leading
    await _slot_is_free(one_slot)


async def test_a_failed_pass_gives_the_leaders_connection_back(one_slot: asyncpg.Pool) -> None:
    leader = MaintenanceLeader(one_slot)
    with pytest.raises(RuntimeError):
        await leader.lead(_a_failing_pass)
    assert not leader.leading
    await _slot_is_free(one_slot)


async def test_a_follower_that_loses_the_lock_gives_the_connection_back(
    one_slot: asyncpg.Pool, migrated_dsn: str, schema: str
) -> None:
    async with connect_once(migrated_dsn) as holder:
        await holder.execute(f"SET search_path TO {schema}")
        assert await holder.fetchval(TRY_LOCK_MAINTENANCE_LEADER)
        leader = MaintenanceLeader(one_slot)
        assert (await leader.lead(_a_pass)).leader is False
        assert not leader.leading
    await _slot_is_free(one_slot)


async def test_a_task_cancelled_while_its_release_resets_leaves_no_failed_task(
    one_slot: asyncpg.Pool,
) -> None:
    """The console soak's "Task exception was never retrieved ... PoolConnectionHolder.release()
    ... connection was closed in the middle of operation": a read cancelled (an exclusive
    worker replaced) while asyncpg's shielded release was resetting its connection. The cancel
    reached ``give_back``, which terminated the connection under the reset still running in
    asyncpg's shielded task; that task failed, and nobody was left to retrieve its exception.
    Here the cancel is scheduled before the release starts, so it lands inside it every time."""
    loop = asyncio.get_running_loop()
    unhandled: list[dict[str, object]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: unhandled.append(context))
    try:
        task: asyncio.Task[None] | None = None

        async def borrow() -> None:
            async with pooled(one_slot) as conn:
                await conn.fetchval("SELECT 1")
                assert task is not None
                loop.call_soon(task.cancel)  # runs once the release is under way

        task = asyncio.ensure_future(borrow())
        with pytest.raises(asyncio.CancelledError):
            await task
        await _slot_is_free(one_slot)  # also waits for the release, which finished meanwhile
        gc.collect()  # a failed task that nobody awaited reports itself when collected
    finally:
        loop.set_exception_handler(previous)
    assert [str(context.get("message")) for context in unhandled] == []
