"""The job a handler receives: its typed args, its output slot, progress, staging and callbacks."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from storage.insert.enqueue import NewJob
from storage.values.errors import StageError
from storage.values.output import OutputSlot
from storage.values.results import CallbackToken

A = TypeVar("A")


class AttemptEnd(NamedTuple):
    """What an attempt sealed when its handler returned (``Job.finish``): a tuple, one is built
    per attempt."""

    output_text: str | None  # the output slot's text, sealed: later set_output calls raise
    progress: Any  # set_progress's value if the handler called it this attempt, else None
    staged: Sequence[NewJob]  # follow-ups for the completion transaction
    poisoned: str | None  # why a stage failed (the attempt then fails terminally)


class AttemptServices(Protocol):
    """What a running job may ask of its runtime (implemented by the Client)."""

    def build_job(self, args: Any, options: dict[str, Any]) -> NewJob: ...

    async def register_callback(self, job: Job[Any], timeout_seconds: float) -> CallbackToken: ...

    async def wait_for_callback(self, job: Job[Any], token: CallbackToken) -> Any: ...


@dataclass(slots=True)
class Job(Generic[A]):
    """One attempt of a job, as its handler sees it.

    ``errors`` is the error history with failed outputs stripped: a failed output is a report
    for people, not a checkpoint (progress is the checkpoint).

    One is built per attempt: slotted, and its cancel event, staged list and (for a plain job)
    its tags, metadata and errors made only when someone asks: a container the collector
    tracks per attempt is work for it whether or not the handler looks.
    """

    id: int
    kind: str
    queue: str
    args: A
    attempt: int
    max_attempts: int
    priority: int
    run_lease: int
    _tags: list[str] | None
    _metadata: dict[str, Any] | None
    _errors: list[dict[str, Any]] | None
    progress: Any
    _slot: OutputSlot
    _services: AttemptServices | None = None
    _claim_id: int | None = None
    _cancel: asyncio.Event | None = None
    _staged: list[NewJob] | None = None
    _poisoned: str | None = None
    _progress_dirty: bool = False

    # -- the job's own lists, each the handler's to change ---------------------------------------
    @property
    def tags(self) -> list[str]:
        if self._tags is None:
            self._tags = []
        return self._tags

    @tags.setter
    def tags(self, value: list[str]) -> None:
        self._tags = value

    @property
    def metadata(self) -> dict[str, Any]:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    @metadata.setter
    def metadata(self, value: dict[str, Any]) -> None:
        self._metadata = value

    @property
    def errors(self) -> list[dict[str, Any]]:
        if self._errors is None:
            self._errors = []
        return self._errors

    @errors.setter
    def errors(self, value: list[dict[str, Any]]) -> None:
        self._errors = value

    # -- output -----------------------------------------------------------------------------
    def set_output(self, value: Any) -> None:
        """Record this attempt's output, replacing any earlier one; ``None`` clears it.

        Raises ``OutputError`` (and clears the slot) when the value cannot be recorded.
        """
        self._slot.set(value)

    def clear_output(self) -> None:
        self._slot.clear()

    @property
    def output(self) -> Any:
        """The output recorded so far."""
        return self._slot.get()

    # -- progress and cancellation ------------------------------------------------------------
    def set_progress(self, value: Any) -> None:
        """A checkpoint the next attempt sees; flushed by the runtime's heartbeat and at the end."""
        self.progress = value
        self._progress_dirty = True

    @property
    def progress_set(self) -> Any:
        """``progress`` if the handler called ``set_progress`` this attempt, else None (what the
        heartbeat writes)."""
        return self.progress if self._progress_dirty else None

    def is_cancelled(self) -> bool:
        """True once an operator cancelled this job; the handler should stop soon."""
        return self._cancel is not None and self._cancel.is_set()

    async def wait_cancelled(self) -> None:
        """Return once an operator cancelled this job."""
        await self._cancelled.wait()

    def cancel(self) -> None:
        """Mark this job cancelled (the runtime calls it on an operator's cancel)."""
        self._cancelled.set()

    @property
    def _cancelled(self) -> asyncio.Event:
        if self._cancel is None:
            self._cancel = asyncio.Event()
        return self._cancel

    @property
    def claim_id(self) -> int | None:
        """The claim batch this attempt belongs to (None: not run by a runtime)."""
        return self._claim_id

    # -- the end (the runtime's) -----------------------------------------------------------------
    def finish(self) -> AttemptEnd:
        """Seal the attempt once its handler returned: what it recorded, for the writer."""
        text, dirty = self._slot.seal(), self._progress_dirty
        if text is None and self._staged is None and self._poisoned is None and not dirty:
            return _NOTHING_RECORDED  # the plain attempt: no tuple built per job
        progress = self.progress if dirty else None
        return AttemptEnd(text, progress, self._staged or (), self._poisoned)

    # -- staged follow-ups --------------------------------------------------------------------
    def stage(self, args: Any, **options: Any) -> None:
        """Buffer a follow-up job, inserted in this attempt's completion transaction.

        A follow-up that cannot be staged raises ``StageError`` and poisons the attempt: it
        then fails terminally instead of completing, since a follow-up would be lost.
        """
        if self._services is None:
            raise StageError("This job has no runtime to stage follow-ups with.")
        try:
            staged = self._services.build_job(args, options)
        except Exception as exc:
            self._poisoned = f"{type(exc).__name__}: {exc}"
            raise StageError(f"The follow-up could not be staged: {exc}") from exc
        if self._staged is None:
            self._staged = []
        self._staged.append(staged)

    # -- callbacks ----------------------------------------------------------------------------
    async def register_callback(self, timeout_seconds: float = 3600) -> CallbackToken:
        """Register a callback id an external system will answer within ``timeout_seconds``."""
        if self._services is None:
            raise StageError("This job has no runtime to register callbacks with.")
        return await self._services.register_callback(self, timeout_seconds)

    async def wait_for_callback(self, token: CallbackToken) -> Any:
        """Wait here (the handler stays alive) for ``resolve_callback``; returns its payload."""
        if self._services is None:
            raise StageError("This job has no runtime to wait for callbacks with.")
        return await self._services.wait_for_callback(self, token)


_NOTHING_RECORDED = AttemptEnd(None, None, (), None)
