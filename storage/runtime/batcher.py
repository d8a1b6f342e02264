"""The completion batcher: completions are flushed together, at 512 jobs or about 1 ms after
the first request, in one transaction per flush: compact ones through ``compact_writes``,
general-path ones without staged follow-ups through ``general_writes`` (a flush of its own,
on the same timer). Every flush commits asynchronously (``BEGIN_FLUSH`` says why).

The batcher owns each request's sealed output until the flush commits and lends it to every
retry, so a flush retried after a lost connection publishes the same value; a retry that finds
its own earlier commit reports ``ALREADY`` rather than stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

import asyncpg

from storage.db.pool import Conn, begun, pooled
from storage.finalize import compact_writes, general_writes
from storage.finalize.types import CompactCompletion, GeneralCompletion, Outcome
from storage.runtime.supervise import retry_transient

FLUSH_SIZE = 512
FLUSH_DELAY_SECONDS = 0.001

T = TypeVar("T", CompactCompletion, GeneralCompletion)
Write = Callable[[Conn, list[T], bool], Awaitable[list[Outcome]]]
OneCall = Callable[[Conn, list[T], bool], Awaitable[list[Outcome] | None]]
"""Writes a flush inside its transaction and answers one outcome per item, in item order."""


class Pending(Protocol[T]):
    """A submitted completion and whom to tell: the runtime's attempt itself (one object per
    job fewer than a tuple of the item and a bound method), or a future's ``_Settle``."""

    completion: T

    def flushed(self, item: T, outcome: Outcome | Exception) -> None:
        """Told the outcome once the flush committed, or the error that failed it for good."""
        ...


class _Settle(Generic[T]):
    """Resolves a future with its completion's outcome (``submit``, ``submit_general``)."""

    __slots__ = ("completion", "future")

    def __init__(self, completion: T) -> None:
        self.completion: T = completion
        self.future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()

    def flushed(self, item: T, outcome: Outcome | Exception) -> None:
        if self.future.done():  # its waiter gave up
            return
        if isinstance(outcome, Exception):
            self.future.set_exception(outcome)
        else:
            self.future.set_result(outcome)


class _Queue(Generic[T]):
    """The completions of one kind waiting for a flush, and how a flush writes them (in one
    call where it can, ``one_call``)."""

    def __init__(self, write: Write[T], name: str, one_call: OneCall[T] | None = None) -> None:
        self.write: Write[T] = write
        self.one_call: OneCall[T] | None = one_call
        self.name = name
        self.pending: list[Pending[T]] = []

    def take(self, size: int) -> list[Pending[T]]:
        batch, self.pending = self.pending[:size], self.pending[size:]
        return batch


# A flush's transaction commits without waiting for its WAL to reach the disk (for this
# transaction only; every flush begins with it, in the round trip BEGIN takes anyway). The
# batcher flushes only what a runtime's handlers ended with (``executor``): nobody outside
# the runtime is waiting to be told "done" by it. An external completion (``callbacks``, over
# HTTP or Python), an operator's write, an enqueue, a failure, a snooze, a park, a rescue and
# a completion with staged follow-ups each commit in their own transaction, synchronously.
# Why a flush lost in a server crash (up to ~3 x wal_writer_delay after its commit) keeps
# every promise:
# - It is the worker dying just before the flush: the attempts stay open (running, no closure,
#   no receipt row), the runtime has stopped heartbeating them, and rescue retries each once
#   its heartbeat (or its claim) is older than the stale bound: at-least-once, as for a lost
#   claim (``claim``). The flush's outputs go with it: an output is published only by its
#   attempt's transition, in the same transaction.
# - No durable write can depend on a lost flush. WAL reaches the disk in order, and any later
#   commit that waits (an enqueue reusing a released unique key, an operator's retry of a
#   completed job, a rescue, any durable write) flushes the WAL past the flush's commit
#   record: whatever a synchronous commit did after reading the completion is durable only
#   with it.
# - What a crash can undo: readers (the console, ``get_job``, HTTP reads) and this runtime's
#   own listeners and metrics may have seen the completion before the crash, and see the job
#   complete again, maybe with another output, after the rescue. Runs are at-least-once
#   already; an attempt that completes twice in a job's history is what a rescue looks like.
# - The flush's retry after a lost connection stays lease-guarded: its commit survived
#   (``ALREADY``) or it did not (written now), never both.
BEGIN_FLUSH = "BEGIN; SET LOCAL synchronous_commit = off"


async def flush_on(
    conn: Conn,
    write: Write[T],
    items: list[T],
    supported: bool,
    one_call: OneCall[T] | None = None,
) -> list[Outcome]:
    """One flush of ``items`` on ``conn``: by ``one_call`` where it can (one round trip,
    committed asynchronously), else by ``write`` in a transaction begun by ``BEGIN_FLUSH``.
    The one place a handler's completion commits asynchronously."""
    if one_call is not None and (done := await one_call(conn, items, supported)) is not None:
        return done
    async with begun(conn, BEGIN_FLUSH):
        return await write(conn, items, supported)


async def write_compact(
    conn: Conn, items: list[CompactCompletion], supported: bool
) -> list[Outcome]:
    return await compact_writes.write_compact(conn, items, outputs_supported=supported)


async def compact_in_one_call(
    conn: Conn, items: list[CompactCompletion], supported: bool
) -> list[Outcome] | None:
    return await compact_writes.flush_in_one_call(conn, items, outputs_supported=supported)


async def write_general(
    conn: Conn, items: list[GeneralCompletion], supported: bool
) -> list[Outcome]:
    outcomes = await general_writes.lock_and_write_many(conn, items, outputs_supported=supported)
    return [outcomes[item.ref.key] for item in items]


class CompletionBatcher:
    """Collects completions and flushes them; ``submit`` and ``submit_general`` resolve after
    commit, ``submit_with`` tells a callback."""

    def __init__(
        self,
        pool: asyncpg.Pool,
        outputs_supported: Callable[[], Awaitable[bool]],
        *,
        flush_size: int = FLUSH_SIZE,
        flush_delay: float = FLUSH_DELAY_SECONDS,
        max_concurrent_flushes: int = 2,
    ) -> None:
        self._pool = pool
        self._outputs_supported = outputs_supported
        self._flush_size = flush_size
        self._flush_delay = flush_delay
        self._compact = _Queue[CompactCompletion](
            write_compact, "completion flush", compact_in_one_call
        )
        self._general = _Queue[GeneralCompletion](write_general, "general completion flush")
        self._timer: asyncio.TimerHandle | None = None
        self._held = 0  # callers of ``hold`` not yet released: no flush by the clock meanwhile
        self._flushes: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(max_concurrent_flushes)

    def submit_with(self, pending: Pending[CompactCompletion]) -> None:
        """Queue ``pending.completion`` for a flush; ``pending.flushed`` hears its outcome (no
        future, no wake-up of the submitter: the runtime's compact attempts end this way)."""
        self._submit(self._compact, pending)

    def submit(self, item: CompactCompletion) -> asyncio.Future[Outcome]:
        """Queue ``item`` for a flush; the future resolves to its outcome after commit."""
        settle = _Settle(item)
        self._submit(self._compact, settle)
        return settle.future

    def submit_general(self, item: GeneralCompletion) -> asyncio.Future[Outcome]:
        settle = _Settle(item)
        self._submit(self._general, settle)
        return settle.future

    def _submit(self, queue: _Queue[T], pending: Pending[T]) -> None:
        queue.pending.append(pending)
        if len(queue.pending) >= self._flush_size:
            self._start_flush()
        elif self._timer is None and not self._held:
            self._arm()

    def _arm(self) -> None:
        self._timer = asyncio.get_running_loop().call_later(self._flush_delay, self._start_flush)

    def hold(self) -> None:
        """Start no flush by the clock until ``release`` (a full one still starts): the runtime
        starts a claim's handlers over several turns of the loop, and the completions of quick
        ones belong in one flush, as when they all ran in one turn."""
        self._held += 1

    def release(self) -> None:
        self._held -= 1
        if (
            not self._held
            and self._timer is None
            and (self._compact.pending or self._general.pending)
        ):
            self._arm()

    @property
    def idle(self) -> bool:
        return not self._compact.pending and not self._general.pending and not self._flushes

    async def drain(self) -> None:
        """Flush what is pending and wait for every flush in progress."""
        self._start_flush()
        while self._flushes:
            await asyncio.gather(*self._flushes, return_exceptions=True)

    def _start_flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._start(self._compact)
        self._start(self._general)

    def _start(self, queue: _Queue[T]) -> None:
        while queue.pending:
            task = asyncio.get_running_loop().create_task(
                self._flush(queue, queue.take(self._flush_size))
            )
            self._flushes.add(task)
            task.add_done_callback(self._flushes.discard)

    async def _flush(self, queue: _Queue[T], batch: list[Pending[T]]) -> None:
        items = [pending.completion for pending in batch]
        async with self._gate:
            try:
                outcomes: Sequence[Outcome | Exception] = await self._flush_with_retries(
                    queue, items
                )
            except Exception as exc:
                outcomes = [exc] * len(batch)
        for pending, outcome in zip(batch, outcomes, strict=True):
            pending.flushed(pending.completion, outcome)

    async def _flush_with_retries(self, queue: _Queue[T], items: list[T]) -> list[Outcome]:
        async def flush() -> list[Outcome]:
            supported = await self._outputs_supported()
            async with pooled(self._pool) as conn:
                # A retry's "already" is its own earlier commit whose ack was lost.
                return await flush_on(conn, queue.write, items, supported, queue.one_call)

        # Transient: the connection or the server (including asyncpg's "another operation is
        # in progress" on a connection killed mid-statement).
        outcomes: list[Outcome] = await retry_transient(
            queue.name, flush, stop=self._pool.is_closing
        )
        return outcomes
