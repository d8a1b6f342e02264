"""One attempt a runtime claimed and is running (or finalizing): ``InFlight``.

The ``Runtime`` (``storage.runtime.loop``) holds one per job in ``Runtime.inflight`` and frees
its slot through ``release``; ``storage.runtime.executor`` sees it as its ``Tracker``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from storage.finalize.types import CompactCompletion, Outcome
from storage.runtime import executor
from storage.runtime.claim import ClaimedJob
from storage.runtime.job import Job

if TYPE_CHECKING:
    from storage.runtime.loop import Runtime

log = logging.getLogger("storage")


class InFlight:
    """An attempt this runtime claimed and is running (or finalizing): its ``executor.Tracker``.

    One per job, so slotted; its task runs ``run``, and its slot is freed when the end is
    written, which for a compact completion is when ``flushed`` hears of it (no future, no
    done callback, no closure per job: it waits in the batcher itself, holding its
    ``completion``)."""

    __slots__ = ("claimed", "completion", "job", "runtime", "task")
    completion: CompactCompletion  # the batcher's, from the handler's end until the flush

    def __init__(self, runtime: Runtime, claimed: ClaimedJob) -> None:
        self.runtime = runtime
        self.claimed = claimed
        self.task: asyncio.Task[None] | None = None
        self.job: Job[Any] | None = None  # set once the handler starts; None if it never does

    @property
    def running(self) -> bool:
        return self.task is not None and not self.task.done()

    async def run(self) -> None:
        try:
            ended = await executor.run_attempt(self.runtime.host, self.claimed, self)
        except asyncio.CancelledError:
            self.release()
            raise
        except Exception as error:
            self.unfinished(error)
            return
        if ended is not None:
            self.release()
        else:  # until the flush: the job and this task are done with, so no longer held
            self.job = self.task = None

    def has_state(self) -> bool:
        stated = self.runtime.stated  # empty unless some attempt here has a state row
        return bool(stated) and (self.claimed.job_id, self.claimed.run_lease) in stated

    def flushed(self, item: CompactCompletion, outcome: Outcome | Exception) -> None:
        if isinstance(outcome, Exception):
            self.unfinished(outcome)
            return
        self.release()
        executor.compact_ended(self.runtime.host, self.claimed, item.output_text, outcome)

    def unfinished(self, error: Exception) -> None:
        self.release()
        # The class only: a driver error's message can quote the data it choked on.
        log.error(
            "attempt of job %s failed to finalize (%s)", self.claimed.job_id, type(error).__name__
        )

    def release(self) -> None:
        runtime, key = self.runtime, (self.claimed.job_id, self.claimed.run_lease)
        runtime.inflight.pop(key, None)
        runtime.stated.discard(key)
        runtime.slot_freed()
