"""The completion batcher: completions are flushed together, at 512 jobs or about 1 ms after
the first request, in one transaction per flush: compact ones through ``compact_writes``,
general-path ones without staged follow-ups through ``general_writes`` (a flush of its own,
on the same timer).

The batcher owns each request's sealed output until the flush commits and lends it to every
retry, so a flush retried after a lost connection publishes the same value; a retry that finds
its own earlier commit reports ``ALREADY`` rather than stale.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Protocol, TypeVar

import asyncpg

from storage import compact_writes, general_writes
from storage.attempt import AttemptKey, AttemptRef, CompactCompletion, GeneralCompletion, Outcome
from storage.db import Conn
from storage.supervise import retry_transient

FLUSH_SIZE = 512
FLUSH_DELAY_SECONDS = 0.001


class _Item(Protocol):
    @property
    def ref(self) -> AttemptRef: ...


T = TypeVar("T", bound=_Item)
Pending = tuple[T, "asyncio.Future[Outcome]"]
"""A submitted completion and the future its submitter awaits (a tuple: built per job)."""
Write = Callable[[Conn, Sequence[T], bool], Awaitable[dict[AttemptKey, Outcome]]]


class _Queue(Generic[T]):
    """The completions of one kind waiting for a flush, and how a flush writes them."""

    def __init__(self, write: Write[T], name: str) -> None:
        self.write = write
        self.name = name
        self.pending: list[Pending[T]] = []

    def take(self, size: int) -> list[Pending[T]]:
        batch, self.pending = self.pending[:size], self.pending[size:]
        return batch


async def _write_compact(
    conn: Conn, items: Sequence[CompactCompletion], supported: bool
) -> dict[AttemptKey, Outcome]:
    return await compact_writes.complete_compact(conn, list(items), outputs_supported=supported)


async def _write_general(
    conn: Conn, items: Sequence[GeneralCompletion], supported: bool
) -> dict[AttemptKey, Outcome]:
    return await general_writes.complete_many(conn, items, outputs_supported=supported)


class CompletionBatcher:
    """Collects completions and flushes them; ``submit`` and ``submit_general`` resolve after
    commit."""

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
        self._compact = _Queue[CompactCompletion](_write_compact, "completion flush")
        self._general = _Queue[GeneralCompletion](_write_general, "general completion flush")
        self._timer: asyncio.TimerHandle | None = None
        self._flushes: set[asyncio.Task[None]] = set()
        self._gate = asyncio.Semaphore(max_concurrent_flushes)

    def submit(self, item: CompactCompletion) -> asyncio.Future[Outcome]:
        return self._submit(self._compact, item)

    def submit_general(self, item: GeneralCompletion) -> asyncio.Future[Outcome]:
        return self._submit(self._general, item)

    def _submit(self, queue: _Queue[T], item: T) -> asyncio.Future[Outcome]:
        future: asyncio.Future[Outcome] = asyncio.get_running_loop().create_future()
        queue.pending.append((item, future))
        if len(queue.pending) >= self._flush_size:
            self._start_flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(
                self._flush_delay, self._start_flush
            )
        return future

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
        async with self._gate:
            try:
                outcomes = await self._flush_with_retries(queue, [item for item, _ in batch])
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                return
        for item, future in batch:
            if not future.done():
                future.set_result(outcomes[item.ref.key])

    async def _flush_with_retries(
        self, queue: _Queue[T], items: list[T]
    ) -> dict[AttemptKey, Outcome]:
        async def flush() -> dict[AttemptKey, Outcome]:
            supported = await self._outputs_supported()
            async with self._pool.acquire() as conn:
                # A retry's "already" is its own earlier commit whose ack was lost.
                return await queue.write(conn, items, supported)

        # Transient: the connection or the server (including asyncpg's "another operation is
        # in progress" on a connection killed mid-statement).
        return await retry_transient(queue.name, flush, stop=self._pool.is_closing)
